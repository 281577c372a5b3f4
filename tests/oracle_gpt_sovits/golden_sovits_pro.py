"""The `sovits_pro` golden, upstream's side: SoVITS v2Pro and v2ProPlus decoding with the
speaker-verification embedding as `TTS.run` does it, on koe's tiny files loaded by
`TTS.init_vits_weights` (which loads upstream's `SV` through `init_sv_model`; sovits_oracle.py,
sv_oracle.py).

    <oracle python> tests/oracle_gpt_sovits/golden_sovits_pro.py <folder> <out.npz>

Per model and reference clip: `TTS._get_ref_spec(path)` (with `is_v2pro`: the spectrogram and the
16 kHz audio; `torchaudio.load` the reference golden's soundfile stand-in) and
`sv_model.compute_embedding3(audio)`, as `TTS.run` fills `refer_spec` and `sv_emb`. Per case:
`torch.manual_seed(seed)` right before `vits_model.decode(codes, phones, [specs...],
noise_scale=..., speed=..., sv_emb=[embeddings...])`.

Recorded: `<model>.state_sha256`, `sv.state_sha256`, `<model>.version` (what upstream built) and
`.sniffed`; `<model>.<clip>.spec_sha256`, `.sv_audio_sha256`, `.sv_sha256` (the embedding) and
`.sv_head` (its first 64 numbers); per case `<case>.ge` (the references' averaged embedding, on a
hook of the flow), the waveform whole for the cases in `full`, else `.audio_sha256`, `.audio_shape`,
`.audio_head` and `.audio_tail` (256 samples).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch
import torchaudio
from golden_reference import load_with_soundfile
from oracle_arrays import record, sha
from sovits_oracle import get_sovits_version_from_path_fast, load_tts
from sv_oracle import place_sv


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    torchaudio.load = load_with_soundfile
    place_sv(folder)
    arrays = dict(np.load(folder / "inputs.npz"))
    spec = json.loads((folder / "cases.json").read_text())
    result: dict[str, np.ndarray] = {}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        name, digest = line.split()
        result[f"{name}.state_sha256"] = np.array(digest)
    for model_name in sorted({c["model"] for c in spec["cases"].values()}):
        path = folder / f"s2G{model_name}.pth"
        tts = load_tts(path)
        assert tts.is_v2pro and tts.sv_model is not None
        result[f"{model_name}.version"] = np.array(tts.configs.version)
        result[f"{model_name}.sniffed"] = np.array([str(s) for s in get_sovits_version_from_path_fast(str(path))])
        refs: dict[str, tuple[torch.Tensor, torch.Tensor]] = {}
        for clip in sorted({r for c in spec["cases"].values() if c["model"] == model_name for r in c["refs"]}):
            ref_spec, audio = tts._get_ref_spec(str(folder / f"{clip}.wav"))
            emb = tts.sv_model.compute_embedding3(audio)
            refs[clip] = (ref_spec, emb)
            result[f"{model_name}.{clip}.spec_sha256"] = sha(ref_spec)
            result[f"{model_name}.{clip}.sv_audio_sha256"] = sha(audio)
            result[f"{model_name}.{clip}.sv_sha256"] = sha(emb)
            result[f"{model_name}.{clip}.sv_head"] = emb.reshape(-1)[:64].numpy()
        model = tts.vits_model
        captured: list[torch.Tensor] = []
        model.flow.register_forward_pre_hook(lambda _m, args, kwargs, out=captured: out.append(kwargs["g"].clone()), with_kwargs=True)
        for name, case in spec["cases"].items():
            if case["model"] != model_name:
                continue
            codes = torch.from_numpy(arrays[f"codes.{case['codes']}"])
            phones = torch.from_numpy(arrays[f"phones.{case['phones']}"])
            specs = [refs[r][0] for r in case["refs"]]
            sv_emb = [refs[r][1] for r in case["refs"]]
            captured.clear()
            torch.manual_seed(case["seed"])
            audio = model.decode(codes, phones, specs, noise_scale=case["noise_scale"], speed=case["speed"], sv_emb=sv_emb).detach()
            result[f"{name}.ge"] = captured[0].numpy()
            record(result, f"{name}.audio", audio, name in spec["full"])
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
