"""Fish Speech S2's frame loop: the prompt through the slow stack once, then one frame per step, each
frame's main token sampled from the slow stack and its codebooks from the fast one.

Per frame, in upstream's order of random draws (all from torch's global generator):
1. the slow stack's token logits, plus `semantic_bias` (-inf except the semantic tokens and
   <|im_end|>), sampled twice: at the user's settings, then at RAS's (temperature 1.0, top-p 0.9,
   the user's top-k);
2. RAS (repetition-aware sampling): where the first draw is a semantic token that is among the
   main tokens of the last 10 decoded frames, the second draw replaces it. The prompt's frame (the
   first one) is never checked, and never enters the window;
3. the fast stack: its cache reset by position (position 0 takes the slow stack's normed hidden
   state, whose logits are not used), then codebook 0 is the main token's code (clamped into the
   codebook) and codebooks 1..N-1 are drawn one per position at the user's settings.

Sampling (`sampling_probs`, `race`): sort the logits, drop those past the top-k and where the
cumulative softmax exceeds top-p (the top token always kept), divide by the temperature, softmax;
then `argmax(p / -log(u))` for u uniform (the exponential race, one `rand_like` per draw).

Decoding stops after a frame whose main token is <|im_end|> (not checked on the first frame) or
after `max_new_tokens` frames, and the last frame is dropped either way (upstream's
`y[1:, prompt_length:-1]`), so `generate_frames` yields every frame but the last as soon as it
is made. Decode steps run under SDPA's math backend, the prompt's under its default, as upstream.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

from koe_fish_speech.model import DualARLM

__all__ = ["IM_END_ID", "RAS_WINDOW", "Frame", "Sampling", "frame_budget", "generate_codes", "generate_frames", "race", "sampling_probs"]

IM_END_ID = 151645  # <|im_end|> in the released tokenizer
RAS_WINDOW = 10  # decoded frames whose main tokens RAS looks back on
RAS_TEMPERATURE, RAS_TOP_P = 1.0, 0.9


@dataclass(frozen=True)
class Sampling:
    """Sampling settings (defaults: upstream's server's). Upstream accepts temperature in (0, 2) and top-p in (0, 1]."""

    temperature: float = 0.8
    top_p: float = 0.8
    top_k: int = 30

    def __post_init__(self) -> None:
        if not 0 < self.temperature < 2:
            raise ValueError(f"temperature must be in (0, 2), got {self.temperature}")
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")
        if self.top_k < 1:
            raise ValueError(f"top_k must be at least 1, got {self.top_k}")


@dataclass(frozen=True)
class Frame:
    """One decoded frame: its N codes (N,), the main token id, and whether RAS replaced that token."""

    codes: torch.Tensor
    token: int
    resampled: bool


def sampling_probs(logits: torch.Tensor, temperature: torch.Tensor, top_p: torch.Tensor, top_k: int) -> torch.Tensor:
    """logits (V,) -> probabilities (V,): top-k and top-p filtered (the top token always kept), then tempered."""
    ranked, order = torch.sort(logits, descending=True)
    mass = torch.cumsum(F.softmax(ranked, dim=-1), dim=-1)
    rank = torch.arange(ranked.shape[-1], device=ranked.device)
    cut = (mass > top_p) | (rank >= top_k)
    cut[0] = False
    cut = cut.scatter(dim=-1, index=order, src=cut)  # back to vocabulary order
    kept = torch.where(cut, float("-inf"), logits)
    return F.softmax(kept / torch.clip(temperature, min=1e-5), dim=-1)


def race(probs: torch.Tensor) -> torch.Tensor:
    """One draw from probs (V,) -> (1,) int32: the exponential race, argmax(p / -log(u)), u ~ U[0, 1) from torch's generator."""
    u = torch.rand_like(probs)
    return torch.argmax(probs / -torch.log(u), dim=-1, keepdim=True).to(dtype=torch.int)


def frame_budget(prompt_len: int, max_new_tokens: int, max_seq_len: int) -> int:
    """How many frames upstream's `generate` makes at most (0: as many as the context holds); the last is dropped."""
    if prompt_len >= max_seq_len:
        raise ValueError(f"the prompt ({prompt_len} positions) does not fit the context ({max_seq_len})")
    budget = min(max_new_tokens, max_seq_len - prompt_len) if max_new_tokens else max_seq_len - prompt_len
    if budget < 2:
        raise ValueError(f"max_new_tokens must be 0 or at least 2 (upstream fails on fewer frames), got a budget of {budget}")
    return budget


