"""Upstream's speaker-verification model (`sv.SV`, v2Pro/ProPlus) as `TTS.init_sv_model` loads it,
for the `sv` and `sovits_pro` goldens.

`sv.py` reads `GPT_SoVITS/pretrained_models/sv/pretrained_eres2netv2w24s4ep4.ckpt` relative to the
working folder and finds `ERes2NetV2` under `<cwd>/GPT_SoVITS/eres2net` at import: `place_sv` links
the inputs' checkpoint at that path in the (fresh) working folder, and the copy's `eres2net` is put
on the path before `sv` is imported.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import process_ckpt  # noqa: E402

sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))

import sv  # noqa: E402

RELEASED = Path(sv.sv_path)  # GPT_SoVITS/pretrained_models/sv/pretrained_eres2netv2w24s4ep4.ckpt


def place_sv(folder: Path) -> None:
    """Links `folder/sv/<the released name>` where upstream's `SV` looks for it (the working folder)."""
    target = Path.cwd() / RELEASED
    target.parent.mkdir(parents=True, exist_ok=True)
    if not target.exists():
        target.symlink_to((folder / "sv" / RELEASED.name).resolve())
