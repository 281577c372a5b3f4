"""A synthetic speaker dataset for the fine-tuning tests: a few short clips, transcripts, one reference.

The clips are voiced-sounding (harmonics under a syllable-like envelope, a different pitch and
length per clip) so the codec gives varied codes; the reference is one 3 s clip at 24 kHz, as
upstream's recipe requires of `ref_audio`. `write_dataset` lays them out the three ways koe reads
a dataset: upstream's raw JSONL (`audio`, `text`, `ref_audio`), a CSV, and a folder of
`.wav` + `.txt` pairs.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np
import soundfile as sf

TEXTS = [
    "She said she would be here by noon.",
    "The quick brown fox jumps over the lazy dog.",
    "Please call Stella and ask her to bring these things.",
    "其实我真的有发现，我是一个特别善于观察别人情绪的人。",
    "A rainbow is a division of white light into many beautiful colors.",
    "We also need a small plastic snake and a big toy frog.",
    "Thank you for calling, how can I help you today?",
    "The museum opens at nine and closes at five.",
    "Bring your umbrella, it might rain this afternoon.",
    "Numbers like 42 and 1,000 are read out in full.",
    "Good night, and see you tomorrow morning.",
]


def voiced(seconds: float, pitch: float, rate: int = 24000, seed: int = 0) -> np.ndarray:
    """float32 mono: four harmonics of `pitch` under a 3-4 Hz envelope, a little noise, peak 0.3."""
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * pitch * (k + 1) * t) / (k + 1) for k in range(4))
    x = x * (0.6 + 0.4 * np.sin(2 * np.pi * (3 + seed % 2) * t)) + 0.02 * rng.standard_normal(t.shape)
    return (0.3 * x / np.abs(x).max()).astype(np.float32)


def write_dataset(folder: Path, n: int = 11, rate: int = 24000) -> dict[str, Path]:
    """Write `n` clips (0.8-2.0 s, PCM 16-bit WAV at `rate`), their transcripts and `ref.wav` (3 s,
    24 kHz) under `folder`; returns {"jsonl", "csv", "pairs", "ref", "clips"} paths.

    `train_raw.jsonl` and `train.csv` name the clips by absolute path; `pairs/` holds
    `utt000.wav` + `utt000.txt` ... (and no reference: the caller names one).
    """
    folder = Path(folder)
    clips, pairs = folder / "clips", folder / "pairs"
    clips.mkdir(parents=True, exist_ok=True)
    pairs.mkdir(parents=True, exist_ok=True)
    ref = folder / "ref.wav"
    sf.write(ref, voiced(3.0, 150.0, 24000, seed=99), 24000, subtype="PCM_16")
    rows = []
    for i in range(n):
        audio = voiced(0.8 + 0.12 * (i % 11), 110.0 + 9.0 * i, rate, seed=i)
        text = TEXTS[i % len(TEXTS)]
        wav = clips / f"utt{i:03d}.wav"
        sf.write(wav, audio, rate, subtype="PCM_16")
        sf.write(pairs / wav.name, audio, rate, subtype="PCM_16")
        (pairs / f"utt{i:03d}.txt").write_text(text + "\n", encoding="utf-8")
        rows.append({"audio": str(wav), "text": text, "ref_audio": str(ref)})
    jsonl = folder / "train_raw.jsonl"
    jsonl.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    table = folder / "train.csv"
    with table.open("w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=["audio", "text", "ref_audio"])
        w.writeheader()
        w.writerows(rows)
    return {"jsonl": jsonl, "csv": table, "pairs": pairs, "ref": ref, "clips": clips}


def random_codes_jsonl(raw_jsonl: Path, out: Path, seed: int = 0, frames_per_second: float = 12.5) -> Path:
    """A prepared JSONL (upstream's format: the raw lines plus `audio_codes`, (frames, 16) lists)
    with random codes of each clip's length: enough to train on without running the codec."""
    rng = np.random.default_rng(seed)
    lines = []
    for line in Path(raw_jsonl).read_text(encoding="utf-8").splitlines():
        row = json.loads(line)
        frames = max(1, int(np.ceil(sf.info(row["audio"]).duration * frames_per_second)))
        row["audio_codes"] = rng.integers(0, 2048, size=(frames, 16)).tolist()
        lines.append(json.dumps(row, ensure_ascii=False))
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out
