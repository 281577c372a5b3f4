"""The `bigvgan` golden, upstream's side: the vendored `BigVGAN` loaded as `TTS.init_vocoder("v3")`
loads it (`BigVGAN.from_pretrained(folder)`, then `remove_weight_norm()`, eval mode) from koe's
small release folders, run on each mel.

    <oracle python> tests/oracle_gpt_sovits/golden_bigvgan.py <folder> <out.npz>

Recorded: `<model>.state_sha256` and `<model>.<mel>.audio` (1, 1, samples).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from BigVGAN.bigvgan import BigVGAN  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    arrays = dict(np.load(folder / "inputs.npz"))
    result: dict[str, np.ndarray] = {}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        name, digest = line.split()
        result[f"{name}.state_sha256"] = np.array(digest)
        vocoder = BigVGAN.from_pretrained(str(folder / name))
        vocoder.remove_weight_norm()
        vocoder = vocoder.eval()
        for key, mel in arrays.items():
            with torch.inference_mode():
                result[f"{name}.{key.removeprefix('mel.')}.audio"] = vocoder(torch.from_numpy(mel)).numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
