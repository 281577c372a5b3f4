"""GPT-SoVITS's semantic-token decoding, as upstream's `Text2SemanticDecoder` runs it.

`TTS.run` picks the loop by its options (non-streaming): `parallel_infer=True` (its default) runs
`infer_panel_batch_infer` (`decode_batched` here: a batch's rows padded and decoded together),
`parallel_infer=False` runs `infer_panel_naive_batched` (`decode_serial`: each row alone, in
order, `infer_panel_naive`). Without a reference transcript (no prompt tokens) the batched loop
falls back to the serial one with the default repetition penalty 1.35, as upstream's does.
`streaming_mode=True` (serial only) runs the serial loop and yields its tokens in chunks
(`decode_chunks`). The two loops differ in their bits (masked against unmasked attention at each step) and in what they
keep at the end, so each is reproduced as it is:

Serial (`serial_steps`, the core `decode_one` and `decode_chunks` read), one row: the prompt pass over [text, prompt tokens], then one token a step
on the cache. At steps 0-10 EOS is cut from the logits (at least 11 tokens). Each step samples
(sampling.py: repetition penalty over the row so far, prompt included), appends, then stops when
more than `early_stop_num` tokens were made (the last one kept), or when the penalised logits'
argmax or the sample is EOS (that step's token dropped), or at step 1499. Returns the row (prompt
+ tokens) and the last step's index `idx`; without prompt tokens `idx` is 0. `TTS.run` keeps the
last `idx` tokens of the row (`row[-idx:]`).

Batched (`decode_batched`): each row's text is embedded alone and left-padded with zeros to
`max_len` (`TTS.run`: the longest text of the batch); the prompt pass's mask hides the padding
keys (and, as upstream, keeps the padded queries attending); each decode step attends under the
last query's mask grown by one. One sample call for all live rows a step (one exponential_ of
(rows, V)); a row stops when its sample or its argmax is EOS, keeping its tokens without that
step's; the others go on with the finished rows removed from the batch and the cache. At
`early_stop_num` or step 1499 the remaining rows stop, each WITHOUT its last token.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence

import torch
import torch.nn.functional as F

from koe.engines.gpt_sovits.sampling import Sampling, sample
from koe.engines.gpt_sovits.t2s import Text2Semantic

__all__ = [
    "CHECK_TOKENS",
    "MAX_STEPS",
    "MIN_STEPS",
    "MUTE_TOKEN",
    "TTS_DEFAULTS",
    "decode_batched",
    "decode_chunks",
    "decode_one",
    "decode_serial",
    "mute_similarity",
    "serial_steps",
]

MAX_STEPS = 1500  # upstream's loop bound
MIN_STEPS = 11  # steps whose logits have EOS cut off
CHECK_TOKENS = 2  # streaming: tokens past chunk_length before a cut is looked for
MUTE_TOKEN = 486  # TTS_Config.mute_tokens: the semantic token of silence, every version
TTS_DEFAULTS = Sampling()  # TTS.run's top_k 15, top_p 1, temperature 1, repetition_penalty 1.35


def _cut(logits: torch.Tensor, step: int) -> torch.Tensor:
    return logits[:, :-1] if step < MIN_STEPS else logits  # a view: the penalty written into it stays


def _prompt_mask(text_len: int, audio_len: int) -> torch.Tensor:
    """(T+P, T+P) bool, True = not seen: text sees text; audio sees text and audio up to itself."""
    text = F.pad(torch.zeros(text_len, text_len, dtype=torch.bool), (0, audio_len), value=True)
    audio = F.pad(torch.triu(torch.ones(audio_len, audio_len, dtype=torch.bool), diagonal=1), (text_len, 0), value=False)
    return torch.concat([text, audio], dim=0)


@torch.inference_mode()
def serial_steps(
    model: Text2Semantic,
    phones: torch.Tensor,
    bert: torch.Tensor,
    prompt: torch.Tensor | None,
    settings: Sampling = TTS_DEFAULTS,
    early_stop_num: float = -1,
    generator: torch.Generator | None = None,
    first_logits: list[torch.Tensor] | None = None,
) -> Iterator[tuple[torch.Tensor, int, bool, bool]]:
    """The serial loop's core (upstream's `infer_panel_naive`), one row: phones (1, T), bert
    (1, 1024, T), prompt (1, P) semantic tokens or None. Yields after each step (the row so far
    (1, P + n), the step's index, whether it ended at EOS, whether decoding stops), the last with
    stop True. `first_logits` (a list) receives step 0's logits (1, vocab_size)."""
    x = model.embed_text(phones, bert)
    text_len = x.shape[1]
    if prompt is not None:
        y, audio_len = prompt, prompt.shape[1]
        xy = torch.concat([x, model.embed_audio(prompt)], dim=1)
    else:
        y, audio_len = torch.zeros(x.shape[0], 0, dtype=torch.int, device=x.device), 0
        xy = x
    prefix_len = y.shape[1]
    src_len = text_len + audio_len
    masked = _prompt_mask(text_len, audio_len).unsqueeze(0).expand(model.heads, -1, -1).view(1, model.heads, src_len, src_len).to(device=x.device)
    cache = model.new_cache()
    for idx in range(MAX_STEPS):
        hidden = model(xy, cache, masked if idx == 0 else None)
        logits = model.logits(hidden)
        if first_logits is not None and idx == 0:
            first_logits.append(logits.clone())
        logits = _cut(logits, idx)
        samples = sample(logits, y, settings, generator)
        y = torch.concat([y, samples], dim=1)
        stop = early_stop_num != -1 and (y.shape[1] - prefix_len) > early_stop_num
        eos = bool(torch.argmax(logits, dim=-1)[0] == model.eos or samples[0, 0] == model.eos)
        if eos:
            y = y[:, :-1]
        if stop or eos or idx == MAX_STEPS - 1:
            if y.shape[1] == 0:
                y = torch.concat([y, torch.zeros_like(samples)], dim=1)
            yield y, idx, eos, True
            return
        yield y, idx, eos, False
        xy = model.embed_next(y[:, -1:], audio_len + idx)


def decode_one(
    model: Text2Semantic,
    phones: torch.Tensor,
    bert: torch.Tensor,
    prompt: torch.Tensor | None,
    settings: Sampling = TTS_DEFAULTS,
    early_stop_num: float = -1,
    generator: torch.Generator | None = None,
    first_logits: list[torch.Tensor] | None = None,
) -> tuple[torch.Tensor, int]:
    """Upstream's `infer_panel_naive` (not streaming) for one row (see `serial_steps`) -> (the row
    (1, P + n) int64 (int32 without a prompt), idx; 0 without a prompt)."""
    y, idx, _, _ = deque(serial_steps(model, phones, bert, prompt, settings, early_stop_num, generator, first_logits), maxlen=1)[0]
    return y, (idx if prompt is not None else 0)


def decode_chunks(
    model: Text2Semantic,
    phones: torch.Tensor,
    bert: torch.Tensor,
    prompt: torch.Tensor | None,
    settings: Sampling = TTS_DEFAULTS,
    early_stop_num: float = -1,
    generator: torch.Generator | None = None,
    chunk_length: int = 24,
    mute_similarity: torch.Tensor | None = None,
    split_threshold: float = 0.3,
) -> Iterator[tuple[torch.Tensor | None, bool]]:
    """Upstream's `infer_panel_naive(streaming_mode=True)`: the serial loop's tokens (the same draws)
    as (chunk (1, n) or None, is_final) pairs. `TTS.run(streaming_mode=True)` passes `chunk_length`
    = its `min_chunk_length` (16), `split_threshold` 0.0 and `mute_similarity` (`mute_similarity()`
    of the model; None with `fixed_length_chunk`).

    Fixed length (no `mute_similarity`): every `chunk_length` new tokens are a chunk. Otherwise, once
    `chunk_length + 2` tokens wait, each waiting token scores its similarity to the mute token less
    the threshold (negatives set to -1) plus its successor's score; where the best score is >= 0 and
    at least `chunk_length` tokens come before the cut, upstream yields ALL the waiting tokens (not
    only those before the cut) and then moves its start to just after the cut, so the next chunk
    repeats the tokens past it. The final chunk is the tokens from the start on (None if none).
    """
    start = 0 if prompt is None else prompt.shape[1]
    waiting = 0
    for y, _, eos, stop in serial_steps(model, phones, bert, prompt, settings, early_stop_num, generator):
        waiting += 0 if eos else 1
        if stop:
            yield (y[:, start:] if start < y.shape[1] else None), True
            return
        if mute_similarity is not None and waiting >= chunk_length + CHECK_TOKENS:
            score = mute_similarity[y[0, start:]] - split_threshold
            score[score < 0] = -1
            score[:-1] = score[:-1] + score[1:]  # a cut between two mute-like tokens
            cut = int(score.argmax())
            if score[cut] >= 0 and cut + 1 >= chunk_length:
                yield y[:, start:], False
                waiting -= cut + 1
                start += cut + 1
        elif mute_similarity is None and waiting >= chunk_length:
            yield y[:, -waiting:], False
            start += waiting
            waiting = 0


def mute_similarity(model: Text2Semantic, mute_token: int = MUTE_TOKEN) -> torch.Tensor:
    """(vocab_size,) cosine similarity of each semantic token's embedding to the mute token's, as
    `TTS.init_t2s_weights` computes it for streaming."""
    codebook = model.ar_audio_embedding.word_embeddings.weight.detach()
    return F.cosine_similarity(codebook[mute_token].unsqueeze(0).float(), codebook.float(), dim=-1)


def decode_serial(
    model: Text2Semantic,
    phones: Sequence[torch.Tensor],
    bert: Sequence[torch.Tensor],
    prompts: torch.Tensor | None,
    settings: Sampling = TTS_DEFAULTS,
    early_stop_num: float = -1,
    generator: torch.Generator | None = None,
    first_logits: list[torch.Tensor] | None = None,
) -> tuple[list[torch.Tensor], list[int]]:
    """Upstream's `infer_panel_naive_batched`: rows phones[i] (T_i,), bert[i] (1024, T_i), prompts
    (B, P) or None, decoded one after another -> (rows (P + n_i,), idx per row); `first_logits`
    receives each row's step-0 logits (1, vocab_size)."""
    rows, idxs = [], []
    for i in range(len(phones)):
        prompt = prompts[i].unsqueeze(0) if prompts is not None else None
        y, idx = decode_one(model, phones[i].unsqueeze(0), bert[i].unsqueeze(0), prompt, settings, early_stop_num, generator, first_logits)
        rows.append(y[0])
        idxs.append(idx)
    return rows, idxs


@torch.inference_mode()
def decode_batched(
    model: Text2Semantic,
    phones: Sequence[torch.Tensor],
    bert: Sequence[torch.Tensor],
    prompts: torch.Tensor | None,
    settings: Sampling = TTS_DEFAULTS,
    early_stop_num: float = -1,
    generator: torch.Generator | None = None,
    max_len: int | None = None,
    first_logits: list[torch.Tensor] | None = None,
) -> tuple[list[torch.Tensor], list[int]]:
    """Upstream's `infer_panel_batch_infer`: rows phones[i] (T_i,), bert[i] (1024, T_i) with prompts
    (B, P) decoded as one batch -> (rows (P + n_i,), idx per row). `max_len`: the padded text length
    (`TTS.run` passes the batch's longest; default the longest given). Without prompts: upstream's
    fallback, `decode_serial` with the default repetition penalty."""
    if prompts is None:
        fallback = Sampling(settings.top_k, settings.top_p, settings.temperature)
        return decode_serial(model, phones, bert, None, fallback, early_stop_num, generator, first_logits)
    lens = torch.LongTensor([p.shape[-1] for p in phones])
    max_len = int(lens.max()) if max_len is None else max_len
    rows = []
    for p, b in zip(phones, bert, strict=True):
        x = model.ar_text_position(model.ar_text_embedding(p.unsqueeze(0)) + model.bert_proj(b.transpose(0, 1).unsqueeze(0))).squeeze(0)
        rows.append(F.pad(x, (0, 0, max_len - x.shape[0], 0), value=0) if x.shape[0] < max_len else x)  # left padding
    x = torch.stack(rows, dim=0)
    y = prompts
    text_len, audio_len, bsz = x.shape[1], y.shape[1], x.shape[0]
    prefix_len, src_len = y.shape[1], text_len + audio_len
    xy = torch.concat([x, model.embed_audio(y)], dim=1)
    padding = torch.concat([_left_padding(lens, max_len), _left_padding(torch.LongTensor([audio_len] * bsz), audio_len)], dim=1)
    causal = _prompt_mask(text_len, audio_len).view(1, src_len, src_len).repeat(bsz, 1, 1)
    masked = causal.logical_or(padding.view(bsz, 1, src_len).repeat(1, src_len, 1))
    masked = masked.unsqueeze(1).expand(-1, model.heads, -1, -1).bool()  # (B, H, S, S)

    finished: list[torch.Tensor | None] = [None] * bsz
    idx_list: list[int | None] = [None] * bsz
    live = list(range(bsz))  # the batch rows still decoding, by their index in the input
    cache = model.new_cache()
    for idx in range(MAX_STEPS):
        hidden = model(xy, cache, masked)
        logits = model.logits(hidden)
        if first_logits is not None and idx == 0:
            first_logits.append(logits.clone())
        masked = F.pad(masked[:, :, -1].unsqueeze(-2), (0, 1), value=False) if idx == 0 else F.pad(masked, (0, 1), value=False)
        logits = _cut(logits, idx)
        samples = sample(logits, y, settings, generator)
        y = torch.concat([y, samples], dim=1)
        ended = (samples[:, 0] == model.eos).logical_or(torch.argmax(logits, dim=-1) == model.eos)
        if bool(ended.any()):
            keep = torch.where(~ended)[0]
            for i in torch.where(ended)[0].tolist():
                idx_list[live[i]], finished[live[i]] = idx, y[i, :-1]
            live = [live[i] for i in keep.tolist()]
            y, masked = torch.index_select(y, 0, keep), torch.index_select(masked, 0, keep)
            for layer in cache.layers:
                layer.keys, layer.values = torch.index_select(layer.keys, 0, keep), torch.index_select(layer.values, 0, keep)
        stop = (early_stop_num != -1 and (y.shape[1] - prefix_len) > early_stop_num) or idx == MAX_STEPS - 1
        if stop:
            for i, row in enumerate(live):
                idx_list[row], finished[row] = idx, y[i, :-1]
        if stop or None not in idx_list:
            break
        xy = model.embed_next(y[:, -1:], audio_len + idx)
    return finished, [MAX_STEPS - 1 if i is None else i for i in idx_list]


def _left_padding(lengths: torch.Tensor, max_len: int) -> torch.Tensor:
    """(B, max_len) bool, True at each row's left padding (upstream's `make_pad_mask_left`)."""
    max_len = max(max_len, int(lengths.max()))
    positions = torch.arange(0, max_len).unsqueeze(0).repeat(lengths.shape[0], 1)
    positions -= (max_len - lengths).unsqueeze(-1)
    return positions < 0
