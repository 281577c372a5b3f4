"""Session-wide random-weight model folders (built once per test session)."""

from __future__ import annotations

from pathlib import Path

from koe.engines.qwen3_tts.fixtures import write_random_model

_BUILT: dict[tuple[str, str], Path] = {}


def model_folder(root: Path, kind: str, size: str = "tiny") -> Path:
    """A random model of `kind` ("custom_voice", "voice_design", "base") and `size` ("tiny" is 0.6B-like,
    "tiny-proj" the 1.7B-like layout whose code predictor has an input projection)."""
    key = (kind, size)
    if key not in _BUILT:
        _BUILT[key] = write_random_model(root / f"{kind}-{size}", kind, size)
    return _BUILT[key]


def talker_request(engine, texts: list[str], max_new_tokens: int, greedy: bool = False, **sampling):
    """Talker inputs and decode settings for `texts` spoken by "ryan" in English (CustomVoice)."""
    from dataclasses import replace

    import torch

    from koe.engines.qwen3_tts.prompt import build_talker_inputs

    items, settings = engine._request(texts, "english", "ryan", None, None, sampling)
    settings = replace(settings, max_new_tokens=max_new_tokens)
    if greedy:
        settings = replace(settings, talker=replace(settings.talker, do_sample=False), predictor=replace(settings.predictor, do_sample=False))
    with torch.inference_mode():
        inputs = build_talker_inputs(engine.network.talker, engine.cfg, items, False)
    return inputs, settings


def push_all(decoder, codes, sizes):
    """Push `codes` (T, G) through a streaming codec decoder (`.push(codes) -> samples`) in pieces of
    `sizes` frames, cycled; each piece must give its frames' samples (1920 a frame, float32). The
    samples of all pieces, joined."""
    import itertools

    import torch

    pieces, done = [], 0
    for size in itertools.cycle(sizes):
        if done >= codes.shape[0]:
            break
        piece = codes[done : done + size]
        wav = decoder.push(piece)
        assert wav.shape == (piece.shape[0] * 1920,) and wav.dtype == torch.float32
        pieces.append(wav)
        done += size
    return torch.cat(pieces)
