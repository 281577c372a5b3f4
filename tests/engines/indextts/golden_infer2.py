"""Golden topic `infer2` (koe's side): upstream's IndexTTS 2 end to end on koe's tiny random release 2
(`koe_indextts.fixtures2.write_random_model2`), each job after `torch.manual_seed(seed)` with the
voice caches emptied (what upstream's first call with a clip does): emotion from the speaker's own
clip, from a second clip with a weight, from an emotion vector (with and without a weight), and a
long text in segments with its interval silence. Then later calls on the same instance, its caches
kept (`AGAIN`, keys `a{k}.`): the clips already read (no w2v-BERT draws), an emotion vector's rows
picked by `random.randint` after `random.seed`, a new emotion clip with the speaker's cached, its
WAV file written. The oracle side is tests/oracle_indextts/golden_infer2.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf
from koe_indextts.fixtures2 import release_states, states_sha256, write_random_model2

SPEAKER_RATE = 22050
EMOTION_RATE = 44100
# upstream's infer keyword arguments per job (seed first); generation settings shared
JOBS = [
    {"seed": 1, "text": "你好，欢迎使用语音合成。"},
    {"seed": 2, "text": "Hello there, this is a test.", "emo_audio_prompt": "emotion.wav", "emo_alpha": 0.7},
    {"seed": 3, "text": "今天天气很好, let's go outside.", "emo_vector": [0.0, 0.0, 0.5, 0.0, 0.0, 0.0, 0.0, 0.2]},
    {"seed": 4, "text": "Hello again.", "emo_vector": [0.3, 0.1, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0], "emo_alpha": 0.6},
    {
        "seed": 5,
        "text": "The quick brown fox jumps over the lazy dog. 我们一起去公园散步吧，好吗？Then we will have lunch together.",
        "interval_silence": 100,
    },
]
# after JOBS, without emptying the caches (job 4 left the speaker clip and its own emotion cached);
# `random_seed`: random.seed before the call; `output`: the file infer writes (a name in the folder)
AGAIN = [
    {"seed": 6, "text": "Hello once more, my friend."},
    {"seed": 7, "text": "今天很好。", "emo_vector": [0.2, 0.0, 0.0, 0.3, 0.0, 0.0, 0.1, 0.0], "use_random": True, "random_seed": 11},
    {"seed": 8, "text": "See you soon.", "emo_audio_prompt": "emotion.wav", "emo_alpha": 0.5, "output": "again.wav"},
]
SEGMENT_TOKENS = 24
GENERATION = {"max_mel_tokens": 40}


def voiced(seconds: float, rate: int, pitch: float, seed: int) -> np.ndarray:
    g = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    f0 = pitch + 20 * np.sin(2 * np.pi * 0.9 * t)
    phase = 2 * np.pi * np.cumsum(f0) / rate
    wave = sum(np.sin(k * phase) / k for k in range(1, 8)) * np.clip(np.sin(2 * np.pi * 2.7 * t), 0, None) ** 0.5
    return (0.25 * wave + 0.01 * g.standard_normal(t.size)).astype(np.float32)


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    write_random_model2(folder / "model")
    sf.write(folder / "speaker.wav", voiced(3.0, SPEAKER_RATE, 150, 1), SPEAKER_RATE, subtype="PCM_16")
    emotion = voiced(2.0, EMOTION_RATE, 220, 2)
    sf.write(folder / "emotion.wav", np.stack([emotion, 0.7 * emotion], axis=1), EMOTION_RATE, subtype="FLOAT")
    job = {"jobs": JOBS, "again": AGAIN, "max_text_tokens_per_segment": SEGMENT_TOKENS, "generation": GENERATION}
    (folder / "job.json").write_text(json.dumps(job, ensure_ascii=False))
    hashes = states_sha256(release_states())
    (folder / "state_sha256.txt").write_text("".join(f"{name.replace('/', ':')} {digest}\n" for name, digest in hashes.items()))
