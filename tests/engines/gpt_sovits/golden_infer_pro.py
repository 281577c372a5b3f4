"""Inputs of the `infer_pro` golden (koe's side): v2Pro and v2ProPlus end to end through upstream's
`TTS.run` on tiny folders with the full-size speaker-verification model (`write_random_model`):
clone with a transcript in English and Chinese, speed, two references (each with its own speaker
embedding), reference-free, serial and batched fragments. See infer_goldens.py."""

from __future__ import annotations

import sys
from pathlib import Path

if str(Path(__file__).resolve().parent) not in sys.path:  # scripts/goldens.py puts only tests/ on the path
    sys.path.insert(0, str(Path(__file__).resolve().parent))

import infer_goldens as common  # noqa: E402

SEED = 43
VARIANTS = {"pro": "v2Pro", "plus": "v2ProPlus"}
EN = "Hello there. How are you today?"
CASES = {
    "pro_en": {"model": "pro", "text": EN, "text_lang": "en", "seed": 1},
    "pro_zh": {"model": "pro", "text": "你好，世界！今天天气很好。", "text_lang": "zh", "seed": 2, "prompt_text": "这是一个测试。", "prompt_lang": "zh"},
    "pro_speed": {"model": "pro", "text": EN, "text_lang": "en", "seed": 3, "speed_factor": 0.8},
    "pro_two_refs": {"model": "pro", "text": EN, "text_lang": "en", "seed": 4, "aux": True},
    "pro_free": {"model": "pro", "text": EN, "text_lang": "en", "seed": 5, "prompt_text": ""},
    "plus_en": {"model": "plus", "text": EN, "text_lang": "en", "seed": 6},
    "plus_two_refs": {"model": "plus", "text": EN, "text_lang": "en", "seed": 7, "aux": True, "speed_factor": 1.2},
    "plus_batched": {"model": "plus", "text": common.LONG, "text_lang": "en", "seed": 8, "text_split_method": "cut5", "batch_size": 3},
    "plus_serial": {"model": "plus", "text": common.LONG, "text_lang": "en", "seed": 9, "text_split_method": "cut5", "parallel_infer": False},
}


def write_inputs(folder: Path) -> None:
    common.write_inputs(folder, VARIANTS, CASES, SEED)
