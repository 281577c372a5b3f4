"""Error of an opt-in precision mode against the exact float32 path, on the same weights.

Teacher forcing: the float32 engine decodes `frames` frames (end of speech disabled); then both
engines are fed exactly those codes, and for every frame we compare the talker's codebook-0
logits and the code predictor's logits of codebooks 1..15: cosine similarity and top-1 agreement.
The codec is compared on the same codes: SNR of the mode's waveform (through the codec the mode
decodes with: int8 and int4 use the fast codec, `metadata["codec"]`) against the exact float32 codec's.

    python -m koe.bench.accuracy --size 0.6b --precision int8 [--frames 24] [--out acc.json]

Qwen3-TTS's `accuracy` tool (`BENCH.tools`; `koe.bench.accuracy` runs it): the agreement measures
(`kit.compare`, `kit.snr_db`) and its command line (`kit.accuracy_tool`) are the benchmark's own.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch


@torch.inference_mode()
def forced_logits(engine, items, codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Logits under teacher forcing with `codes` (T, G): talker (T, V) and predictor (T, G-1, V')."""
    from koe.engines.qwen3_tts.generate import frame_embedding, prefill, step_positions, trailing_input
    from koe.engines.qwen3_tts.prompt import build_talker_inputs

    talker = engine.network.talker
    predictor = talker.code_predictor
    inputs = build_talker_inputs(talker, engine.cfg, items, engine.default_non_streaming())
    length = inputs.attention_mask.shape[1]
    first = prefill(talker, inputs)  # one unpadded row: no attention mask now or later
    cache, deltas, hidden = first.cache, first.deltas, first.hidden
    talker_logits, predictor_logits = [], []
    for step in range(codes.shape[0]):
        talker_logits.append(talker.codec_head(hidden[:, -1]).float()[0])
        frame = codes[step][None]  # (1, G)
        code0 = talker.embed_codec(frame[:, :1])  # (1, 1, C)
        pcache = predictor.model.new_cache(1, frame.shape[1] + 1)  # the mode's own cache (C step in int8 / int4)
        embeds = torch.cat((hidden[:, -1:], code0), dim=1)
        pos = torch.arange(2).expand(1, -1)
        rows = []
        for i in range(frame.shape[1] - 1):
            rows.append(predictor.forward_step(embeds, pos, pcache, head=i)[0, -1].float())
            embeds = predictor.model.codec_embedding[i](frame[:, i + 1 : i + 2])
            pos = torch.full((1, 1), 2 + i, dtype=torch.long)
        predictor_logits.append(torch.stack(rows))
        x = frame_embedding(talker, code0, frame[:, 1:]) + trailing_input(inputs, step)
        hidden = talker.forward_hidden(x.to(hidden.dtype), step_positions(length + step, deltas), cache, None)
    return torch.stack(talker_logits), torch.stack(predictor_logits)


def measure(kit, folder: Path, precision: str, frames: int, seed: int = 0) -> dict:
    from koe.engines.qwen3_tts.bench import cases
    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

    exact = Qwen3TTSEngine.load(folder, device="cpu", precision="fp32")
    mode = Qwen3TTSEngine.load(folder, device="cpu", precision=precision)
    items = exact.prompt_items([cases.TEXT], [cases.LANGUAGE], [cases.SPEAKER], [None])
    settings = exact.decode_settings(max_new_tokens=frames + 1)
    settings = replace(settings, eos_id=settings.suppress_ids[-1])
    (codes,) = exact.generate_codes(items, settings, non_streaming_mode=exact.default_non_streaming(), generator=torch.Generator().manual_seed(seed))
    t_ref, p_ref = forced_logits(exact, items, codes)
    t_mode, p_mode = forced_logits(mode, items, codes)
    with torch.inference_mode():
        wav_ref = exact.codec.decode([codes])[0].float()
        wav_mode = mode.audio_codec.decode([codes])[0].float()
    return {
        "precision": mode.precision,
        "kernel": mode.kernel,
        "codec": mode.result_metadata()["codec"],
        "frames": int(codes.shape[0]),
        "talker": kit.compare(t_ref, t_mode),
        "predictor": kit.compare(p_ref, p_mode),
        "codec_snr_db": kit.snr_db(wav_ref, wav_mode),
    }


def main(kit, argv: list[str] | None = None) -> int:
    from koe.engines.qwen3_tts.bench.models import SIZES

    frames = (("--frames", {"type": int, "default": 24}),)
    return kit.accuracy_tool(kit, argv, "qwen3_tts", __doc__, measure, ("bf16", "int8", "int4"), SIZES, "0.6b", ("custom_voice",), options=frames)
