"""IndexTTS's mel-code search: beam search that samples its candidates, as upstream runs it.

Upstream calls HuggingFace's `generate` with `num_beams=3` and `do_sample=True`: every step takes
log-softmax scores, applies the repetition penalty (over the prompt's placeholder ids and the codes
so far), then temperature, top-k and top-p, adds each beam's running score, and draws
`2 * num_beams` distinct candidates over all beams with one `torch.multinomial`; a candidate that
is the stop code (and ranks among the first `num_beams`) closes a hypothesis; the others continue
the beams. This module does the same float operations and the same draw, in the same order, on
koe's cached GPT.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe_indextts.voice_lm import SpeechLM


@dataclass(frozen=True)
class Sampling:
    """Upstream's generation settings (`infer(..., **generation_kwargs)`), with its defaults for 1.5."""

    do_sample: bool = True
    top_k: int = 30
    top_p: float = 0.8
    temperature: float = 1.0
    num_beams: int = 3
    repetition_penalty: float = 10.0
    length_penalty: float = 0.0
    max_mel_tokens: int = 600

    def check(self) -> None:
        if self.num_beams < 1:
            raise ValueError(f"num_beams must be at least 1, not {self.num_beams}")
        if self.max_mel_tokens < 1:
            raise ValueError(f"max_mel_tokens must be at least 1, not {self.max_mel_tokens}")
        if self.do_sample:
            if not self.temperature > 0:
                raise ValueError(f"temperature must be above 0, not {self.temperature}")
            if not 0 < self.top_p <= 1:
                raise ValueError(f"top_p must be in (0, 1], not {self.top_p}")
            if self.top_k < 0:
                raise ValueError(f"top_k must be 0 (off) or more, not {self.top_k}")
        if not self.repetition_penalty > 0:
            raise ValueError(f"repetition_penalty must be above 0, not {self.repetition_penalty}")


class Hypotheses:
    """The finished sequences of a search, best `keep` by score (upstream's bookkeeping, ties included)."""

    def __init__(self, keep: int, length_penalty: float):
        self.keep = keep
        self.length_penalty = length_penalty
        self.items: list[tuple[float, list[int]]] = []
        self.worst = 1e9

    def add(self, codes: list[int], logprob: float, generated: int) -> None:
        score = logprob / (generated**self.length_penalty)
        if len(self.items) < self.keep or score > self.worst:
            self.items.append((score, codes))
            if len(self.items) > self.keep:
                ranked = sorted((s, i) for i, (s, _) in enumerate(self.items))
                del self.items[ranked[0][1]]
                self.worst = ranked[1][0]
            else:
                self.worst = min(score, self.worst)

    def done(self, best_logprob: float, generated: int) -> bool:
        if len(self.items) < self.keep:
            return False
        return self.worst >= best_logprob / generated**self.length_penalty

    def best(self) -> list[int]:
        return sorted(self.items, key=lambda item: item[0])[-1][1]


def _warp(scores: torch.Tensor, history: torch.Tensor, s: Sampling, keep: int) -> torch.Tensor:
    """The logits processors upstream's `generate` builds from these settings, in its order."""
    if s.repetition_penalty != 1.0:
        seen = torch.gather(scores, 1, history)
        seen = torch.where(seen < 0, seen * s.repetition_penalty, seen / s.repetition_penalty)
        scores = scores.scatter(1, history, seen)
    if not s.do_sample:
        return scores
    if s.temperature != 1.0:
        scores = scores / s.temperature
    if s.top_k:
        k = min(max(s.top_k, keep), scores.size(-1))
        scores = scores.masked_fill(scores < torch.topk(scores, k)[0][..., -1, None], -float("inf"))
    if s.top_p < 1.0:
        ordered, order = torch.sort(scores, descending=False)
        drop = ordered.softmax(dim=-1).cumsum(dim=-1) <= (1 - s.top_p)
        drop[..., -keep:] = 0
        scores = scores.masked_fill(drop.scatter(1, order, drop), -float("inf"))
    return scores


