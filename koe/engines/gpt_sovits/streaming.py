"""GPT-SoVITS's `TTS.run(streaming_mode=True)` (upstream's `TTS_infer_pack/TTS.py`, its token-chunk
streaming, for SoVITS v1, v2, v2Pro and v2ProPlus) on koe's parts: each fragment's semantic tokens
in chunks as the AR model makes them, each chunk decoded by SoVITS and joined to the one before as
soon as it is made.

The flow, as upstream runs it:
1. The seed and the reference as in `synthesis.fragments` (HuBERT's layer-drop draws replayed).
2. The text cut as `return_fragment` cuts it (`pre_seg_text`: no pause-mark squeeze, no buckets),
   one fragment at a time (upstream's streaming decodes a batch's first row alone, so koe's
   drop-in takes batches of one).
3. The AR model's serial loop over the transcript's and the fragment's phonemes, its tokens in
   chunks (`t2s_decode.decode_chunks`, upstream's `infer_panel_naive(streaming_mode=True)`):
   chunks of at least `min_chunk_length` tokens cut after a token like the mute token (the cosine
   similarity of its embedding to token 486's over 0.0, `mute_similarity`), or every
   `min_chunk_length` tokens with `fixed_length_chunk`.
4. Each chunk: SoVITS's `decode_streaming` on every token so far (the chunks end to end, with the
   tokens a mute cut repeats), of which the chunk's tokens and `overlap_length` tokens before them
   go on through the prior's sample, the flow and the generator (the first chunk: all of them);
   the kept frames' first ones crossfaded with the last frames of the chunk before. A later chunk
   of fewer than 10 tokens overlaps by 10 - n more, its audio then cut back to `overlap_length + n`
   tokens' worth.
5. The joins: the first chunk's audio is returned without its last `overlap_size` samples
   (ceil(overlap_length x samples per token), prod(upsample_rates) x 2 / speed samples a token); a
   middle one is joined to the audio before by SOLA over `overlap_size` samples (`_join`: written
   into the chunk's own audio, as upstream's join writes it, which the next join and a held-back
   tail then read) and returned from where the one before ended, without its own last
   `overlap_size`; the last chunk is returned whole, unjoined (upstream's join skips it: its audio
   starts with the overlap tokens', in place of the held-back tail); a last chunk of no tokens
   returns the held-back tail of the one before.
6. Each chunk through `audio_postprocess` alone (a peak over 1 normalised, no silence); after each
   fragment `fragment_interval` s of zeros (at SoVITS's rate), a chunk of its own, then the cancel
   check (upstream's `stop_flag`, read once a fragment ends).

koe returns the float32 samples before upstream's int16 step (`synthesis.to_int16`).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from koe.engines.base import InvalidOption, Option, OptionsSchema
from koe.engines.gpt_sovits.synthesis import Fragment, Models, RunSettings, fragment_of, fragment_texts, postprocess
from koe.engines.gpt_sovits.t2s_decode import CHECK_TOKENS, decode_chunks, mute_similarity
from koe.engines.gpt_sovits.vocoder_synthesis import sola_offset
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice

__all__ = ["STREAM_OPTIONS", "StreamSettings", "stream"]

SPLIT_THRESHOLD = 0.0  # TTS.run's chunk_split_thershold: a token more like the mute token than this is a cut
SHORT_CHUNK = 10  # a later chunk under this many tokens overlaps by the difference more

STREAM_OPTIONS = OptionsSchema(
    (
        Option("overlap_length", "int", "semantic tokens each chunk decodes again from the one before, to join them", 2, low=1),
        Option("min_chunk_length", "int", "the fewest semantic tokens in a chunk", 16, low=1),
        Option("fixed_length_chunk", "bool", "cut every min_chunk_length tokens, not after a mute-like token", False),
    )
)


@dataclass(frozen=True)
class StreamSettings:
    """`TTS.run`'s streaming_mode inputs, with its defaults."""

    overlap_length: int = 2
    min_chunk_length: int = 16
    fixed_length_chunk: bool = False

    @classmethod
    def checked(cls, values: Mapping[str, Any]) -> StreamSettings:
        """The inputs of `STREAM_OPTIONS` in `values`, checked (`InvalidOption`): their types and
        ranges, and an overlap shorter than the first chunk (a mute cut's has two tokens more):
        upstream returns the first chunk's audio less the overlap's, and fails on the empty rest."""
        made = cls(**STREAM_OPTIONS.validate({k: values[k] for k in STREAM_OPTIONS.names if k in values}))
        first = made.min_chunk_length + (0 if made.fixed_length_chunk else CHECK_TOKENS)
        if made.overlap_length >= first:
            raise InvalidOption(
                f"overlap_length={made.overlap_length}: must be under {first}, the fewest tokens of a first chunk "
                f"(min_chunk_length{'' if made.fixed_length_chunk else ' + 2 with cuts after mute-like tokens'}): upstream returns the first "
                "chunk less the overlap's audio, and fails when nothing is left",
                param="overlap_length",
            )
        return made


