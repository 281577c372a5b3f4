"""The `vocoder_v4` golden, upstream's side: `module/models.py`'s `Generator` built as
`TTS.init_vocoder("v4")` builds it (gin_channels=0, is_bias=True, `remove_weight_norm()` before a
strict `load_state_dict` of `vocoder.pth`, eval mode), at koe's small sizes, run on each mel.

    <oracle python> tests/oracle_gpt_sovits/golden_vocoder_v4.py <folder> <out.npz>

Recorded: `state_sha256` and `<mel>.audio` (1, 1, samples).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from vocoder_oracle import v4_vocoder  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    vocoder = v4_vocoder(folder)
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    for key, mel in np.load(folder / "inputs.npz").items():
        with torch.inference_mode():
            result[f"{key.removeprefix('mel.')}.audio"] = vocoder(torch.from_numpy(mel)).numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
