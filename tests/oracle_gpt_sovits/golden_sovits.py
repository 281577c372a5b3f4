"""The `sovits` golden, upstream's side: `SynthesizerTrn.decode` as `TTS.run` calls it, on koe's
tiny SoVITS v2 file loaded by `TTS.init_vits_weights` (sovits_oracle.py).

    <oracle python> tests/oracle_gpt_sovits/golden_sovits.py <folder> <out.npz>

Each case: `torch.manual_seed(seed)` right before `vits_model.decode(codes, phones, [specs...],
noise_scale=..., speed=...)` (the references a list, as `TTS.run` passes them; its draw is
`randn_like(m_p)` from the global generator). Recorded: `state_sha256`, `version` (what upstream
built), `sniffed` (get_sovits_version_from_path_fast's answer), per case `<case>.ge` (the
references' averaged embedding, by the same code path on a hook), and the waveform: `<case>.audio`
whole for the cases in `full`, else `<case>.audio_sha256`, `.audio_shape`, `.audio_head` and
`.audio_tail` (256 samples).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
from oracle_arrays import record
from sovits_oracle import load


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    model, version, sniffed = load(folder / "s2G.pth")
    arrays = dict(np.load(folder / "inputs.npz"))
    spec = json.loads((folder / "cases.json").read_text())
    result: dict[str, np.ndarray] = {
        "state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0]),
        "version": np.array(version),
        "sniffed": np.array([str(s) for s in sniffed]),
    }
    captured: list[torch.Tensor] = []
    model.flow.register_forward_pre_hook(lambda _m, args, kwargs: captured.append(kwargs["g"].clone()), with_kwargs=True)
    for name, case in spec["cases"].items():
        codes = torch.from_numpy(arrays[f"codes.{case['codes']}"])
        phones = torch.from_numpy(arrays[f"phones.{case['phones']}"])
        refs = [torch.from_numpy(arrays[f"spec.{r}"]) for r in case["refs"]]
        captured.clear()
        torch.manual_seed(case["seed"])
        audio = model.decode(codes, phones, refs, noise_scale=case["noise_scale"], speed=case["speed"]).detach()
        result[f"{name}.ge"] = captured[0].numpy()
        record(result, f"{name}.audio", audio, name in spec["full"])
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
