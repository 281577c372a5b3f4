"""The decode core on CUDA: static caches, two captured graphs per frame, sync-free sampling.

`GraphedDecoder.decode_frames` has the signature and the yield contract of `generate.decode_frames`
(frames of code groups, `alive` flags, `outcome.eos`, `row_limits`, `cancel`), so `generate`,
`stream` and batching iterate it unchanged. Per frame it replays

1. the code-predictor graph: code 0's embedding + the talker's hidden state -> the whole
   15-step loop, unrolled, with its sampling (`koe.runtime.device_sampling`) -> codes 1..15;
2. the talker graph: the frame's summed embeddings + the next trailing text -> one talker step
   over a `StaticCache` -> code 0 of the next frame, drawn with the talker's settings, then the
   end-of-speech and row-limit bookkeeping, all on the device;

and waits on the host once, to read whether any row is still speaking. Prefill (variable length)
runs eagerly with the same ops as `decode_frames` and its keys/values are copied into the static
cache. Sampling settings and seeds live in device tensors, so a request with other settings
reuses the captured graphs. Graphs are kept per batch-size bucket (predictor) and per (bucket,
cache capacity) (talker), all in one memory pool.

Draws use the exponential race with counter-based noise from the request's seed, so a seeded run
is reproducible but does not reproduce the CPU path's `torch.multinomial` draws; greedy decoding
gives `decode_frames`' codes. With `capture=False` ("eager mode") the very same step functions
run without graphs: the reference a captured run must equal bit for bit on the same GPU.

Fallbacks, each logged and recorded in `outcome.decode_path` and `GraphedDecoder.last_report`:
capture failure -> eager mode (same results); batch above the largest bucket, a prompt + budget
longer than the largest capacity, a concurrent decode on the same buffers, or an error before the
first frame -> `decode_frames`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import torch

from koe.engines.base import CancelToken
from koe.engines.qwen3_tts.generate import DecodeOutcome, DecodeSettings, Frame, decode_frames, frame_embedding, prefill
from koe.engines.qwen3_tts.prompt import TalkerInputs
from koe.engines.qwen3_tts.talker import Talker
from koe.runtime.cuda_graph import DEFAULT_BATCH_BUCKETS, GraphBuckets
from koe.runtime.device_sampling import SamplingTensors, choose, draw_keys, exponential_noise, process_scores, vocab_keys
from koe.runtime.static_cache import StaticCache

log = logging.getLogger(__name__)

DEFAULT_CAPACITIES = (256, 512, 1024, 2048, 4096)


class FrameState:
    """Static buffers of one batch bucket B, shared by the predictor graph and the talker graphs."""

    def __init__(self, talker: Talker, batch: int, device: torch.device, dtype: torch.dtype) -> None:
        cfg, pcfg = talker.cfg, talker.code_predictor.cfg
        groups, vocab = cfg.num_code_groups, cfg.vocab_size
        self.batch = batch
        self.hidden = torch.zeros((batch, 1, cfg.decoder.hidden_size), dtype=dtype, device=device)  # talker's last hidden state
        self.logits = torch.zeros((batch, vocab), dtype=torch.float32, device=device)  # talker logits to draw code 0 from
        self.codes = torch.zeros((batch, groups), dtype=torch.long, device=device)  # the current frame
        self.seen = torch.zeros((batch, vocab), dtype=torch.bool, device=device)  # talker ids drawn so far
        self.drawn = torch.zeros(1, dtype=torch.long, device=device)  # talker draws so far (= noise counter)
        self.unfinished = torch.zeros(batch, dtype=torch.bool, device=device)
        self.eos = torch.zeros(batch, dtype=torch.bool, device=device)
        self.limits = torch.zeros(batch, dtype=torch.long, device=device)
        self.any_unfinished = torch.zeros(1, dtype=torch.bool, device=device)
        self.seed = torch.zeros(batch, dtype=torch.long, device=device)
        self.talker_params = SamplingTensors.allocate(batch, device)
        self.predictor_params = SamplingTensors.allocate(batch, device)
        spec = pcfg.decoder
        self.predictor_cache = StaticCache(spec.num_layers, batch, spec.num_kv_heads, groups, spec.head_dim, dtype, device)
        self.eos_id = torch.zeros((), dtype=torch.long, device=device)
        self.eos_mask = torch.zeros(vocab, dtype=torch.bool, device=device)
        self.suppress_mask = torch.zeros(vocab, dtype=torch.bool, device=device)
        self.talker_keys = vocab_keys(vocab, device)
        self.predictor_keys = vocab_keys(pcfg.vocab_size, device)
        self.talker_stream = torch.zeros(1, dtype=torch.long, device=device)
        self.predictor_streams = torch.arange(1, groups, dtype=torch.long, device=device)
        self.lock = threading.Lock()


class TalkerState:
    """Static buffers of one (bucket, capacity): the talker's cache and per-request positions."""

    def __init__(self, talker: Talker, batch: int, capacity: int, device: torch.device, dtype: torch.dtype) -> None:
        spec = talker.cfg.decoder
        self.capacity = capacity
        self.cache = StaticCache(spec.num_layers, batch, spec.num_kv_heads, capacity, spec.head_dim, dtype, device)
        self.valid = torch.ones((batch, capacity), dtype=torch.bool, device=device)  # False at left padding
        self.deltas = torch.zeros((batch, 1), dtype=torch.float32, device=device)  # rotary offset per row
        self.position = torch.zeros(1, dtype=torch.long, device=device)  # cache position of the next step
        self.trail_index = torch.zeros(1, dtype=torch.long, device=device)  # next trailing-text row
        self.trailing = torch.zeros((batch, capacity, spec.hidden_size), dtype=dtype, device=device)


