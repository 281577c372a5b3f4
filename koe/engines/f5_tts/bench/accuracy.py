"""Error of F5-TTS's bf16 mode against the exact float32 path, on the same weights.

No feedback loop to force: both engines speak the same text in the same cloned voice from the same
seed (the same starting noise), so the outputs line up sample for sample. We compare the waveforms
(cosine, SNR): the DiT's mel in the mode through the float32 vocoder, against float32 throughout.

    python -m koe.bench.accuracy --family f5_tts --precision bf16 [--size real] [--nfe-step 32]

F5-TTS's `accuracy` tool (`BENCH.tools`); the SNR is the benchmark's own (`kit.snr_db`).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

TEXT = "The quick brown fox jumps over the lazy dog, and then it runs back home."
REF_TEXT = "A reference clip, three seconds long."


def reference_clip(seconds: float = 3.0, sr: int = 24000) -> tuple[np.ndarray, int]:
    """A voiced-sounding clip (a 150 Hz tone, amplitude moving at 3 Hz): random weights need no real voice."""
    t = np.arange(int(seconds * sr)) / sr
    return (0.3 * np.sin(2 * np.pi * 150 * t) * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t))).astype(np.float32), sr


def measure(kit, folder: Path, precision: str, nfe_step: int = 32, seed: int = 0) -> dict:
    from koe.engines.f5_tts.engine import F5TTSEngine

    exact = F5TTSEngine.load(folder, device="cpu", precision="fp32")
    mode = F5TTSEngine.load(folder, device="cpu", precision=precision)
    voice = exact.prepare_voice(reference_clip(), REF_TEXT)
    ref, got = (e.generate(TEXT, voice=voice, seed=seed, nfe_step=nfe_step) for e in (exact, mode))
    wav_ref, wav_mode = torch.from_numpy(ref.audio), torch.from_numpy(got.audio)
    cos = F.cosine_similarity(wav_ref.double()[None], wav_mode.double()[None])
    return {
        "precision": mode.precision,
        "nfe_step": nfe_step,
        "seconds": len(ref.audio) / ref.sample_rate,
        "waveform_cosine": cos.item(),
        "waveform_snr_db": kit.snr_db(wav_ref, wav_mode),
    }


def main(kit, argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m koe.bench.accuracy --family f5_tts", description=__doc__.split("\n\n")[0])
    p.add_argument("--precision", required=True, choices=["bf16"])
    p.add_argument("--variant", default="F5TTS_v1_Base", choices=["F5TTS_v1_Base", "F5TTS_Base"])
    p.add_argument("--size", default="tiny", choices=["tiny", "real"], help="random weights (real: the release's shapes)")
    p.add_argument("--nfe-step", type=int, default=32)
    p.add_argument("--threads", type=int, default=None)
    p.add_argument("--models", type=Path)
    p.add_argument("--out", type=Path)
    a = p.parse_args(argv)
    if a.threads:
        torch.set_num_threads(a.threads)
    result = {**measure(kit, kit.bench_model("f5_tts", a.variant, a.size, a.models), a.precision, a.nfe_step), "variant": a.variant, "size": a.size}
    text = json.dumps(result, indent=1)
    print(text)
    if a.out:
        a.out.write_text(text)
    return 0
