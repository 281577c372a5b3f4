"""Golden topic `infer15` (koe's side): upstream's IndexTTS 1.5 end to end on koe's tiny random
release (`koe_indextts.fixtures.write_random_model`), cloning a stereo 22.05 kHz clip, one text at a
time after `torch.manual_seed(SEED)`: Chinese, English, mixed, and a long text cut into segments.
The oracle side is tests/oracle_indextts/golden_infer15.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf
import torch
from koe_indextts.fixtures import release_states, state_sha256, write_random_model

SEED = 3
SEGMENT_TOKENS = 24  # small, so that the long text is cut into several segments
TEXTS = [
    "你好，欢迎使用语音合成。",
    "Hello there, this is a test.",
    "今天天气很好, let's go outside.",
    "The quick brown fox jumps over the lazy dog. 我们一起去公园散步吧，好吗？Then we will have lunch together, and talk about music.",
]
GENERATION = {"max_mel_tokens": 30}  # some segments end at the stop code, some at this limit
CLIP_RATE = 22050


def clip() -> np.ndarray:
    """3 s of stereo speech-like sound (voiced harmonics under a syllable envelope), float32 (n, 2)."""
    g = np.random.default_rng(5)
    t = np.arange(int(3.0 * CLIP_RATE)) / CLIP_RATE
    pitch = 140 + 25 * np.sin(2 * np.pi * 0.7 * t)
    phase = 2 * np.pi * np.cumsum(pitch) / CLIP_RATE
    voiced = sum(np.sin(k * phase) / k for k in range(1, 8))
    envelope = np.clip(np.sin(2 * np.pi * 3.1 * t), 0, None) ** 0.5
    left = 0.25 * voiced * envelope + 0.01 * g.standard_normal(t.size)
    right = 0.8 * left + 0.01 * g.standard_normal(t.size)
    return np.stack([left, right], axis=1).astype(np.float32)


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    model = write_random_model(folder / "model")
    gpt, vocoder = release_states()
    sf.write(folder / "prompt.wav", clip(), CLIP_RATE, subtype="PCM_16")
    job = {"seed": SEED, "texts": TEXTS, "max_text_tokens_per_segment": SEGMENT_TOKENS, "generation": GENERATION}
    (folder / "job.json").write_text(json.dumps(job, ensure_ascii=False))
    (folder / "state_sha256.txt").write_text(f"gpt {state_sha256(gpt)}\nbigvgan {state_sha256(vocoder)}\n")
    assert torch.load(model / "gpt.pth", weights_only=True).keys() == gpt.keys()
