"""The decode core: one generator of code frames that every way of speaking is a view of.

Step 0 (prefill) runs the talker over the prompt and draws codebook 0 of frame 0. Each later step
k feeds code 0 of frame k-1 back: the code predictor completes frame k-1 (codebooks 1..G-1, one
small decoder step each), the frame is yielded, and the talker, fed the sum of the frame's G
embeddings plus the next trailing text embedding, draws code 0 of frame k. So `max_new_tokens=N`
gives at most N-1 frames, and the end-of-speech code never appears in a frame.

Random draws happen in upstream's order (the predictor's G-1 draws of a frame, then the talker's
draw), from `generator` (None = torch's global generator), so a seeded run equals upstream's.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from koe.engines.base import CancelToken
from koe.engines.qwen3_tts.prompt import TalkerInputs
from koe.engines.qwen3_tts.talker import CodePredictor, Talker
from koe.nn.attention import causal_padding_mask
from koe.nn.kernel_stack import KernelCache
from koe.runtime.kv_cache import ConcatCache
from koe.runtime.sampling import SamplingConfig, draw, process_logits


@dataclass(frozen=True)
class DecodeSettings:
    talker: SamplingConfig
    predictor: SamplingConfig
    max_new_tokens: int
    eos_id: int
    suppress_ids: tuple[int, ...]

    def __post_init__(self) -> None:
        if self.max_new_tokens < 2:
            raise ValueError(f"max_new_tokens must be >= 2 (it yields at most max_new_tokens - 1 frames); got {self.max_new_tokens}")


@dataclass
class DecodeOutcome:
    """Filled in by the frames generator as it runs: which rows drew end-of-speech, and which path ran."""

    eos: torch.Tensor | None = None  # (B,) bool
    decode_path: dict = field(default_factory=lambda: {"decode_path": "decode_frames"})


@dataclass
class Frame:
    """One decoded frame for the whole batch."""

    index: int
    codes: torch.Tensor  # (B, G) int64
    alive: torch.Tensor  # (B,) bool: False where a row has ended (its codes are not speech)


FRAMES_AHEAD = 256  # positions a talker cache is made for beyond the prompt (a KernelCache grows past it)


def rope_positions(attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Prefill positions (3, B, L) for a left-padded batch, and each row's offset for later steps."""
    positions = attention_mask.float().cumsum(-1) - 1
    positions.masked_fill_(attention_mask == 0, 1)
    positions = positions.unsqueeze(0).expand(3, -1, -1)
    max_position = positions.max(0, keepdim=False)[0].max(-1, keepdim=True)[0]
    deltas = max_position + 1 - attention_mask.sum(dim=-1, keepdim=True)
    deltas = deltas - (1 - attention_mask).sum(dim=-1).unsqueeze(1)
    return positions, deltas


@dataclass
class Prefill:
    """The talker run over the prompt: its cache, last hidden states and codebook-0 logits."""

    cache: ConcatCache | KernelCache
    deltas: torch.Tensor  # (B, 1): each row's rotary offset for later steps
    hidden: torch.Tensor  # (B, L, C)
    logits: torch.Tensor  # (B, L, V)


def prefill(talker: Talker, inputs: TalkerInputs) -> Prefill:
    """Step 0: the talker over the (left-padded) prompt, as upstream's first forward."""
    batch, length = inputs.attention_mask.shape
    cache = talker.model.new_cache(batch, length + FRAMES_AHEAD, inputs.attention_mask)
    positions, deltas = rope_positions(inputs.attention_mask)
    mask = causal_padding_mask(inputs.attention_mask, torch.arange(length, device=inputs.embeds.device))
    hidden = talker.forward_hidden(inputs.embeds, positions, cache, mask)
    return Prefill(cache, deltas, hidden, talker.codec_head(hidden))


def frame_embedding(talker: Talker, code0_embed: torch.Tensor, rest: torch.Tensor) -> torch.Tensor:
    """The sum (B, 1, C) of a frame's G code embeddings: codebook 0 (already embedded) and `rest` (B, G-1)."""
    tables = talker.code_predictor.model.codec_embedding
    embeds = torch.cat([code0_embed] + [F.embedding(rest[..., i : i + 1], tables[i].weight) for i in range(len(tables))], dim=1)
    return embeds.sum(1, keepdim=True)


def trailing_input(inputs: TalkerInputs, step: int) -> torch.Tensor:
    """What the text side adds to the talker's input at decode step `step`: the next trailing text
    embedding while there is one, then the pad embedding."""
    if step < inputs.trailing_text.shape[1]:
        return inputs.trailing_text[:, step].unsqueeze(1)
    return inputs.tts_pad


