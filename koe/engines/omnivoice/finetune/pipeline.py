"""Upstream's training batches, draw for draw: what `build_dataloaders` (the padded SDPA path) gives
`OmniTrainer` each epoch, from the same shards and seed.

Upstream's data loader is a torch `DataLoader(num_workers=N)` over an iterable dataset (it cannot
run in the main process: upstream passes `prefetch_factor=4`, which torch refuses without
workers). Per epoch:

- the trainer calls `set_epoch(epoch)`: the shard list is shuffled with `random.Random(epoch)`;
- `iter(loader)` draws the workers' base seed from torch's (main) generator, one int64; worker w
  is seeded by torch with `base + w`, then transformers' `seed_worker` seeds Python's `random`,
  numpy and torch with `(base + w) % 2**32` (rank 0);
- worker w reads shards `w, w + N, ...` of the shuffled list (webdataset's `split_by_worker`; a
  worker with none fails: upstream needs at least N shards), their samples in tar order; building
  its `WebDataset` draws `random.randint(0, 1000000)` from the worker's Python generator (the
  default of its unused `seed`); the samples go through webdataset's shuffle buffer (20000
  samples, 100 before the first pick, `random.Random(epoch)`);
- each sample through the sample processor (`process`), which draws from the worker's Python
  `random` and torch (`torch.rand`), then length-grouped into buckets (`StreamLengthGroupDataset`:
  20 buckets between the min and max sample tokens; a bucket is yielded when its longest times
  (its size + 1) reaches `batch_tokens` or it holds `max_batch_size` samples; the rest at the end,
  by bucket);
- the loader hands out the workers' batches in turn (worker 0's first, worker 1's first, ...,
  skipping a worker that has run out), each padded by the collator (`collate`).
"""

from __future__ import annotations

import bisect
import random
from collections.abc import Iterator
from dataclasses import dataclass

import numpy as np
import torch

from koe.engines.omnivoice.finetune.shards import Sample

__all__ = ["Batch", "Processed", "ProcessorSettings", "base_seed", "collate", "epoch_batches", "process", "worker_batches"]

SHUFFLE_BUFFER, SHUFFLE_INITIAL = 20000, 100  # upstream's WebDatasetReader, webdataset's default
BUCKETS = 20


@dataclass(frozen=True)
class ProcessorSettings:
    """`OmniVoiceSampleProcessor`'s ratios (upstream's `TrainingConfig` defaults)."""

    drop_cond_ratio: float = 0.1
    prompt_ratio_range: tuple[float, float] = (0.0, 0.3)
    mask_ratio_range: tuple[float, float] = (0.0, 1.0)
    language_ratio: float = 0.8
    use_pinyin_ratio: float = 0.3
    instruct_ratio: float = 1.0
    only_instruct_ratio: float = 0.5
    audio_mask_id: int = 1024


@dataclass(frozen=True)
class Processed:
    input_ids: torch.Tensor  # (8, L) long
    labels: torch.Tensor  # (8, L) long, -100 where no loss
    audio_mask: torch.Tensor  # (L,) bool
    length: int
    key: str


@dataclass(frozen=True)
class Batch:
    input_ids: torch.Tensor  # (B, 8, T)
    labels: torch.Tensor  # (B, 8, T)
    audio_mask: torch.Tensor  # (B, T)
    position_ids: torch.Tensor  # (B, T)
    attention_mask: torch.Tensor  # (B, 1, T, T) bool
    keys: tuple[str, ...]


def base_seed(generator: torch.Generator) -> int:
    """The workers' base seed a data loader's `iter()` draws."""
    return int(torch.empty((), dtype=torch.int64).random_(generator=generator).item())


def process(sample: Sample, tokenize, s: ProcessorSettings, py: random.Random, gen: torch.Generator) -> Processed:
    """One sample as upstream's `OmniVoiceSampleProcessor` makes it, drawing from `py` and `gen`
    in its order. `tokenize(text)`: the text tokenizer's ids (no special tokens added)."""
    label = sample.label
    denoise = "clean_start_token_idx" in label
    drop_cond = False if denoise else py.uniform(0, 1) < s.drop_cond_ratio
    if drop_cond:
        prompt_ratio, drop_text, use_language, use_instruct = 0.0, True, False, False
    else:
        prompt_ratio = py.uniform(*s.prompt_ratio_range)
        drop_text = False
        use_language = py.uniform(0, 1) < s.language_ratio
        use_instruct = py.uniform(0, 1) < s.instruct_ratio
        if use_instruct and py.uniform(0, 1) < s.only_instruct_ratio:
            prompt_ratio = 0.0
    mask_ratio = py.uniform(*s.mask_ratio_range)
    language = label.get("language_id", "None") if use_language else "None"
    instruct = label.get("instruct", "None") if use_instruct else "None"
    style = ("<|denoise|>" if denoise else "") + f"<|lang_start|>{language}<|lang_end|><|instruct_start|>{instruct}<|instruct_end|>"
    channels = sample.tokens.shape[0]
    style_ids = torch.tensor([tokenize(style)], dtype=torch.long).repeat(channels, 1)
    text = label["text_pinyin"] if "text_pinyin" in label and py.uniform(0, 1) < s.use_pinyin_ratio else label["text"]
    text_ids = torch.tensor([tokenize(f"<|text_start|>{text}<|text_end|>")], dtype=torch.long).repeat(channels, 1)

    tokens = torch.from_numpy(np.asarray(sample.tokens)).long()
    prompt = label["clean_start_token_idx"] if denoise else int(tokens.shape[1] * prompt_ratio)
    inputs, targets = tokens.clone(), tokens.clone()
    masked = torch.rand(tokens[:, prompt:].shape, generator=gen) < mask_ratio
    inputs[:, prompt:][masked] = s.audio_mask_id
    targets[:, prompt:][~masked] = -100
    if not drop_cond:
        targets[:, :prompt] = -100
    if drop_text:
        ids, labels = inputs, targets
        audio_mask = torch.ones(ids.shape[1], dtype=torch.bool)
    else:
        ids = torch.cat([style_ids, text_ids, inputs], dim=1)
        labels = torch.cat([torch.full(style_ids.shape, -100), torch.full(text_ids.shape, -100), targets], dim=1)
        audio_mask = torch.zeros(ids.shape[1], dtype=torch.bool)
        audio_mask[style_ids.shape[1] + text_ids.shape[1] :] = True
    return Processed(ids, labels, audio_mask, int(ids.shape[1]), sample.key)


