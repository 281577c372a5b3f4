"""OmniVoice's core: iterative unmasking of the 8 x T audio grid of a batch of items.

Per item, one conditional row (style and text ids, the reference's codes if any, then T masked
frames) and one unconditional row (only the T frames). Upstream pads them into one batch of 2B
rows of the longest length; in float32 koe packs them end to end without the padding, with
upstream's bits (`_Rows`). Every step runs all rows through the model and, per item that
unmasks any slot at this step, in item order:

1. scores: `log_softmax(c + g (c - u))` of the two rows' log-softmaxes (g = `guidance_scale`; g = 0
   takes the conditional row's log-softmax alone), the mask id excluded;
2. tokens: the arg-max, or with `class_temperature` > 0 the arg-max of the top 10 % of scores
   over the temperature plus Gumbel noise (a `(1, 8, T, V)` draw from torch's global generator);
3. positions: each slot's best score less `layer_penalty_factor` x its codebook index, over
   `position_temperature` plus Gumbel noise (a `(1, 8, T)` draw) when that is > 0; slots already
   unmasked are out;
4. the k best positions take their tokens, k from the schedule: float32 `linspace(0, 1, n + 1)`
   shifted as `s t / (1 + (s - 1) t)`, each step `min(ceil(8 T dt), left)`, the last step the rest.

Gumbel noise is `-log(-log(u + 1e-10) + 1e-10)` for u uniform. The draws' shapes, order and
memory layouts are upstream's, so `torch.manual_seed(N)` before a call gives upstream's tokens.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe.engines.omnivoice.model import OmniVoiceLM
from koe.nn.attention import Packed

__all__ = ["Item", "Settings", "schedule", "unmask", "unmask_steps"]


@dataclass(frozen=True)
class Settings:
    """The sampler's knobs (upstream's names and defaults)."""

    num_step: int = 32
    guidance_scale: float = 2.0
    t_shift: float = 0.1
    layer_penalty_factor: float = 5.0
    position_temperature: float = 5.0
    class_temperature: float = 0.0


@dataclass(frozen=True)
class Item:
    """One row's prompt: style and text ids, the reference's codes (8, Tr) or None, T target frames."""

    style_ids: list[int]
    text_ids: list[int]
    ref_codes: torch.Tensor | None
    frames: int


def schedule(frames: int, codebooks: int, num_step: int, t_shift: float) -> list[int]:
    """Slots unmasked at each step (they add up to frames x codebooks)."""
    t = torch.linspace(0, 1, num_step + 1)
    t = (t_shift * t / (1 + (t_shift - 1) * t)).tolist()
    total = left = frames * codebooks
    counts = []
    for step in range(num_step):
        n = left if step == num_step - 1 else min(math.ceil(total * (t[step + 1] - t[step])), left)
        counts.append(int(n))
        left -= int(n)
    return counts


def _gumbel(scores: torch.Tensor, temperature: float) -> torch.Tensor:
    scaled = scores / temperature
    u = torch.rand_like(scaled)
    return scaled + -torch.log(-torch.log(u + 1e-10) + 1e-10)


def _top_share(scores: torch.Tensor, share: float = 0.1) -> torch.Tensor:
    """`scores` with all but the best ceil(share * V) of the last dimension set to -inf."""
    values, index = scores.topk(math.ceil(share * scores.shape[-1]), dim=-1)
    return torch.full_like(scores, float("-inf")).scatter_(-1, index, values)


def _predict(cond: torch.Tensor, uncond: torch.Tensor | None, s: Settings, mask_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(tokens, confidences) of one item: (1, 8, T) each, from its rows' logits (1, 8, T, V)."""
    if s.guidance_scale != 0:
        c, u = F.log_softmax(cond, dim=-1), F.log_softmax(uncond, dim=-1)
        scores = torch.log_softmax(c + s.guidance_scale * (c - u), dim=-1)
    else:
        scores = F.log_softmax(cond, dim=-1)
    scores[..., mask_id] = float("-inf")
    if s.class_temperature > 0.0:
        tokens = _gumbel(_top_share(scores), s.class_temperature).argmax(dim=-1)
    else:
        tokens = scores.argmax(dim=-1)
    return tokens, scores.max(dim=-1)[0]


