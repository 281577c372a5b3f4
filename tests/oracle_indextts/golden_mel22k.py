"""The `mel22k` golden, upstream's side: IndexTTS 2's 22.05 kHz reference log-mel (`mel_fn`).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_mel22k.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_mel22k.py `write_inputs` wrote. Each config's
arguments are read from its yaml as `IndexTTS2.__init__` reads them (indextts/infer_v2.py, `mel_fn_args`)
and each clip goes through `indextts.s2mel.modules.audio.mel_spectrogram(clip.float(), **args)`.
Upstream caches its filterbank and window per rate and fmax only: the caches are emptied between
configs (one model has one config). Writes each mel and the fmin / fmax each config ran with.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import mel_fn_args, recorded_hashes  # noqa: E402
from indextts.s2mel.modules import audio  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    result = recorded_hashes(folder)
    for config, clips in json.loads((folder / "cases.json").read_text()).items():
        args = mel_fn_args(OmegaConf.load(folder / f"{config}.yaml"))
        audio.mel_basis.clear()
        audio.hann_window.clear()
        result[f"{config}.fmin"] = np.array(float(args["fmin"]))
        result[f"{config}.fmax"] = np.array(-1.0 if args["fmax"] is None else float(args["fmax"]))
        for name in clips:
            x = torch.from_numpy(np.load(folder / f"{name}.npy"))
            with torch.no_grad():
                result[f"{config}.{name}"] = audio.mel_spectrogram(x.float(), **args).numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