@torch.inference_mode()
def search(
    lm: SpeechLM, conds: torch.Tensor, text: torch.Tensor, s: Sampling, cancel=None, *, cached_positions: bool = False, language: int | None = None
) -> torch.Tensor:
    """Mel codes for `text` in the voice `conds` (1, c, d): (n,) long, ending with the stop code
    when the search closed a hypothesis before `max_mel_tokens` (as upstream returns them).
    `cancel`: a token whose `raise_if_cancelled` is called before every step. `cached_positions`:
    number the codes as upstream's KV-cached generation does (release 2 runs it on every device): it
    takes a new code's mel position from the attention mask's length, one past the uncached count,
    so the n-th code sits at position n + 1 (the latent pass still counts from start_mel's 0).
    `language`: release 2.5's language id, added to the text rows. Start/stop text ids in `text` are
    dropped and the prompt padded on the left, masked out, as upstream's generation does."""
    s.check()
    cfg = lm.cfg
    stop, beams = cfg.stop_mel_token, s.num_beams
    prompt = lm.prompt(conds, text, language)
    prompt_len = prompt.shape[1]  # upstream's prompt ids: placeholders, then start_mel
    max_len = prompt_len + s.max_mel_tokens
    cache = lm.gpt.new_cache(beams, max_len, lm.prompt_padding(text))
    hidden = lm.gpt(prompt, cache)  # one row: every beam's prompt is the same
    logits = lm.logits(hidden[:, -1]).expand(beams, -1)
    if beams == 1:
        return _sample(lm, logits, cache, s, cancel, int(cached_positions))
    history = torch.tensor([[1, cfg.start_mel_token]] * beams)  # the prompt's ids: all 1, then start_mel
    codes: list[list[int]] = [[] for _ in range(beams)]
    beam_scores = torch.zeros(beams)
    beam_scores[1:] = -1e9
    finished = Hypotheses(beams, s.length_penalty)
    keep = 2  # candidates kept by top-k/top-p: the stop code + 1, as upstream's beam sampling keeps
    done = False
    length = prompt_len
    while True:
        if cancel is not None:
            cancel.raise_if_cancelled()
        scores = _warp(F.log_softmax(logits.float(), dim=-1), history, s, keep)
        vocab = scores.shape[-1]
        flat = (scores + beam_scores[:, None].expand_as(scores)).view(1, beams * vocab)
        if s.do_sample:
            picks = torch.multinomial(F.softmax(flat, dim=-1), num_samples=2 * beams)
            ranked, order = torch.sort(torch.gather(flat, -1, picks), descending=True, dim=1)
            picks = torch.gather(picks, -1, order)
        else:
            ranked, picks = torch.topk(flat, 2 * beams, dim=1, largest=True, sorted=True)
        rows = torch.div(picks, vocab, rounding_mode="floor")[0]
        tokens = (picks % vocab)[0]
        ranked = ranked[0]
        length += 1
        next_scores, next_tokens, next_rows = [], [], []
        for rank in range(2 * beams):
            token, row = int(tokens[rank]), int(rows[rank])
            if token == stop:
                if rank < beams:
                    finished.add(list(codes[row]), ranked[rank].item(), length - prompt_len)
            else:
                next_scores.append(ranked[rank])
                next_tokens.append(token)
                next_rows.append(row)
            if len(next_tokens) == beams:
                break
        if len(next_tokens) < beams:
            raise RuntimeError("the search found fewer continuations than beams")
        done = finished.done(ranked.max().item(), length - prompt_len)
        beam_scores = torch.stack(next_scores)
        order_t = torch.tensor(next_rows)
        codes = [codes[r] + [t] for r, t in zip(next_rows, next_tokens)]
        new = torch.tensor(next_tokens)
        history = torch.cat([history[order_t], new[:, None]], dim=1)
        if done or length >= max_len:
            break
        cache.reorder(order_t)
        mel_position = length - prompt_len + int(cached_positions)  # start_mel sits at mel position 0
        logits = lm.step(lm.mel_embeddings(new[:, None], mel_position), cache)
    if not done:
        for r in range(beams):
            finished.add(codes[r], beam_scores[r].item(), length - prompt_len)
    best = finished.best()
    if len(best) + prompt_len < max_len:
        best = best + [stop]
    return torch.tensor(best, dtype=torch.long)


def _sample(lm: SpeechLM, logits: torch.Tensor, cache, s: Sampling, cancel, shift: int) -> torch.Tensor:
    """One beam: upstream's `generate` samples plainly then, from the processed logits (no log-softmax)."""
    stop = lm.cfg.stop_mel_token
    history = torch.tensor([[1, lm.cfg.start_mel_token]])
    codes: list[int] = []
    while True:
        if cancel is not None:
            cancel.raise_if_cancelled()
        scores = _warp(logits.float(), history, s, keep=1)
        token = torch.multinomial(F.softmax(scores, dim=-1), num_samples=1)[:, 0] if s.do_sample else torch.argmax(scores, dim=-1)
        codes.append(int(token))
        if codes[-1] == stop or len(codes) >= s.max_mel_tokens:
            return torch.tensor(codes, dtype=torch.long)
        history = torch.cat([history, token[:, None]], dim=1)
        logits = lm.step(lm.mel_embeddings(token[:, None], len(codes) + shift), cache)