def draw_code0(talker: Talker, st: FrameState) -> None:
    """Draw code 0 from `st.logits` with the talker's settings and do the end-of-speech bookkeeping
    of `decode_frames` (finished rows draw end-of-speech; row limits), all on the device."""
    greedy, scores = process_scores(st.logits, st.talker_params, seen=st.seen, drawn=st.drawn, eos_mask=st.eos_mask, suppress_mask=st.suppress_mask)
    keys = draw_keys(st.seed, st.drawn, st.talker_stream)  # (B, 1)
    token = choose(greedy, scores, exponential_noise(keys[:, 0], st.talker_keys), st.talker_params)
    token = torch.where(st.unfinished, token, st.eos_id)
    st.codes[:, 0].copy_(token)
    st.seen.scatter_(1, token[:, None], True)
    st.drawn.add_(1)
    drew_eos = token == st.eos_id
    st.eos.logical_or_(drew_eos & st.unfinished)
    st.unfinished.logical_and_(~drew_eos)
    st.unfinished.logical_and_(st.limits >= st.drawn)
    st.any_unfinished.copy_(st.unfinished.any())


def predictor_step_fn(talker: Talker, st: FrameState) -> Callable[[], torch.Tensor]:
    """The code predictor's whole frame (codes 1..G-1 into `st.codes`), as one function to capture."""
    predictor = talker.code_predictor
    steps = predictor.cfg.num_code_groups - 1
    batch = st.batch

    def run() -> torch.Tensor:
        code0_embed = talker.embed_codec(st.codes[:, :1])  # (B, 1, C)
        embeds = torch.cat((st.hidden, code0_embed), dim=1)  # (B, 2, C)
        positions = torch.arange(2, device=embeds.device).expand(batch, -1)
        logits = predictor.forward_step(embeds, positions, st.predictor_cache.at(0), head=0)
        noise = exponential_noise(draw_keys(st.seed, st.drawn, st.predictor_streams), st.predictor_keys)  # (B, G-1, V)
        seen = torch.zeros((batch, logits.shape[-1]), dtype=torch.bool, device=embeds.device)
        for i in range(steps):
            greedy, scores = process_scores(logits[:, -1, :].to(dtype=torch.float32), st.predictor_params, seen=seen)
            token = choose(greedy, scores, noise[:, i], st.predictor_params)
            st.codes[:, i + 1].copy_(token)
            if i + 1 == steps:
                break
            seen = seen.scatter(1, token[:, None], True)
            embeds = predictor.model.codec_embedding[i](token[:, None])
            positions = torch.full((batch, 1), 2 + i, device=embeds.device, dtype=torch.long)
            logits = predictor.forward_step(embeds, positions, st.predictor_cache.at(2 + i), head=i + 1)
        return st.codes

    return run


def talker_step_fn(talker: Talker, st: FrameState, ts: TalkerState) -> Callable[[], torch.Tensor]:
    """Feed the current frame back through the talker and draw the next code 0, as one function to capture."""

    def run() -> torch.Tensor:
        codes = st.codes
        x = frame_embedding(talker, talker.embed_codec(codes[:, :1]), codes[:, 1:]) + ts.trailing.index_select(1, ts.trail_index)  # (B, 1, C)
        rope = (ts.position.view(1, 1) + ts.deltas).unsqueeze(0).expand(3, -1, -1)  # (3, B, 1)
        mask = StaticCache.mask(ts.valid, ts.position)  # (B, 1, 1, capacity)
        hidden = talker.forward_hidden(x, rope, ts.cache.at(ts.position), mask)
        st.hidden.copy_(hidden)
        st.logits.copy_(talker.codec_head(hidden)[:, -1, :])
        ts.position.add_(1)
        ts.trail_index.add_(1)
        draw_code0(talker, st)
        return st.codes

    return run


