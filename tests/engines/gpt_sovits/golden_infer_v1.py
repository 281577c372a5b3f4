"""Inputs of the `infer_v1` golden (koe's side): v1 end to end through upstream's `TTS.run` on a tiny
v1 folder (`write_random_model(variant="v1")`): English, Chinese (v1's front end: no G2PW), speed,
reference-free, two references, batched fragments. See infer_goldens.py."""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # scripts/goldens.py puts only tests/ on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import infer_goldens as common  # noqa: E402

SEED = 41
VARIANTS = {"v1": "v1"}
EN = "Hello there. How are you today?"
CASES = {
    "en": {"model": "v1", "text": EN, "text_lang": "en", "seed": 1},
    "zh": {"model": "v1", "text": "你好，世界！今天天气很好。", "text_lang": "zh", "seed": 2, "prompt_text": "这是一个测试。", "prompt_lang": "zh"},
    "speed": {"model": "v1", "text": EN, "text_lang": "en", "seed": 3, "speed_factor": 1.3},
    "free": {"model": "v1", "text": EN, "text_lang": "en", "seed": 4, "prompt_text": ""},
    "two_refs": {"model": "v1", "text": EN, "text_lang": "en", "seed": 5, "aux": True},
    "batched": {"model": "v1", "text": common.LONG, "text_lang": "en", "seed": 6, "text_split_method": "cut5", "batch_size": 3},
}


def write_inputs(folder: Path) -> None:
    common.write_inputs(folder, VARIANTS, CASES, SEED)
