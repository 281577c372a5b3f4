"""Error of F5-TTS's bf16 mode against the exact float32 path, on the same weights.

No feedback loop to force: both engines speak the same text in the same cloned voice from the same
seed (the same starting noise), so the outputs line up sample for sample. We compare the waveforms
(cosine, SNR): the DiT's mel in the mode through the float32 vocoder, against float32 throughout.

    python -m koe.bench.accuracy --family f5_tts --precision bf16 [--size real] [--nfe-step 32]

F5-TTS's `accuracy` tool (`BENCH.tools`); its command line, the cosine and the SNR are the benchmark's
own (`kit.accuracy_tool`, `kit.cosine`, `kit.snr_db`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from koe.engines.base import SynthesisRequest, collect

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
    request = SynthesisRequest(text=TEXT, voice=voice, seed=seed, options={"nfe_step": nfe_step})  # what the native `generate` speaks
    ref, got = (collect(e.synthesize(request)) for e in (exact, mode))
    wav_ref, wav_mode = torch.from_numpy(ref.samples), torch.from_numpy(got.samples)
    return {
        "precision": mode.precision,
        "nfe_step": nfe_step,
        "seconds": len(ref.samples) / ref.sample_rate,
        "waveform_cosine": kit.cosine(wav_ref[None], wav_mode[None])["cosine_mean"],
        "waveform_snr_db": kit.snr_db(wav_ref, wav_mode),
    }


def main(kit, argv: list[str] | None = None) -> int:
    from koe.engines.f5_tts.bench.models import SIZES, VARIANTS

    nfe = (("--nfe-step", {"type": int, "default": 32}),)
    return kit.accuracy_tool(
        kit, argv, "f5_tts", __doc__, measure, ("bf16",), SIZES, variants=VARIANTS, size_help="random weights (real: the release's shapes)", options=nfe
    )