@dataclass
class _Plan:
    batch: int
    bucket: int
    capacity: int


class GraphedDecoder:
    """Holds the static buffers and captured graphs of one talker; `decode_frames` runs a request.

    `capture=False` runs the same step functions eagerly (the debugging switch and the reference
    a captured run must equal). `last_report` says which path the latest request took and why.
    """

    def __init__(
        self,
        talker: Talker,
        *,
        capture: bool = True,
        batch_buckets: Sequence[int] = DEFAULT_BATCH_BUCKETS,
        capacities: Sequence[int] = DEFAULT_CAPACITIES,
        warmup: int = 2,
    ) -> None:
        self.talker = talker
        self.capture = capture
        self.graphs = GraphBuckets(batch_buckets)
        self.capacities = tuple(sorted(set(capacities)))
        self.warmup = warmup
        self.frames: dict[int, FrameState] = {}
        self.talkers: dict[tuple[int, int], TalkerState] = {}
        self.capture_error: str | None = None
        self.last_report: dict = {}

    # -- planning --------------------------------------------------------------------------------
    def plan(self, batch: int, length: int, settings: DecodeSettings, row_limits: torch.Tensor | None) -> _Plan | str:
        """Bucket and cache capacity for a request, or the reason it cannot take this path."""
        bucket = self.graphs.bucket(batch)
        if bucket is None:
            return f"batch of {batch} is larger than the largest graph bucket ({self.graphs.buckets[-1]})"
        draws = settings.max_new_tokens
        if row_limits is not None:
            draws = min(draws, int(row_limits.max()) + 1)
        needed = length + draws
        capacity = next((c for c in self.capacities if c >= needed), None)
        if capacity is None:
            return f"prompt + frames need {needed} cache positions; the largest static cache holds {self.capacities[-1]}"
        return _Plan(batch, bucket, capacity)

    def _states(self, plan: _Plan, device: torch.device, dtype: torch.dtype) -> tuple[FrameState, TalkerState]:
        st = self.frames.get(plan.bucket)
        if st is None:
            st = self.frames[plan.bucket] = FrameState(self.talker, plan.bucket, device, dtype)
        ts = self.talkers.get((plan.bucket, plan.capacity))
        if ts is None:
            ts = self.talkers[(plan.bucket, plan.capacity)] = TalkerState(self.talker, plan.bucket, plan.capacity, device, dtype)
        return st, ts

    def _steps(self, st: FrameState, ts: TalkerState, plan: _Plan) -> tuple[Callable[[], object], Callable[[], object], str]:
        """(predictor run, talker run, mode): replays of captured graphs, or the eager functions."""
        predict, step = predictor_step_fn(self.talker, st), talker_step_fn(self.talker, st, ts)
        if not self.capture:
            return predict, step, "eager (cuda_graphs off)"
        if self.capture_error is not None:
            return predict, step, "eager (capture failed earlier)"
        try:
            # Capturing runs the functions (warm-up + recording); the caller's prefill is redone afterwards.
            g_predict = self.graphs.get(("predictor", plan.bucket), lambda: predict, warmup=self.warmup)
            g_step = self.graphs.get(("talker", plan.bucket, plan.capacity), lambda: step, warmup=self.warmup)
        except Exception as e:  # noqa: BLE001 - any capture failure falls back to the same code, eager
            self.capture_error = f"{type(e).__name__}: {e}"
            log.warning("CUDA graph capture failed, decoding eagerly instead: %s", self.capture_error)
            return predict, step, "eager (capture failed)"
        return g_predict.run, g_step.run, "cuda_graphs"

    # -- a request -------------------------------------------------------------------------------
    def prefill(
        self, st: FrameState, ts: TalkerState, inputs: TalkerInputs, settings: DecodeSettings, seeds: torch.Tensor, row_limits: torch.Tensor | None
    ) -> None:
        """Run the prompt exactly as `decode_frames` does, fill every buffer, draw code 0 of frame 0."""
        talker = self.talker
        device = inputs.embeds.device
        batch, length = inputs.attention_mask.shape
        padding = inputs.attention_mask
        first = prefill(talker, inputs)
        cache, deltas, hidden, logits = first.cache, first.deltas, first.hidden, first.logits

        ts.cache.load_prefix([c.keys for c in cache.layers], [c.values for c in cache.layers])
        ts.valid.fill_(True)
        ts.valid[:batch, :length].copy_(padding.bool())
        ts.deltas.zero_()
        ts.deltas[:batch].copy_(deltas)
        ts.position.fill_(length)
        ts.trail_index.zero_()
        ts.trailing.copy_(inputs.tts_pad.to(ts.trailing.dtype).expand_as(ts.trailing))
        rows = min(inputs.trailing_text.shape[1], ts.capacity)
        ts.trailing[:batch, :rows].copy_(inputs.trailing_text[:, :rows])

        vocab = talker.cfg.vocab_size
        st.hidden.zero_()
        st.hidden[:batch].copy_(hidden[:, -1:])
        st.logits.zero_()
        st.logits[:batch].copy_(logits[:, -1, :])
        st.codes.zero_()
        st.seen.zero_()
        st.drawn.zero_()
        st.unfinished.zero_()
        st.unfinished[:batch] = True
        st.eos.zero_()
        st.limits.zero_()
        st.limits[:batch] = row_limits.to(device) if row_limits is not None else torch.iinfo(torch.long).max
        st.seed.zero_()
        st.seed[:batch].copy_(seeds)
        st.talker_params.fill_(settings.talker)
        st.predictor_params.fill_(settings.predictor)
        st.eos_id.fill_(settings.eos_id)
        st.eos_mask.zero_()
        st.eos_mask[settings.eos_id] = True
        st.suppress_mask.zero_()
        if settings.suppress_ids:
            st.suppress_mask[torch.tensor(settings.suppress_ids, device=device)] = True
        assert st.logits.shape[-1] == vocab
        draw_code0(talker, st)

    def decode_frames(
        self,
        inputs: TalkerInputs,
        settings: DecodeSettings,
        generator: torch.Generator | None = None,
        *,
        row_limits: torch.Tensor | None = None,
        cancel: CancelToken | None = None,
        outcome: DecodeOutcome | None = None,
    ) -> Iterator[Frame]:
        """`generate.decode_frames`' contract on static buffers and captured graphs (see module doc)."""
        outcome = outcome if outcome is not None else DecodeOutcome()
        batch, length = inputs.attention_mask.shape
        plan = self.plan(batch, length, settings, row_limits)
        if isinstance(plan, str):
            yield from self._core(plan, inputs, settings, generator, row_limits, cancel, outcome)
            return
        device, dtype = inputs.embeds.device, inputs.embeds.dtype
        with torch.inference_mode():
            st, ts = self._states(plan, device, dtype)
        if not st.lock.acquire(blocking=False):
            yield from self._core("another decode is using this batch bucket's buffers", inputs, settings, generator, row_limits, cancel, outcome)
            return
        try:
            gen_device = generator.device if generator is not None else torch.device("cpu")
            seeds = torch.randint(0, 2**62, (batch,), generator=generator, device=gen_device).to(device)
            try:
                with torch.inference_mode():
                    predict, step, mode = self._steps(st, ts, plan)
                    self.prefill(st, ts, inputs, settings, seeds, row_limits)
            except Exception as e:  # noqa: BLE001 - the core path still serves the request
                reason = f"graphed path failed before the first frame ({type(e).__name__}: {e})"
                log.warning("%s; decoding with decode_frames", reason)
                yield from self._core(reason, inputs, settings, generator, row_limits, cancel, outcome)
                return
            report = {
                "decode_path": mode,
                "batch_bucket": plan.bucket,
                "cache_capacity": plan.capacity,
                "fallback_reason": self.capture_error if mode != "cuda_graphs" and self.capture else None,
            }
            self._report(outcome, report)
            drawn, index = 1, 0
            while True:
                if cancel is not None:
                    cancel.raise_if_cancelled()
                with torch.inference_mode():
                    speaking = bool(st.any_unfinished)  # the one host wait of a frame
                    if drawn >= settings.max_new_tokens or not speaking:
                        outcome.eos = st.eos[:batch].clone()
                        return
                    predict()
                    codes, alive = st.codes[:batch].clone(), st.unfinished[:batch].clone()
                    outcome.eos = st.eos[:batch].clone()
                    step()  # queued behind the clones: the next frame's code 0 is drawn while the caller works
                drawn += 1
                yield Frame(index=index, codes=codes, alive=alive)
                index += 1
        finally:
            st.lock.release()

    def _core(self, reason: str, inputs, settings, generator, row_limits, cancel, outcome) -> Iterator[Frame]:
        log.info("decode_frames serves this request: %s", reason)
        self._report(outcome, {"decode_path": "decode_frames", "batch_bucket": None, "cache_capacity": None, "fallback_reason": reason})
        yield from decode_frames(self.talker, inputs, settings, generator, row_limits=row_limits, cancel=cancel, outcome=outcome)

    def _report(self, outcome: DecodeOutcome, report: dict) -> None:
        self.last_report = report
        outcome.decode_path = report  # read by the engine into the result's metadata

    def release(self) -> None:
        """Drop graphs and buffers (e.g. before loading another model on the same GPU)."""
        self.graphs.clear()
        self.frames.clear()
        self.talkers.clear()
