"""Golden topic `infer25` (koe's side): upstream's IndexTTS 2.5 (`infer_v2_5.IndexTTS2.infer`) end to
end on koe's tiny random release 2.5 (`koe_indextts.fixtures25.write_random_model`), each job after
`torch.manual_seed(seed)` with the voice caches emptied (upstream's first call with a clip): a clone
with the speaker's own emotion, an emotion clip with a weight and a slower duration, an emotion vector
with a weight, a long English text (a number, a colon) in two segments with a faster duration and
its interval silence (jobs 0-3: English and Chinese); then 2.5's other languages through its text
front end (koe's `front25`): Japanese with kanji and kana (MeCab's words and upstream's G2P draws),
Japanese with a `<word|reading>` kana annotation, Spanish with a number (left as digits: upstream's
default install has no NeMo), Arabic, `zhen` (Chinese mixed with English); and clips read at other
rates and channel counts: the Arabic job's speaker is 48 kHz 24-bit mono, the last job's 16 kHz
stereo 16-bit (a job's optional `speaker` names its clip, else `speaker.wav`).

Python's `random`: upstream's Japanese G2P (ratio 0) draws one `random.random()` from the global
generator per blank-free run holding a kanji word, and replaces no word whatever it draws, so the
audio does not depend on the generator's state. Both sides still seed it before each job,
`random.seed(seed)`, so that the state after the job (`j{i}.random`: the sha256 of
`json.dumps(random.getstate())`) is recorded and koe's draws are checked to be upstream's: the
model, the engine (which draws from the global generator per Japanese request, as upstream's infer
does) and the drop-in leave the state where upstream leaves it.
The oracle side is tests/oracle_indextts/golden_infer25.py."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import soundfile as sf
from koe_indextts.fixtures25 import release_states, states_sha256, write_random_model

SPEAKER_RATE = 22050
EMOTION_RATE = 44100
# upstream's infer keyword arguments per job (seed first)
JOBS = [
    {"seed": 1, "text": "你好，欢迎使用语音合成。", "lang": "ZH"},
    {"seed": 7, "text": "Hello there, this is a test.", "lang": "en", "emo_audio_prompt": "emotion.wav", "emo_alpha": 0.7, "duration_factor": 1.25},
    {"seed": 3, "text": "今天天气很好，我们一起去公园散步吧。", "lang": "zh", "emo_vector": [0.3, 0.1, 0.0, 0.0, 0.0, 0.2, 0.0, 0.0], "emo_alpha": 0.6},
    {
        "seed": 4,
        "text": "She said: there are 3 reasons to stay, and twelve to leave!",
        "lang": "en",
        "max_text_tokens_per_segment": 16,
        "duration_factor": 0.8,
        "interval_silence": 100,
    },
    {"seed": 5, "text": "今日はとても良い天気ですね。 明日も晴れるでしょう。", "lang": "ja"},
    {"seed": 6, "text": "彼は日本語が<上手|じょうず>に話せます。", "lang": "ja", "emo_vector": [0.0, 0.0, 0.4, 0.0, 0.0, 0.0, 0.0, 0.3]},
    {"seed": 8, "text": "Hola, tengo 25 años y vivo en Madrid.", "lang": "es"},
    {"seed": 9, "text": "مرحبا، كيف حالك اليوم؟", "lang": "ar", "speaker": "speaker48k.wav"},
    {"seed": 10, "text": "我今天用iPhone听了一首English歌。", "lang": "zhen", "emo_audio_prompt": "emotion.wav", "emo_alpha": 0.5},
    {"seed": 11, "text": "A voice from another clip.", "lang": "en", "speaker": "speaker16k.wav"},
]
# the clips a job's `speaker` may name besides speaker.wav: (seconds, rate, channels, subtype, pitch, seed)
SPEAKERS = {"speaker48k.wav": (1.8, 48000, 1, "PCM_24", 120, 3), "speaker16k.wav": (2.2, 16000, 2, "PCM_16", 180, 4)}
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
    write_random_model(folder / "model")
    sf.write(folder / "speaker.wav", voiced(2.0, SPEAKER_RATE, 150, 1), SPEAKER_RATE, subtype="PCM_16")
    emotion = voiced(1.5, EMOTION_RATE, 220, 2)
    sf.write(folder / "emotion.wav", np.stack([emotion, 0.7 * emotion], axis=1), EMOTION_RATE, subtype="FLOAT")
    for name, (seconds, rate, channels, subtype, pitch, seed) in SPEAKERS.items():
        wave = voiced(seconds, rate, pitch, seed)
        sf.write(folder / name, np.stack([wave, -0.5 * wave], axis=1) if channels == 2 else wave, rate, subtype=subtype)
    job = {"jobs": JOBS, "generation": GENERATION}
    (folder / "job.json").write_text(json.dumps(job, ensure_ascii=False))
    hashes = states_sha256(release_states())
    (folder / "state_sha256.txt").write_text("".join(f"{name.replace('/', ':')} {digest}\n" for name, digest in hashes.items()))
