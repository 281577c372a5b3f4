"""The `ap_bwe` golden, upstream's side: `tools/audio_sr.py`'s `AP_BWE` (upstream's vendored AP-BWE)
on koe's random release folder, and `TTS.audio_postprocess(..., super_sampling=True)` with that
model, as v3's `TTS.run` calls it.

    <oracle python> tests/oracle_gpt_sovits/golden_ap_bwe.py <folder> <out.npz>

`TTS.init_sr_model` builds `AP_BWE(device, DictToAttrRecursive)`, which reads the model from the
source tree's `tools/AP_BWE_main/24kto48k/`; here it is handed the folder's checkpoint instead
(`checkpoint_file`), and `audio_postprocess` runs on a bare `TTS` holding only what it reads.
Recorded: `output` (AP_BWE's float32 samples of `input` at 24 kHz) and `sr`; per case of
cases.json `<case>.sr`, `.int16` (sha256), `.length`, `.head` / `.tail` (32 samples each); and
`missing.sr` / `missing.int16` for the `two` case with the model missing from upstream's place (it
prints and goes on without super-sampling).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import torch
from golden_infer import sha


def bare_tts(tts_class):
    """A `TTS` with only what `audio_postprocess` and `init_sr_model` read (no models loaded)."""
    tts = tts_class.__new__(tts_class)
    tts.configs = SimpleNamespace(sampling_rate=32000, device="cpu", is_half=False)
    tts.precision, tts.sr_model, tts.sr_model_not_exist = torch.float32, None, False
    return tts


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    import process_ckpt

    sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))
    import TTS_infer_pack.TTS as tts_module
    from tools.audio_sr import AP_BWE

    checkpoint = str(folder / "24kto48k" / "g_24kto48k.zip")
    arrays = dict(np.load(folder / "inputs.npz"))
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}

    model = AP_BWE("cpu", tts_module.DictToAttrRecursive, checkpoint_file=checkpoint)
    output, sr = model(torch.from_numpy(arrays["input"]).unsqueeze(0), 24000)
    result["output"], result["sr"] = output, np.array(sr)

    def postprocess(name: str, case: dict, tts) -> tuple[int, np.ndarray]:
        fragments = [torch.from_numpy(arrays[f"{name}.{i}"].copy()) for i in range(case["fragments"])]
        return tts_module.TTS.audio_postprocess(tts, [fragments], 24000, None, 1.0, False, case["fragment_interval"], True)

    missing = bare_tts(tts_module.TTS)  # upstream's own place, where the model is not
    sr, audio = postprocess("two", cases["two"], missing)
    result["missing.sr"], result["missing.int16"] = np.array(sr), sha(audio)
    tts_module.AP_BWE = lambda device, attr: AP_BWE(device, attr, checkpoint_file=checkpoint)
    tts = bare_tts(tts_module.TTS)
    for name, case in cases.items():
        sr, audio = postprocess(name, case, tts)
        result[f"{name}.sr"], result[f"{name}.int16"], result[f"{name}.length"] = np.array(sr), sha(audio), np.array(len(audio))
        result[f"{name}.head"], result[f"{name}.tail"] = audio[:32].copy(), audio[-32:].copy()
        print(name, sr, len(audio), np.abs(audio).max(), flush=True)
    np.savez(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]).resolve(), Path(sys.argv[2]))