class _Decoder:
    """One request's state: caches, settings as tensors in the model's dtype, the RAS window."""

    def __init__(self, model: DualARLM, sampling: Sampling, semantic: tuple[int, int], im_end_id: int, positions: int | None = None) -> None:
        dtype, device = model.dtype, model.slow.embeddings.weight.device
        self.model, self.semantic, self.top_k = model, semantic, sampling.top_k
        self.temperature = torch.tensor(sampling.temperature, device=device, dtype=dtype)
        self.top_p = torch.tensor(sampling.top_p, device=device, dtype=dtype)
        self.ras_temperature = torch.tensor(RAS_TEMPERATURE, device=device, dtype=dtype)
        self.ras_top_p = torch.tensor(RAS_TOP_P, device=device, dtype=dtype)
        self.bias = torch.full((1, 1, model.config.vocab_size), float("-inf"), device=device, dtype=dtype)
        self.bias[0, 0, semantic[0] : semantic[1] + 1] = 0.0
        self.bias[0, 0, im_end_id] = 0.0
        self.slow_cache, self.fast_cache = model.slow.new_cache(positions), model.fast.new_cache()
        self.window: torch.Tensor | None = None  # (N + 1, RAS_WINDOW) int32 once decoding starts

    def step(self, columns: torch.Tensor, start: int) -> tuple[torch.Tensor, bool]:
        """columns (1, N + 1, T) at positions [start, start + T) -> the next frame's column (N + 1, 1) int32, and whether RAS replaced its token."""
        model, n = self.model, self.model.config.num_codebooks
        logits, hidden = model.slow(columns, start, self.slow_cache, self.semantic)
        biased = (logits + self.bias)[0, -1]
        token = race(sampling_probs(biased, self.temperature, self.top_p, self.top_k))
        fallback = race(sampling_probs(biased, self.ras_temperature, self.ras_top_p, self.top_k))
        resampled = False
        if self.window is not None:
            repeated = (self.window[0] == token).any() & (token >= self.semantic[0]) & (token <= self.semantic[1])
            token = torch.where(repeated, fallback, token)
            resampled = bool(repeated)
        model.fast(model.fast.project_in(hidden), 0, self.fast_cache)  # position 0: the slow stack's state
        code = torch.clamp(token - self.semantic[0], min=0, max=model.config.codebook_size - 1)
        column = [token, code]
        for position in range(1, n):
            logits = model.fast(model.fast.embeddings(code).view(1, 1, -1), position, self.fast_cache)
            code = race(sampling_probs(logits[0, -1], self.temperature, self.top_p, self.top_k))
            column.append(code)
        return torch.stack(column, dim=1).T, resampled

    def remember(self, column: torch.Tensor) -> None:
        """Shift a decoded frame's column (N + 1, 1) into the RAS window."""
        if self.window is None:
            self.window = torch.zeros((column.shape[0], RAS_WINDOW), dtype=torch.int, device=column.device)
        self.window = self.window.roll(-1, dims=1)
        self.window[:, -1] = column[:, 0]


@torch.inference_mode()
def generate_frames(
    model: DualARLM,
    prompt: torch.Tensor,
    *,
    semantic_begin_id: int,
    semantic_end_id: int,
    im_end_id: int = IM_END_ID,
    max_new_tokens: int = 0,
    sampling: Sampling = Sampling(),
    stop: Callable[[], bool] | None = None,
) -> Iterator[Frame]:
    """Frames for `prompt` (N + 1, T) ints (text ids in row 0, codes below), each yielded as soon as it
    is known to be kept (see the module docstring). `stop`: asked before each decode step; True ends
    the frames there (a cancelled request)."""
    n = model.config.num_codebooks
    if prompt.dim() != 2 or prompt.shape[0] != n + 1:
        raise ValueError(f"prompt must be ({n + 1}, T): text ids over {n} codebook rows, got {tuple(prompt.shape)}")
    length = prompt.shape[1]
    budget = frame_budget(length, max_new_tokens, model.config.max_seq_len)
    decoder = _Decoder(model, sampling, (semantic_begin_id, semantic_end_id), im_end_id, positions=length + budget)
    column, resampled = decoder.step(prompt.view(1, n + 1, -1), 0)
    for made in range(1, budget):
        yield Frame(column[1:, 0], int(column[0, 0]), resampled)
        if stop is not None and stop():
            return
        with sdpa_kernel(SDPBackend.MATH):
            column, resampled = decoder.step(column.view(1, n + 1, 1), length + made - 1)
        decoder.remember(column)
        if int(column[0, 0]) == im_end_id:
            return


def generate_codes(model: DualARLM, prompt: torch.Tensor, **options) -> tuple[torch.Tensor, list[int]]:
    """All frames of `generate_frames` (same options) as codes (N, frames) int32, upstream's
    `y[1:, prompt_length:-1]`, and the indices of the frames whose token RAS replaced."""
    frames = list(generate_frames(model, prompt, **options))
    n = model.config.num_codebooks
    codes = torch.stack([f.codes for f in frames], dim=1) if frames else torch.zeros((n, 0), dtype=torch.int)
    return codes, [i for i, f in enumerate(frames) if f.resampled]
