"""Upstream's SoVITS as `TTS.init_vits_weights` loads it, for the `sovits` and `latent` goldens.

`TTS.init_vits_weights(self, path)` itself runs on a stand-in `self` whose `configs` has what the
method reads and writes (CPU, no half precision, no saving of upstream's yaml): it sniffs the
version (`get_sovits_version_from_path_fast`: md5, header, size), reads the file
(`load_sovits_new`: the header put back to "PK"), sets `semantic_frame_rate` and the version from
`enc_p.text_embedding`'s rows, builds `SynthesizerTrn`, loads the fp16 weights non-strictly into
the float32 model, and puts it in eval mode. This script then checks what the non-strict load
left out: nothing may be unexpected, and only `enc_q` (which releases leave out) may be missing.

A v2Pro/ProPlus file makes `init_vits_weights` load upstream's speaker-verification model too
(`init_sv_model`: `sv.SV`, which reads `GPT_SoVITS/pretrained_models/sv/...ckpt` relative to the
working folder; `load_tts` returns the whole stand-in with it).
"""

from __future__ import annotations

import os
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import sys  # noqa: E402

import process_ckpt  # noqa: E402
import torch  # noqa: E402
from process_ckpt import get_sovits_version_from_path_fast, load_sovits_new  # noqa: E402

# upstream's sv.py (imported by TTS.py) finds ERes2NetV2 under <cwd>/GPT_SoVITS/eres2net: the copy's
sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))
from TTS_infer_pack.TTS import TTS  # noqa: E402


class _Configs:
    device = torch.device("cpu")
    is_half = False

    def __init__(self) -> None:
        self.default_configs = {v: {"vits_weights_path": "absent"} for v in ("v1", "v2", "v2Pro", "v2ProPlus", "v3", "v4")}

    def update_version(self, version: str) -> None:
        self.version = version

    def save_configs(self) -> None:
        pass


def load_tts(path: Path) -> TTS:
    """A stand-in `TTS` after `init_vits_weights(path)`: its `vits_model`, `configs` (the file's
    rates), `is_v2pro` and, for v2Pro/ProPlus, `sv_model`; the non-strict load checked."""
    tts = TTS.__new__(TTS)
    tts.configs = _Configs()
    tts.sv_model = None
    tts.prompt_cache = {}
    TTS.init_vits_weights(tts, str(path))
    stored = set(load_sovits_new(str(path))["weight"])
    held = set(tts.vits_model.state_dict())
    unexpected = sorted(stored - held)
    missing = sorted(k for k in held - stored if not k.startswith("enc_q."))
    if unexpected or missing:
        raise SystemExit(f"{path.name} does not fit upstream's SynthesizerTrn: unexpected {unexpected[:8]}, missing {missing[:8]}")
    return tts


def load(path: Path):
    """upstream's SynthesizerTrn from `path`, and what it sniffed: (model, version, model_version)."""
    tts = load_tts(path)
    version, model_version, lora = get_sovits_version_from_path_fast(str(path))
    return tts.vits_model, tts.configs.version, (version, model_version, lora)