def stream(
    models: Models, voice: GPTSoVITSVoice, text: str, language: str, s: RunSettings, chunking: StreamSettings = StreamSettings(), cancel=None
) -> Iterator[np.ndarray]:
    """`TTS.run(streaming_mode=True)`'s audio after the seed (see the module's doc): float32 chunks,
    each fragment's followed by its silence. SoVITS v1/v2/v2Pro/ProPlus only (upstream turns
    streaming_mode into return_fragment for v3/v4)."""
    if models.vocoder is not None:
        raise ValueError(f"GPT-SoVITS {models.version} has no streaming_mode (upstream speaks v3/v4 by return_fragment instead)")
    texts = fragment_texts(text, language, s.text_split_method, streamed=True)
    silence = np.zeros(int(models.sovits.config.sampling_rate * s.fragment_interval), np.float32)
    for _ in range(models.hubert_draws):
        torch.rand([])
    similarity = None if chunking.fixed_length_chunk else mute_similarity(models.t2s)
    with torch.inference_mode():
        for t in texts:
            yield from _chunks(models, voice, fragment_of(models, t, language), s, chunking, similarity)
            yield silence.copy()
            if cancel is not None:
                cancel.raise_if_cancelled()


def _chunks(
    models: Models, voice: GPTSoVITSVoice, fragment: Fragment, s: RunSettings, chunking: StreamSettings, similarity: torch.Tensor | None
) -> Iterator[np.ndarray]:
    """One fragment's chunks (steps 3-5 of the module's doc)."""
    t2s, sovits = models.t2s, models.sovits
    if voice.has_transcript:
        phones, bert, prompt = voice.phones + fragment.phones, torch.cat([voice.bert, fragment.bert], 1), voice.semantic.expand(1, -1)
    else:
        phones, bert, prompt = fragment.phones, fragment.bert, None
    ids = torch.LongTensor(phones).unsqueeze(0)
    tokens = decode_chunks(
        t2s, ids, bert.unsqueeze(0), prompt, s.sampling, t2s.config.early_stop_num, None, chunking.min_chunk_length, similarity, SPLIT_THRESHOLD
    )
    per_token = math.prod(sovits.config.upsample_rates) * (2 / s.speed_factor)
    overlap_size = math.ceil(chunking.overlap_length * per_token)
    text_phones = torch.LongTensor(fragment.phones).unsqueeze(0)
    specs, sv = list(voice.specs), None if voice.sv is None else list(voice.sv)
    made: list[torch.Tensor] = []
    last_audio = last_kept = None
    for chunk, final in tokens:
        if chunk is None:  # the last tokens made a chunk already: what is left is the held-back tail
            if last_audio is not None:
                yield _alone(last_audio[-overlap_size:])
            return
        made.append(chunk)
        first, n = last_audio is None, chunk.shape[-1]
        overlap = chunking.overlap_length + (SHORT_CHUNK - n) if not first and n < SHORT_CHUNK else chunking.overlap_length
        codes = torch.cat(made, -1).long().unsqueeze(0)
        frames = None if first else last_kept[:, :, -overlap * 2 :]
        wave, kept = sovits.decode_streaming(codes, text_phones, specs, s.speed_factor, sv, None if first else n + overlap, frames)
        audio = wave[0, 0, :]
        if overlap > chunking.overlap_length:
            audio = audio[-int((chunking.overlap_length + n) * per_token) :]
        out = audio
        if first and not final:
            out = audio[:-overlap_size]
        elif not first and not final:
            out = _join(last_audio, audio, overlap_size)[last_audio.shape[0] - overlap_size : -overlap_size]
        last_audio, last_kept = audio, kept
        yield _alone(out)


def _join(previous: torch.Tensor, current: torch.Tensor, overlap: int) -> torch.Tensor:
    """Upstream's `sola_algorithm([previous, current], overlap)`: `current` from the best offset on,
    its first `overlap` samples crossfaded (Hann) with `previous`'s last, after `previous` less
    those. As upstream's, the crossfade is written into `current` itself."""
    offset = sola_offset(previous, current, overlap)
    window = torch.hann_window(overlap * 2, dtype=previous.dtype)
    tail = current[offset:]
    tail[:overlap] = window[:overlap] * tail[:overlap] + window[overlap:] * previous[-overlap:]
    return torch.cat([previous[:-overlap], tail], 0)


def _alone(audio: torch.Tensor) -> np.ndarray:
    """`audio_postprocess([[audio]], fragment_interval=0)` before its int16 step (in place, as upstream's)."""
    return postprocess([[audio]], None, 0).numpy()
