"""Error of CosyVoice's opt-in LM precisions (bf16, int8, int4) against the exact float32 path, on the same weights.

    python -m koe.bench.accuracy --family cosyvoice --precision int8 [--variant Fun-CosyVoice3-0.5B-2512] [--size real]

The benchmark's own request (its text in the voice of its prompt clip, zero-shot), two measures:

- teacher-forced: the exact LM decodes its tokens; at every step the mode's LM reads the very same
  embeddings (the exact path's tokens so far, on its own cache), and its next-token
  log-probabilities are compared with the exact ones: cosine of the centred log-probabilities
  over the LM's vocabulary (mean and min over steps), how often the arg-max agrees, and the
  largest difference of a log-probability;
- free-running: both LMs decode from the same seed (each its own tokens), then the share of tokens
  that came out equal (position by position, over the longer), both lengths, and the cosine and SNR
  of the waveforms (both token lists through the float32 flow and vocoder, the vocoder's draws
  from the same seed). One different pick early changes every later draw, so this is the end-to-end
  price of the mode rather than a per-step error.

CosyVoice's `accuracy` tool (`BENCH.tools`); the command line, cosine and SNR are the benchmark's
own (`kit.accuracy_tool`, `kit.compare`, `kit.snr_db`).
"""

from __future__ import annotations

from pathlib import Path

import torch

from koe.engines.cosyvoice.bench import cases

MODES = ("bf16", "int8", "int4")


def _request(kit, model) -> dict:
    """The benchmark's request's model inputs (its first text piece; the prompt clip's samples as the WAV the benchmark writes holds them)."""
    samples, rate = kit.wire.reference_clip(cases.REF_SECONDS, cases.REF_RATE)
    variant = "Fun-CosyVoice3" if model.version == 3 else "CosyVoice2"
    prompt_text = model.text.normalize(cases.prompt_text(variant), split=False)
    return model.inputs.zero_shot(model.pieces(cases.TEXT)[0], prompt_text, model.inputs.prompt(samples, rate))


def _teacher_forced(exact, mode_lm, inputs: dict, seed: int, kit) -> tuple[dict, list[int]]:
    """Per step, the mode's log-probabilities on the exact path's embeddings, compared with the exact ones."""
    steps: list[dict] = []
    worst = 0.0
    step = exact.lm.step
    dtype = mode_lm.speech_embedding.weight.dtype
    mode_cache = None

    def compared(x, cache):
        nonlocal mode_cache, worst
        logp = step(x, cache)
        if mode_cache is None:
            mode_cache = mode_lm.backbone.new_cache(x.shape[1] + 64)
        other = mode_lm.step(x.to(dtype), mode_cache).float()
        steps.append(kit.compare(logp - logp.mean(), other - other.mean()))
        worst = max(worst, float((logp - other).abs().max()))
        return logp

    exact.lm.step = compared
    try:
        torch.manual_seed(seed)
        tokens = list(exact.tokens(inputs))
    finally:
        del exact.lm.step
    forced = {
        "cosine_mean": sum(s["cosine_mean"] for s in steps) / len(steps),
        "cosine_min": min(s["cosine_min"] for s in steps),
        "top1_agreement": sum(s["top1_agreement"] for s in steps) / len(steps),
        "max_abs_logp_diff": worst,
        "steps": len(steps),
    }
    return forced, tokens


def measure(kit, folder: Path, precision: str, seed: int = 0) -> dict:
    from koe.engines.cosyvoice.llm import load_lm
    from koe.engines.cosyvoice.model import CosyVoiceModel

    exact = CosyVoiceModel.load(folder)
    mode_lm = load_lm(folder, exact.config.lm, exact.qwen, precision)
    mode = CosyVoiceModel(exact.folder, exact.config, exact.qwen, exact.inputs, exact.text, mode_lm, exact.token2wav, exact.speakers)
    inputs = _request(kit, exact)
    with torch.inference_mode():
        forced, exact_tokens = _teacher_forced(exact, mode_lm, inputs, seed, kit)
        torch.manual_seed(seed)
        mode_tokens = list(mode.tokens(inputs))
        spoken = exact_tokens and mode_tokens  # no tokens, no audio (the flow refuses: random weights may end at once)
        waves = [exact.offline(t, inputs, generator=torch.Generator().manual_seed(seed))[0] for t in (exact_tokens, mode_tokens)] if spoken else []
    longest = max(len(exact_tokens), len(mode_tokens), 1)
    n = min(len(w) for w in waves) if waves else 0
    return {
        "precision": getattr(mode_lm, "precision", precision),
        "kernel": getattr(mode_lm, "kernel", None),
        "version": exact.version,
        "seed": seed,
        "teacher_forced": forced,
        "free_running": {
            "tokens_equal": sum(a == b for a, b in zip(exact_tokens, mode_tokens)) / longest,
            "exact_tokens": len(exact_tokens),
            "mode_tokens": len(mode_tokens),
            "waveform_cosine": kit.cosine(waves[0][None, :n], waves[1][None, :n])["cosine_mean"] if n else None,
            "waveform_snr_db": kit.snr_db(waves[0][:n], waves[1][:n]) if n else None,
        },
    }


def main(kit, argv: list[str] | None = None) -> int:
    from koe.engines.cosyvoice.bench.models import SIZES, VARIANTS

    seed = (("--seed", {"type": int, "default": 0, "help": "the draws' seed (both paths)"}),)
    return kit.accuracy_tool(
        kit, argv, "cosyvoice", __doc__, measure, MODES, SIZES, variants=VARIANTS, size_help="random weights (real: the release's shapes)", options=seed
    )
