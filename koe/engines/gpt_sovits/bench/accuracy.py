"""Error of GPT-SoVITS's opt-in GPT precisions (int8, int4) against the exact float32 path, on the same weights.

    python -m koe.bench.accuracy --family gpt_sovits --precision int8 [--size real] [--case v2]

The benchmark's own request (a case's text in the voice of its 5 s reference clip, zero-shot, its
seed), decoded serially (`parallel_infer` off: one row, as the quantized step and the exact one read
the same cache layout), two measures:

- teacher-forced: the exact GPT decodes its tokens; at every step the mode's GPT reads the very same
  embeddings (the prompt pass, then the exact path's tokens, on its own cache), and its next-token
  log-probabilities are compared with the exact ones: cosine of the centred log-probabilities over
  the semantic vocabulary (mean and min over steps), how often the arg-max agrees, the largest
  difference of a log-probability;
- free-running: both GPTs decode from the same seed (each its own tokens), then the share of tokens
  that came out equal (position by position, over the longer), both lengths, and the cosine and SNR
  of the waveforms (each through the same float32 SoVITS). One different pick early changes every
  later draw, so this is the end-to-end price of the mode rather than a per-step error.

GPT-SoVITS's `accuracy` tool (`BENCH.tools`); the command line, cosine and SNR are the benchmark's
own (`kit.accuracy_tool`, `kit.compare`, `kit.snr_db`).
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from koe.engines.gpt_sovits.bench import cases

MODES = ("int8", "int4")
VARIANT = "GPT-SoVITS-v2"  # the folder measured


class _Forced:
    """The exact GPT as the decode loop calls it, with the mode's GPT run beside it on the same
    inputs (its own cache): each step's two log-probability rows are compared (`steps`)."""

    def __init__(self, exact, mode, kit) -> None:
        self.exact, self.mode, self.kit = exact, mode, kit
        self.steps: list[dict] = []
        self.worst = 0.0
        self._mode_cache = self._mode_hidden = None

    def __getattr__(self, name: str):
        return getattr(self.exact, name)  # the embeddings, eos, heads: the exact model's (float32 in every mode)

    def new_cache(self):
        self._mode_cache = self.mode.new_cache()
        return self.exact.new_cache()

    def __call__(self, x: torch.Tensor, cache, masked: torch.Tensor | None = None) -> torch.Tensor:
        self._mode_hidden = self.mode(x, self._mode_cache, masked)
        return self.exact(x, cache, masked)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        logits = self.exact.logits(hidden)
        exact, other = (torch.log_softmax(v.double(), dim=-1) for v in (logits, self.mode.logits(self._mode_hidden)))
        self.steps.append(self.kit.compare(exact - exact.mean(), other - other.mean()))
        self.worst = max(self.worst, float((exact - other).abs().max()))
        return logits

    def summary(self) -> dict:
        n = max(len(self.steps), 1)
        return {
            "cosine_mean": sum(s["cosine_mean"] for s in self.steps) / n,
            "cosine_min": min((s["cosine_min"] for s in self.steps), default=None),
            "top1_agreement": sum(s["top1_agreement"] for s in self.steps) / n,
            "max_abs_logp_diff": self.worst,
            "steps": len(self.steps),
        }


def _spoken(engine, request) -> tuple[np.ndarray, list[int]]:
    """The request's audio and the semantic tokens its decode kept (every batch's rows, in order)."""
    from koe.engines.gpt_sovits import synthesis

    semantic, tokens = synthesis._semantic, []

    def kept(*args, **kwargs):
        rows = semantic(*args, **kwargs)
        tokens.extend(int(t) for r in rows for t in r.reshape(-1))
        return rows

    synthesis._semantic = kept
    try:
        audio = np.concatenate([np.asarray(c.samples, dtype=np.float32) for c in engine.synthesize(request)])
    finally:
        synthesis._semantic = semantic
    return audio, tokens


def measure(kit, folder: Path, precision: str, case: str = cases.DEFAULT_CASES[0]) -> dict:
    from koe.engines.base import SynthesisRequest, VoiceReference
    from koe.engines.gpt_sovits.engine import GPTSoVITSEngine
    from koe.engines.gpt_sovits.t2s import load_t2s

    engine = GPTSoVITSEngine.load(folder)
    exact = engine.models.t2s
    mode = load_t2s(engine.layout.gpt, precision=precision)
    _, inputs = cases.inputs({"case": case, "reference": ""})
    voice = engine.prepare_voice(
        VoiceReference(kit.wire.reference_clip(cases.REF_SECONDS, cases.REF_RATE), inputs["prompt_text"]), prompt_lang=inputs["prompt_lang"]
    )
    request = SynthesisRequest(
        inputs["text"], language=inputs["text_lang"], voice=voice, seed=inputs["seed"], max_segment_s=3600.0, options={"parallel_infer": False}
    )
    forced = _Forced(exact, mode, kit)
    try:
        engine.models.t2s = forced
        exact_audio, exact_tokens = _spoken(engine, request)
        engine.models.t2s = mode
        mode_audio, mode_tokens = _spoken(engine, request)
    finally:
        engine.models.t2s = exact
    longest = max(len(exact_tokens), len(mode_tokens), 1)
    n = min(len(exact_audio), len(mode_audio))
    a, b = torch.from_numpy(exact_audio[:n]), torch.from_numpy(mode_audio[:n])
    return {
        "precision": mode.precision,
        "kernel": mode.kernel,
        "version": engine.version,
        "case": case,
        "seed": inputs["seed"],
        "teacher_forced": forced.summary(),
        "free_running": {
            "tokens_equal": sum(x == y for x, y in zip(exact_tokens, mode_tokens)) / longest,
            "exact_tokens": len(exact_tokens),
            "mode_tokens": len(mode_tokens),
            "waveform_cosine": kit.cosine(a[None], b[None])["cosine_mean"] if n else None,
            "waveform_snr_db": kit.snr_db(a, b) if n else None,
        },
    }


def main(kit, argv: list[str] | None = None) -> int:
    from koe.engines.gpt_sovits.bench.models import SIZES

    # the AR GPT's error: v2's folder and cases (v4's GPT is the same network; its CFM is float32 in every mode)
    choices = [name for name, (variant, _) in cases.CASES.items() if variant == VARIANT]
    case = (("--case", {"default": cases.DEFAULT_CASES[0], "choices": choices, "help": "the benchmark's case whose request is measured"}),)
    return kit.accuracy_tool(
        kit,
        argv,
        "gpt_sovits",
        __doc__,
        measure,
        MODES,
        SIZES,
        default_size="real",
        variants=(VARIANT,),
        size_help="random weights (real: the release's shapes)",
        options=case,
    )