def step_positions(cache_position: int, deltas: torch.Tensor) -> torch.Tensor:
    """Rotary positions (3, B, 1) of one decode step at `cache_position`, with each row's offset."""
    batch = deltas.shape[0]
    return (torch.arange(1, device=deltas.device).view(1, -1).expand(batch, -1) + (cache_position + deltas)).unsqueeze(0).expand(3, -1, -1)


def decode_frames(
    talker: Talker,
    inputs: TalkerInputs,
    settings: DecodeSettings,
    generator: torch.Generator | None = None,
    *,
    row_limits: torch.Tensor | None = None,
    cancel: CancelToken | None = None,
    outcome: DecodeOutcome | None = None,
) -> Iterator[Frame]:
    """Yield frames until every row has drawn end-of-speech or `max_new_tokens` codes were drawn.

    `row_limits` (B,) caps each row's frames (the runaway guard): a row that reaches its cap ends
    as if it had drawn end-of-speech, without changing any other row. `cancel` is checked once per
    frame. `outcome.eos` tells, at the end, which rows ended by drawing end-of-speech.
    """
    device = inputs.embeds.device
    batch, length = inputs.attention_mask.shape
    vocab = talker.cfg.vocab_size
    eos = torch.tensor([settings.eos_id], device=device)
    suppress = torch.isin(torch.arange(vocab, device=device), torch.tensor(list(settings.suppress_ids), dtype=torch.long, device=device))

    first = prefill(talker, inputs)
    cache, deltas, hidden, logits = first.cache, first.deltas, first.hidden, first.logits
    padding = inputs.attention_mask
    # read once: later steps then need no host read for the mask (a KernelCache keeps each row's padding itself)
    padded = not isinstance(cache, KernelCache) and not bool(padding.all())
    history = torch.zeros((batch, 0), dtype=torch.long, device=device)
    unfinished = torch.ones(batch, dtype=torch.long, device=device)
    outcome = outcome if outcome is not None else DecodeOutcome()
    outcome.eos = torch.zeros(batch, dtype=torch.bool, device=device)
    step = 0
    while True:
        if cancel is not None:
            cancel.raise_if_cancelled()
        scores = process_logits(logits[:, -1, :].to(copy=True, dtype=torch.float32), history, settings.talker, eos_ids=eos, suppress_mask=suppress)
        token = draw(scores, settings.talker, generator)
        token = token * unfinished + settings.eos_id * (1 - unfinished)
        history = torch.cat([history, token[:, None]], dim=-1)
        drew_eos = token == settings.eos_id
        outcome.eos |= drew_eos & unfinished.bool()
        unfinished = unfinished & (~drew_eos).long()
        if row_limits is not None:
            unfinished = unfinished & (row_limits >= history.shape[1]).long()
        if history.shape[1] >= settings.max_new_tokens or not bool(unfinished.any()):
            return
        # Step `step + 1`: complete the frame of `token`, then feed it back.
        code0_embed = talker.embed_codec(token[:, None])  # (B, 1, C)
        rest = predict_codebooks(talker.code_predictor, hidden[:, -1:, :], code0_embed, settings.predictor, generator)
        codes = torch.cat([token[:, None], rest], dim=-1)  # (B, G)
        yield Frame(index=step, codes=codes, alive=unfinished.bool())

        x = frame_embedding(talker, code0_embed, rest) + trailing_input(inputs, step)  # (B, 1, C)
        cache_position = length + step
        pos = step_positions(cache_position, deltas)
        mask = None
        if padded:
            padding = torch.cat([padding, padding.new_ones((batch, 1))], dim=-1)
            mask = causal_padding_mask(padding, torch.tensor([cache_position], device=device))
        hidden = talker.forward_hidden(x, pos, cache, mask)
        logits = talker.codec_head(hidden)
        step += 1


def predict_codebooks(
    predictor: CodePredictor,
    talker_hidden: torch.Tensor,
    code0_embed: torch.Tensor,
    sampling: SamplingConfig,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """Codebooks 1..G-1 of one frame (B, G-1), one predictor step each."""
    batch = talker_hidden.shape[0]
    device = talker_hidden.device
    steps = predictor.cfg.num_code_groups - 1
    cache = predictor.model.new_cache(batch, steps + 2)
    embeds = torch.cat((talker_hidden, code0_embed), dim=1)  # (B, 2, C)
    logits = predictor.forward_step(embeds, 0, cache, head=0)  # positions 0, 1 (then 2 + i) for every row
    codes = torch.empty((batch, steps), dtype=torch.long, device=device)
    for i in range(steps):
        scores = process_logits(logits[:, -1, :].to(copy=True, dtype=torch.float32), codes[:, :i], sampling)
        token = draw(scores, sampling, generator)
        codes[:, i] = token
        if i + 1 == steps:
            break
        embeds = F.embedding(token[:, None], predictor.model.codec_embedding[i].weight)
        logits = predictor.forward_step(embeds, 2 + i, cache, head=i + 1)
    return codes
