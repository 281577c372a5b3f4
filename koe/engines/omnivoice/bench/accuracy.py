"""Error of OmniVoice's bf16 mode against the exact float32 path, on the same weights.

    python -m koe.bench.accuracy --family omnivoice --precision bf16 [--size real] [--num-step 32]

Two measures, the benchmark's own text in the model's own voice:

- teacher-forced: the exact path unmasks its grid; at every step the mode's LM reads the very same
  rows (the exact path's tokens so far), and its logits at the target frames are compared with the
  exact ones (cosine over each frame's 1025 logits per codebook, mean and min, and how often the
  arg-max agrees);
- free-running: both paths unmask from the same seed (each its own tokens), then the share of codes
  that came out equal, and the cosine and SNR of the waveforms (both through the float32 tokenizer
  and post-processing). One different pick early changes every later draw, so this is the end-to-end
  price of the mode rather than a per-step error.

OmniVoice's `accuracy` tool (`BENCH.tools`); the command line, cosine and SNR are the benchmark's
own (`kit.accuracy_tool`, `kit.compare`, `kit.snr_db`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from koe.engines.omnivoice.bench.cases import TEXT
from koe.engines.omnivoice.generate import Settings, unmask
from koe.engines.omnivoice.synthesis import OmniVoiceModel, Output

MODES = {"bf16": torch.bfloat16}


def _teacher_forced(exact: OmniVoiceModel, mode: OmniVoiceModel, items, settings: Settings, seed: int, kit) -> dict:
    """Per step, the mode's logits on the exact path's rows, compared with the exact logits."""
    steps: list[dict] = []
    forward = exact.lm.forward

    def compared(ids, *rest):
        logits = forward(ids, *rest)
        steps.append(kit.compare(logits, mode.lm(ids, *rest)))
        return logits

    exact.lm.forward = compared
    try:
        torch.manual_seed(seed)
        codes = unmask(exact.lm, items, settings)
    finally:
        del exact.lm.forward
    return {
        "cosine_mean": sum(s["cosine_mean"] for s in steps) / len(steps),
        "cosine_min": min(s["cosine_min"] for s in steps),
        "top1_agreement": sum(s["top1_agreement"] for s in steps) / len(steps),
        "steps": len(steps),
    }, codes


def measure(kit, folder: Path, precision: str, num_step: int = 32, seed: int = 0) -> dict:
    exact = OmniVoiceModel.load(folder)
    mode = OmniVoiceModel(OmniVoiceModel.load(folder, dtype=MODES[precision]).lm, exact.codec, exact.text)
    items = exact.items([TEXT])
    settings = Settings(num_step=num_step)
    with torch.inference_mode():
        forced, exact_codes = _teacher_forced(exact, mode, items, settings, seed, kit)
        torch.manual_seed(seed)
        mode_codes = unmask(mode.lm, items, settings)
        waves = [torch.from_numpy(exact.finish(exact.decode(c[0]), None, Output())) for c in (exact_codes, mode_codes)]
    n = min(len(w) for w in waves)
    return {
        "precision": str(next(mode.lm.parameters()).dtype).removeprefix("torch."),
        "num_step": num_step,
        "frames": items[0].frames,
        "teacher_forced": forced,
        "free_running": {
            "codes_equal": (exact_codes[0] == mode_codes[0]).double().mean().item(),
            "waveform_cosine": kit.cosine(waves[0][None, :n], waves[1][None, :n])["cosine_mean"],
            "waveform_snr_db": kit.snr_db(waves[0][:n], waves[1][:n]),
        },
    }


def main(kit, argv: list[str] | None = None) -> int:
    from koe.engines.omnivoice.bench.models import SIZES, VARIANTS

    steps = (("--num-step", {"type": int, "default": 32}),)
    return kit.accuracy_tool(
        kit, argv, "omnivoice", __doc__, measure, tuple(MODES), SIZES, variants=VARIANTS, size_help="random weights (real: the release's shapes)", options=steps
    )