def _shuffled(samples: list[Sample], seed: int) -> Iterator[Sample]:
    """webdataset's buffered shuffle (`shuffle(20000, seed=epoch)`) over `samples`."""
    rng = random.Random(seed)
    source = iter(samples)
    buffer: list[Sample] = []

    def pick() -> Sample:
        k = rng.randint(0, len(buffer) - 1)
        chosen = buffer[k]
        buffer[k] = buffer[-1]
        buffer.pop()
        return chosen

    for sample in source:
        buffer.append(sample)
        if len(buffer) < SHUFFLE_BUFFER:
            following = next(source, None)
            if following is not None:
                buffer.append(following)
        if len(buffer) >= min(SHUFFLE_INITIAL, SHUFFLE_BUFFER):
            yield pick()
    while buffer:
        yield pick()


@dataclass(frozen=True)
class Grouping:
    batch_tokens: int = 8192
    min_sample_tokens: int = 50
    max_sample_tokens: int = 2000
    max_batch_size: int = 64


def worker_batches(
    samples: list[Sample], epoch: int, seed: int, tokenize, s: ProcessorSettings, g: Grouping, skipped: list[str] | None = None
) -> list[list[Processed]]:
    """A worker's batches for one epoch: `samples` (its shards' samples in order), `seed` the
    worker's (its generators seeded with it, as `seed_worker` does)."""
    py, gen = random.Random(seed), torch.Generator().manual_seed(seed)
    py.randint(0, 1000000)  # webdataset's WebDataset(seed=None) draws its own seed
    boundaries = np.linspace(g.min_sample_tokens, g.max_sample_tokens, BUCKETS + 1)[1:]
    buckets: list[list[Processed]] = [[] for _ in range(BUCKETS)]
    longest = [0.0] * BUCKETS
    out = []
    for sample in _shuffled(samples, epoch):
        item = process(sample, tokenize, s, py, gen)
        if item.length < g.min_sample_tokens or item.length > g.max_sample_tokens:
            if skipped is not None:
                skipped.append(item.key)
            continue
        b = bisect.bisect_left(boundaries, item.length)
        buckets[b].append(item)
        longest[b] = max(longest[b], item.length)
        if longest[b] * (len(buckets[b]) + 1) >= g.batch_tokens or len(buckets[b]) >= g.max_batch_size:
            out.append(buckets[b])
            buckets[b], longest[b] = [], 0.0
    out += [bucket for bucket in buckets if bucket]
    return out


def shard_order(shards: list, epoch: int) -> list:
    """The shards as `set_epoch(epoch)` orders them."""
    order = list(shards)
    random.Random(epoch).shuffle(order)
    return order


def epoch_batches(
    shards: list[list[Sample]], epoch: int, base: int, workers: int, tokenize, s: ProcessorSettings, g: Grouping, skipped: list[str] | None = None
) -> list[list[Processed]]:
    """Every batch of epoch `epoch` in the order the trainer gets them; `shards`: each shard's
    samples in the manifest's order, `base`: the loader's base seed (`base_seed`)."""
    order = shard_order(shards, epoch)
    per_worker = []
    for w in range(workers):
        mine = order[w::workers] if workers > 1 else order
        samples = [sample for shard in mine for sample in shard]
        per_worker.append(worker_batches(samples, epoch, (base + w) % 2**32, tokenize, s, g, skipped))
    merged, rounds = [], max((len(b) for b in per_worker), default=0)
    for r in range(rounds):
        merged += [batches[r] for batches in per_worker if r < len(batches)]
    return merged


def collate(items: list[Processed], pad_id: int) -> Batch:
    """upstream's `PaddingDataCollator`: right-padded rows and a (B, 1, T, T) mask of the real keys."""
    longest = max(item.length for item in items)
    count = len(items)
    valid = torch.zeros(count, longest, dtype=torch.bool)
    for i, item in enumerate(items):
        valid[i, : item.length] = True
    pad = [longest - item.length for item in items]
    ids = torch.stack([torch.nn.functional.pad(item.input_ids, (0, p), value=pad_id) for item, p in zip(items, pad)])
    labels = torch.stack([torch.nn.functional.pad(item.labels, (0, p), value=-100) for item, p in zip(items, pad)])
    audio = torch.stack([torch.nn.functional.pad(item.audio_mask, (0, p), value=False) for item, p in zip(items, pad)])
    positions = torch.stack([torch.nn.functional.pad(torch.arange(item.length, dtype=torch.long), (0, p), value=0) for item, p in zip(items, pad)])
    mask = valid[:, None, None, :].expand(count, 1, longest, longest).contiguous()
    return Batch(ids, labels, audio, positions, mask, tuple(item.key for item in items))
