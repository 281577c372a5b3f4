"""The `cfm` golden, upstream's side: `CFM.inference` of `module/models.py` over upstream's own
`DiT` (`f5_tts/model/backbones/dit.py`), built at koe's small sizes and loaded strictly from koe's
`cfm.pt`.

    <oracle python> tests/oracle_gpt_sovits/golden_cfm.py <folder> <out.npz>

Each case: `torch.manual_seed(seed)` right before `cfm.inference(mu, LongTensor([T]), prompt,
n_timesteps, temperature, inference_cfg_rate)` (x_lens as `TTS.using_vocoder_synthesis` passes it:
one length for every row). Recorded: `state_sha256` and `<case>.mel` (B, mel, T).
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from f5_tts.model import DiT  # noqa: E402
from module.models import CFM  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    c = json.loads((folder / "dit.json").read_text())
    dit = DiT(
        dim=c["dim"],
        depth=c["depth"],
        heads=c["heads"],
        dim_head=c["dim_head"],
        ff_mult=c["ff_mult"],
        mel_dim=c["mel_dim"],
        text_dim=c["text_dim"],
        conv_layers=c["conv_layers"],
    )
    cfm = CFM(c["mel_dim"], dit)
    cfm.load_state_dict(torch.load(folder / "cfm.pt", weights_only=True), strict=True)
    cfm.eval()
    arrays = dict(np.load(folder / "inputs.npz"))
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    for name, case in json.loads((folder / "cases.json").read_text()).items():
        mu = torch.from_numpy(arrays[f"mu.{case['inputs']}"])
        prompt = torch.from_numpy(arrays[f"prompt.{case['inputs']}"])
        torch.manual_seed(case["seed"])
        mel = cfm.inference(
            mu, torch.LongTensor([mu.size(1)]), prompt, case["n_timesteps"], temperature=case["temperature"], inference_cfg_rate=case["cfg_rate"]
        )
        result[f"{name}.mel"] = mel.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
