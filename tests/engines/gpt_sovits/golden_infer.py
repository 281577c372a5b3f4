"""Inputs of the `infer` golden (koe's side): a whole tiny v2 folder (`fixtures.write_random_model`),
two reference clips and `TTS.run` cases.

- `model/`: `write_random_model(seed=SEED)`; `state_sha256.txt`: the GPT's and SoVITS's weights.
- `ref.wav` (4 s, 32 kHz) and `aux.wav` (3.5 s, 24 kHz): seeded noisy tones, 16-bit PCM.
- `cases.json`: per case `TTS.run`'s inputs (text, languages, prompt text, options, seed) and
  whether `aux.wav` joins the reference.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from koe.engines.gpt_sovits.fixtures import write_random_model
from koe.engines.gpt_sovits.fixtures_sovits import random_sovits_state
from koe.engines.gpt_sovits.fixtures_t2s import random_gpt_state
from koe.runtime.weights import state_sha256

SEED = 5
PROMPT_EN = "This is a test of my voice."
LONG = "First, we go home. Then we eat, and we sleep! Tomorrow? We work again, all day long: that is life. 我们明天见，好吗？"
CASES = {
    "en": {"text": "Hello there. How are you today?", "text_lang": "en", "seed": 1},
    "zh": {"text": "你好，世界！今天天气很好。", "text_lang": "zh", "seed": 2, "prompt_text": "这是一个测试。", "prompt_lang": "zh"},
    "mixed": {"text": "我用Python写了一个GPT模型，效果很好。", "text_lang": "zh", "seed": 3},
    "auto": {"text": "Good morning, 早上好。", "text_lang": "auto", "seed": 4},
    **{f"cut{i}": {"text": LONG, "text_lang": "zh", "seed": 10 + i, "text_split_method": f"cut{i}", "batch_size": 2} for i in range(6)},
    "speed": {"text": "Hello there. How are you today?", "text_lang": "en", "seed": 6, "speed_factor": 1.3},
    "sampling": {"text": "Hello there. How are you?", "text_lang": "en", "seed": 7, "top_k": 5, "top_p": 0.8, "temperature": 0.7, "repetition_penalty": 1.1},
    "serial": {"text": LONG, "text_lang": "en", "seed": 8, "parallel_infer": False, "batch_size": 3, "text_split_method": "cut5"},
    "batched": {"text": LONG, "text_lang": "en", "seed": 9, "batch_size": 3, "text_split_method": "cut5"},
    "free": {"text": "Hello there. How are you today?", "text_lang": "en", "seed": 20, "prompt_text": ""},
    "free_serial": {"text": LONG, "text_lang": "en", "seed": 21, "prompt_text": "", "parallel_infer": False, "text_split_method": "cut5"},
    "two_refs": {"text": "Hello there. How are you today?", "text_lang": "en", "seed": 22, "aux": True},
    "interval": {"text": LONG, "text_lang": "en", "seed": 23, "fragment_interval": 0.0, "text_split_method": "cut5", "speed_factor": 0.8},
    "fragments": {"text": LONG, "text_lang": "en", "seed": 24, "return_fragment": True, "text_split_method": "cut5", "batch_size": 2},
}
DEFAULTS = {"prompt_text": PROMPT_EN, "prompt_lang": "en"}


def clip(seconds: float, rate: int, pitch: float, seed: int) -> np.ndarray:
    t = np.arange(int(seconds * rate)) / rate
    rng = np.random.default_rng(seed)
    wave = 0.3 * np.sin(2 * np.pi * pitch * t * (1 + 0.1 * np.sin(2 * np.pi * 0.5 * t))) + 0.05 * rng.standard_normal(t.shape)
    return (np.clip(wave, -1, 1) * 32767).astype(np.int16)


def write_wav(path: Path, samples: np.ndarray, rate: int) -> None:
    import soundfile

    soundfile.write(str(path), samples, rate, subtype="PCM_16")


def state() -> dict:
    return {
        **{f"gpt.{k}": v for k, v in random_gpt_state("tiny_vocab", SEED).items()},
        **{f"sovits.{k}": v for k, v in random_sovits_state("tiny", SEED + 1).items()},
    }


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_random_model(folder / "model", seed=SEED)
    write_wav(folder / "ref.wav", clip(4.0, 32000, 180.0, SEED), 32000)
    write_wav(folder / "aux.wav", clip(3.5, 24000, 240.0, SEED + 1), 24000)
    cases = {name: {**DEFAULTS, **case} for name, case in CASES.items()}
    (folder / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text(state_sha256(state()) + "\n")