class _Rows:
    """The 2B rows of a batch: each item's conditional row, then each one's unconditional row.

    `packed` (float32): end to end in one row without upstream's padding (ids (1, 8, N), positions
    from 0 in each sequence, `Packed` spans with keys padded to the longest row), the heads scoring
    only the target frames: upstream's bits, since under MKL's strict reproducibility a float32
    product's row does not depend on the other rows. Else upstream's own padded batch (ids (2B, 8,
    L), its boolean attention mask, the heads over every position): bfloat16 products (oneDNN's)
    do depend on the rows around them, and so would the bits of upstream's bf16 run.

    Packed, without guidance (`guidance_scale` 0: upstream still runs the unconditional rows and
    throws their logits away) the unconditional rows are left out: the conditional ones keep their bits.

    Positions are flat (row x width + column) in both: `cond`, `uncond` (where each item's target
    frames start in its two rows) and `scored` (the positions whose logits the sampler reads: every
    item's conditional target frames, then every item's unconditional ones)."""

    def __init__(self, items: list[Item], codebooks: int, mask_id: int, device: torch.device, packed: bool, guided: bool = True) -> None:
        cond, uncond = [], []
        for item in items:
            text = torch.tensor(item.style_ids + item.text_ids, dtype=torch.long, device=device)[None].expand(codebooks, -1)  # (8, N)
            parts = [text]
            if item.ref_codes is not None:
                parts.append(item.ref_codes.to(device=device, dtype=torch.long))
            parts.append(torch.full((codebooks, item.frames), mask_id, dtype=torch.long, device=device))
            cond.append(torch.cat(parts, dim=1))
            uncond.append(parts[-1])
        rows = cond + uncond if guided or not packed else cond
        lengths = [r.shape[1] for r in rows]
        b, longest = len(items), max(lengths[: len(items)])
        self.frames = [it.frames for it in items]
        if packed:
            starts = [sum(lengths[:j]) for j in range(len(rows))]
            self.mask: torch.Tensor | Packed = Packed(tuple(zip(starts, lengths, strict=True)), longest)
            self.ids = torch.cat(rows, dim=1)[None]  # (1, 8, N)
            self.positions = torch.cat([torch.arange(n, device=device) for n in lengths])[None]
        else:
            starts = [j * longest for j in range(len(rows))]
            self.ids = torch.full((len(rows), codebooks, longest), mask_id, dtype=torch.long, device=device)
            mask = torch.zeros((len(rows), 1, longest, longest), dtype=torch.bool, device=device)
            for j, (row, n) in enumerate(zip(rows, lengths, strict=True)):
                self.ids[j, :, :n] = row
                mask[j, :, :n, :n] = True
                if j >= b and longest > n:  # an unconditional row's padding attends to itself only
                    pad = torch.arange(n, longest, device=device)
                    mask[j, :, pad, pad] = True
            self.mask = mask
            self.positions = torch.arange(longest, device=device)[None].expand(len(rows), -1)
        self.width = self.ids.shape[-1]
        flat_mask = torch.zeros(self.ids.shape[0] * self.width, dtype=torch.bool, device=device)
        self.cond, self.uncond = [], []
        for i, item in enumerate(items):
            audio = item.frames + (0 if item.ref_codes is None else item.ref_codes.shape[-1])
            end = starts[i] + lengths[i]
            flat_mask[end - audio : end] = True
            self.cond.append(end - item.frames)
            if len(rows) > b:
                flat_mask[starts[b + i] : starts[b + i] + item.frames] = True
                self.uncond.append(starts[b + i])
        self.audio_mask = flat_mask.view(self.ids.shape[0], self.width)
        spans = [(start, it.frames) for start, it in zip(self.cond + self.uncond, items + items[: len(self.uncond)], strict=True)]
        self.scored = torch.cat([torch.arange(start, start + t, device=device) for start, t in spans])
        self.offsets = [sum(t for _, t in spans[:j]) for j in range(len(spans))]  # each span's first row in the logits

    def logits(self, logits: torch.Tensor, i: int) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Item i's conditional and unconditional logits (1, 8, T, V) out of the scored (R, 8, V)
        (None for the unconditional ones where those rows were left out)."""
        t, c = self.frames[i], self.offsets[i]
        cond = logits[c : c + t].permute(1, 0, 2)[None]
        if not self.uncond:
            return cond, None
        u = self.offsets[len(self.frames) + i]
        return cond, logits[u : u + t].permute(1, 0, 2)[None]

    def write(self, i: int, frames: torch.Tensor) -> None:
        """Item i's target frames (8, T) in both its rows."""
        t = frames.shape[-1]
        for start in (self.cond[i], *self.uncond[i : i + 1]):
            row, column = divmod(start, self.width)
            self.ids[row, :, column : column + t] = frames


def unmask_steps(model: OmniVoiceLM, items: list[Item], s: Settings) -> Iterator[torch.Tensor]:
    """The token grid (B, 8, max T) after each step (one tensor, updated in place); masked slots hold the mask id."""
    cfg = model.config
    codebooks, mask_id = cfg.num_audio_codebook, cfg.audio_mask_id
    device = model.audio_heads.weight.device
    rows = _Rows(items, codebooks, mask_id, device, packed=model.audio_heads.weight.dtype == torch.float32, guided=s.guidance_scale != 0)
    b = len(items)
    tokens = torch.full((b, codebooks, max(it.frames for it in items)), mask_id, dtype=torch.long, device=device)
    plans = [schedule(it.frames, codebooks, s.num_step, s.t_shift) for it in items]
    layers = torch.arange(codebooks, device=device).view(1, -1, 1)
    for step in range(s.num_step):
        logits = model(rows.ids, rows.audio_mask, rows.positions, rows.mask, rows.scored)  # (R, 8, V) float32
        for i, item in enumerate(items):
            k = plans[i][step]
            if k <= 0:
                continue
            predicted, scores = _predict(*rows.logits(logits, i), s, mask_id)
            scores = scores - layers * s.layer_penalty_factor
            if s.position_temperature > 0.0:
                scores = _gumbel(scores, s.position_temperature)
            current = tokens[i : i + 1, :, : item.frames]  # (1, 8, T)
            scores.masked_fill_(current != mask_id, float("-inf"))
            chosen = torch.topk(scores.flatten(), k).indices
            flat = current.flatten().clone()
            flat[chosen] = predicted.flatten()[chosen]
            current.copy_(flat.view_as(current))
            rows.write(i, current[0])
        yield tokens


def unmask(model: OmniVoiceLM, items: list[Item], s: Settings, on_step: Callable[[int], None] | None = None) -> list[torch.Tensor]:
    """Each item's codes (8, T) once every step has run; `on_step(step)` is called after each
    (a cancel check may raise there)."""
    if s.num_step < 1:
        raise ValueError(f"num_step must be at least 1, got {s.num_step}")
    for step, tokens in enumerate(unmask_steps(model, items, s)):  # noqa: B007 - the last step's grid is returned
        if on_step is not None:
            on_step(step)
    return [tokens[i, :, : it.frames].clone() for i, it in enumerate(items)]
