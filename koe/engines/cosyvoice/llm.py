"""CosyVoice 2/3's speech-token LM: a Qwen2 decoder over text and speech-token embeddings.

The prompt, as upstream lays it out (one row of embeddings):
    [sos] [prompt text + text ids, through Qwen's token embedding] [task id] [prompt speech tokens]
v2 keeps sos and the task id in a 2-row `llm_embedding`; v3 keeps them in `speech_embedding`
(rows 6561 and 6563). The Qwen2 stack runs the prompt once (causal, no mask), then one speech
token at a time on a growing KV cache; `llm_decoder` turns the last hidden state into
log-probabilities over the speech ids and the extra ids past them (v2: 3, v3: 200); RAS sampling
(`sampling.py`) picks each token. Decoding ends at any extra id (never yielded), or after
`max_len` tokens; before `min_len` tokens id 6561 is ruled out. The lengths count the target text
only: `min_len = int(n * 2)`, `max_len = int(n * 20)` for `n` text ids. The speaker embedding
upstream passes is not read by these LMs. Text that arrives in pieces (from an LLM) has its own
decoding, `generate_tokens_streamed` (upstream's `inference_bistream`).

Weights load from the release's `llm.pt` (koe's strict loader) by an explicit name map: upstream
nests the backbone as `llm.model.model.*` (transformers' `Qwen2ForCausalLM` inside
`Qwen2Encoder`), whose tied `llm.model.lm_head.weight` is the token embedding again and is not
used here. The LM runs on the CPU, in float32 with upstream's bits or in an opt-in precision.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

import torch
from torch import nn

from koe.engines.cosyvoice.config import BLANK_FOLDER, ConfigError, LMConfig, QwenConfig
from koe.engines.cosyvoice.sampling import ras_sample
from koe.nn import kernel_stack
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.kernel_stack import KernelCache, KernelStack
from koe.nn.norm import RMSNorm
from koe.nn.rotary import RotaryEmbedding
from koe.runtime.kv_cache import ConcatCache
from koe.runtime.precision import PRECISIONS, Backbone
from koe.runtime.precision import apply as apply_precision
from koe.runtime.precision import plan as precision_plan
from koe.runtime.weights import build_from_weights

__all__ = [
    "ENDOFPROMPT_ID",
    "SILENT_TOKENS",
    "Qwen2Backbone",
    "SpeechLM",
    "StreamedTextError",
    "TokenLimits",
    "generate_tokens",
    "generate_tokens_streamed",
    "keep_silences_short",
    "load_lm",
    "lm_state_names",
    "precision_backbone",
]

ENDOFPROMPT_ID = 151646  # "<|endofprompt|>" in the BlankEN tokenizer: v3's text must hold it
SILENT_TOKENS = {2: (), 3: (1, 2, 28, 29, 55, 248, 494, 2241, 2242, 2322, 2323)}  # v3's FSQ silence and breath ids
MAX_SILENT_RUN = 5  # upstream keeps at most this many silent tokens in a row
BACKBONE_PREFIX = "llm.model.model."  # the released names of the Qwen2 stack
TIED_HEAD = "llm.model.lm_head.weight"


def backbone_spec(qwen: QwenConfig) -> DecoderSpec:
    """koe's decoder layer as Qwen2's: q/k/v biases, no q/k norm, causal."""
    return DecoderSpec(
        hidden_size=qwen.hidden_size,
        intermediate_size=qwen.intermediate_size,
        num_layers=qwen.num_hidden_layers,
        num_heads=qwen.num_attention_heads,
        num_kv_heads=qwen.num_key_value_heads,
        head_dim=qwen.head_dim,
        rms_norm_eps=qwen.rms_norm_eps,
        rope_theta=qwen.rope_theta,
        qkv_bias=True,
        qk_norm=False,
    )


class Qwen2Backbone(nn.Module):
    """Token embedding, Qwen2 decoder layers, final norm (released as `llm.model.model.*`).

    In the int8 / int4 modes `kernel` is set (`koe.nn.kernel_stack`): `new_cache` then gives a
    `KernelCache`, and a run with one goes through koe's C step instead of the modules."""

    kernel: KernelStack | None = None

    def __init__(self, qwen: QwenConfig) -> None:
        super().__init__()
        spec = backbone_spec(qwen)
        self.embed_tokens = nn.Embedding(qwen.vocab_size, qwen.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.num_layers))
        for layer in self.layers:
            layer.self_attn.native_gqa = False  # K/V heads repeated before SDPA, as transformers 4.51 does
        self.norm = RMSNorm(qwen.hidden_size, eps=qwen.rms_norm_eps)
        self.rotary = RotaryEmbedding(spec.head_dim, spec.rope_theta)

    def new_cache(self, capacity: int = 256) -> ConcatCache | KernelCache:
        """An empty cache for one row (a `KernelCache` grows past `capacity`)."""
        return ConcatCache(len(self.layers)) if self.kernel is None else self.kernel.new_cache(1, capacity)

    def forward(self, x: torch.Tensor, cache: ConcatCache | KernelCache) -> torch.Tensor:
        """x (1, T, C) embeddings following the cache's positions -> (1, T, C) normed hidden states.

        Attention as transformers 4.51 runs it for these inputs: with no mask (SDPA's causal flag)
        for a whole prompt or one token; for several tokens after a cache (streamed text), with
        its additive float mask (0 where a query sees a key, the dtype's minimum elsewhere)."""
        start, t = cache.length, x.shape[1]
        positions = torch.arange(start, start + t, device=x.device)  # (T,)
        cos, sin = self.rotary(positions[None], x.dtype)
        if isinstance(cache, KernelCache):
            return cache.step(x, cos, sin).to(x.dtype)
        mask = None
        if start and t > 1:
            keys = torch.arange(start + t, device=x.device)
            mask = torch.full((t, start + t), torch.finfo(x.dtype).min, dtype=x.dtype, device=x.device)
            mask = (mask * (keys[None, :] > positions[:, None]))[None, None]  # (1, 1, T, S)
        for i, layer in enumerate(self.layers):
            x = layer(x, cos, sin, cache.layers[i], mask)
        return self.norm(x)


def attach_kernel_steps(backbone: Qwen2Backbone) -> None:
    """int8 / int4 modes: the stack steps in C where it can (`koe.nn.kernel_stack`)."""
    backbone.kernel = kernel_stack.attach(backbone)


class SpeechLM(nn.Module):
    """The LM's modules, named as `llm.pt` names them (the backbone mapped, see the module docstring)."""

    def __init__(self, config: LMConfig, qwen: QwenConfig) -> None:
        super().__init__()
        if config.input_size != qwen.hidden_size or config.output_size != qwen.hidden_size:
            raise ConfigError(f"the LM's widths ({config.input_size}/{config.output_size}) are not the backbone's hidden_size ({qwen.hidden_size})")
        self.config, self.qwen = config, qwen
        width = qwen.hidden_size
        self.llm_embedding = nn.Embedding(2, width) if config.version == 2 else None
        self.backbone = Qwen2Backbone(qwen)
        self.llm_decoder = nn.Linear(width, config.vocab_size, bias=config.version == 2)
        self.speech_embedding = nn.Embedding(config.vocab_size, width)

    def marker(self, which: str) -> torch.Tensor:
        """The sos or task-id embedding, (1, 1, C)."""
        index = self.config.sos if which == "sos" else self.config.task_id
        table = self.llm_embedding if self.llm_embedding is not None else self.speech_embedding
        return table.weight[index].reshape(1, 1, -1)

    def prompt(self, text: torch.Tensor, prompt_text: torch.Tensor, prompt_speech: torch.Tensor) -> torch.Tensor:
        """The prompt's embeddings (1, L, C) from text ids (1, N), prompt text ids (1, P) and prompt
        speech tokens (1, S) (S may be 0)."""
        ids = torch.cat([prompt_text, text], dim=1)
        if self.config.version == 3 and not bool((ids == ENDOFPROMPT_ID).any()):
            raise ValueError("CosyVoice 3 needs <|endofprompt|> in the text or the prompt text (its instruction or system prompt ends with it)")
        text_emb = self.backbone.embed_tokens(ids)
        if prompt_speech.shape[1]:
            speech = self.speech_embedding(prompt_speech)
        else:
            speech = text_emb.new_zeros(1, 0, self.config.input_size)
        return torch.cat([self.marker("sos"), text_emb, self.marker("task_id"), speech], dim=1)

    def step(self, x: torch.Tensor, cache: ConcatCache | KernelCache) -> torch.Tensor:
        """Embeddings (1, T, C) after the cache -> log-probabilities (V,) of the next id (float32)."""
        hidden = self.backbone(x, cache)
        return self.llm_decoder(hidden[:, -1]).float().log_softmax(dim=-1).squeeze(0)  # float() is a no-op in float32

    def token_embedding(self, token: int) -> torch.Tensor:
        return self.speech_embedding.weight[token].reshape(1, 1, -1)


@dataclass(frozen=True)
class TokenLimits:
    """How many speech tokens a text of `n` ids gets: at least `int(n * min_ratio)` (the end is
    ruled out before), at most `int(n * max_ratio)`."""

    min_ratio: float = 2.0
    max_ratio: float = 20.0

    def of(self, n: int) -> tuple[int, int]:
        # upstream multiplies an int32 tensor by the ratio (float32), then truncates
        n32 = torch.tensor([n], dtype=torch.int32)
        return int(n32 * self.min_ratio), int(n32 * self.max_ratio)


@torch.inference_mode()
def generate_tokens(
    lm: SpeechLM,
    text: torch.Tensor,
    prompt_text: torch.Tensor,
    prompt_speech: torch.Tensor,
    limits: TokenLimits = TokenLimits(),
    generator: torch.Generator | None = None,
) -> Iterator[int]:
    """Speech tokens for `text` (1, N) after `prompt_text` (1, P) spoken as `prompt_speech` (1, S),
    one at a time as they are decoded (upstream's `llm.inference`; the module docstring has the
    order). Draws come from `generator` (torch's global generator when None)."""
    min_len, max_len = limits.of(text.shape[1])
    x = lm.prompt(text, prompt_text, prompt_speech)
    cache = lm.backbone.new_cache(x.shape[1] + max_len)
    out: list[int] = []
    stop = lm.config.stop_tokens
    for i in range(max_len):
        logp = lm.step(x, cache)
        if i < min_len:
            logp[lm.config.speech_token_size] = -float("inf")
        token = ras_sample(logp, out, lm.config.sampling, generator)
        if token in stop:
            return
        yield token
        out.append(token)
        x = lm.token_embedding(token)


class StreamedTextError(ValueError):
    """The LM gave an id that upstream's streamed-text decoding cannot take (upstream raises too)."""


@torch.inference_mode()
def generate_tokens_streamed(
    lm: SpeechLM,
    pieces: Iterable[torch.Tensor],
    prompt_text: torch.Tensor,
    prompt_speech: torch.Tensor,
    generator: torch.Generator | None = None,
) -> Iterator[int]:
    """Speech tokens for text arriving in pieces (each (1, n) ids, as an LLM streams it), after
    `prompt_text` (1, P) spoken as `prompt_speech` (1, S): upstream's `llm.inference_bistream`.

    The prompt interleaves text and speech as the LM was trained for streaming: after sos (and,
    for v3, the prompt text up to its <|endofprompt|>), every `mix_ratio[0]` (5) text embeddings
    are followed by `mix_ratio[1]` (15) prompt speech tokens while both last; then, while text
    arrives, 5 text embeddings at a time let the LM speak until it gives the fill id (forced once
    its output reaches the next multiple of 15 speech tokens past the prompt's, then every 16
    ids); the fill id is not yielded, and the end id is ruled out. When the text ends, the rest of
    it and the task id follow, and decoding runs to the end id (with no length limit, as
    upstream's). Another id past the speech vocabulary is a `StreamedTextError`, as upstream
    raises one."""
    cfg = lm.config
    embed = lm.backbone.embed_tokens
    if prompt_speech.shape[1]:
        speech = lm.speech_embedding(prompt_speech)
    else:
        speech = embed.weight.new_zeros(1, 0, cfg.input_size)
    x = lm.marker("sos")
    if cfg.version == 3:
        ids = prompt_text.flatten().tolist()
        if ENDOFPROMPT_ID not in ids:
            raise ValueError("CosyVoice 3 needs <|endofprompt|> in the prompt text for streamed text (its instruction or system prompt ends with it)")
        end = ids.index(ENDOFPROMPT_ID) + 1
        x = torch.cat([x, embed(prompt_text[:, :end])], dim=1)
        prompt_text = prompt_text[:, end:]
    text = embed(prompt_text)
    n_text, n_speech = cfg.mix_ratio
    next_fill = (prompt_speech.shape[1] // n_speech + 1) * n_speech - prompt_speech.shape[1]
    cache = lm.backbone.new_cache()
    out: list[int] = []
    for piece in pieces:
        text = torch.cat([text, embed(piece)], dim=1)
        while speech.shape[1] and text.shape[1] >= n_text:  # the prompt's speech, interleaved with text
            x = torch.cat([x, text[:, :n_text], speech[:, :n_speech]], dim=1)
            text, speech = text[:, n_text:], speech[:, n_speech:]
        if speech.shape[1]:
            continue
        after_fill = bool(out) and out[-1] == cfg.fill
        if after_fill or (not out and x.shape[1] == 1):
            if text.shape[1] < n_text:
                continue  # wait for more text
            x = text[:, :n_text] if after_fill else torch.cat([x, text[:, :n_text]], dim=1)
            text = text[:, n_text:]
        while True:
            logp = lm.step(x, cache)
            if next_fill != -1 and len(out) == next_fill:
                token = cfg.fill
                next_fill += n_speech + 1
            else:
                logp[cfg.speech_token_size] = -float("inf")
                token = ras_sample(logp, out, cfg.sampling, generator)
            if token == cfg.fill:
                next_fill = len(out) + n_speech + 1
            out.append(token)
            if token >= cfg.speech_token_size:
                if token == cfg.fill:
                    break
                raise StreamedTextError(f"the LM gave id {token} (past the speech tokens, not the fill id {cfg.fill}) while text was still arriving")
            yield token
            x = lm.token_embedding(token)
    x = torch.cat([x, text, lm.marker("task_id")], dim=1)
    while True:
        token = ras_sample(lm.step(x, cache), out, cfg.sampling, generator)
        out.append(token)
        if token >= cfg.speech_token_size:
            if token == cfg.eos:
                return
            raise StreamedTextError(f"the LM gave id {token} (past the speech tokens, not the end id {cfg.eos}) after the text ended")
        yield token
        x = lm.token_embedding(token)


def keep_silences_short(tokens: Iterator[int], version: int) -> Iterator[int]:
    """Drop v3's silent tokens past `MAX_SILENT_RUN` in a row (what upstream's model keeps of the
    LM's tokens; v2 has no silent tokens)."""
    silent, run = SILENT_TOKENS[version], 0
    for token in tokens:
        if token in silent:
            run += 1
            if run > MAX_SILENT_RUN:
                continue
        else:
            run = 0
        yield token


# --------------------------------------------------------------------------- weights


def lm_state_names(lm: SpeechLM) -> dict[str, str]:
    """koe's parameter names -> `llm.pt`'s names, in koe's order."""
    return {name: BACKBONE_PREFIX + name.removeprefix("backbone.") if name.startswith("backbone.") else name for name in lm.state_dict()}


def _koe_name(released: str) -> str | None:
    if released == TIED_HEAD:
        return None  # the token embedding again (checked in load_lm)
    return "backbone." + released.removeprefix(BACKBONE_PREFIX) if released.startswith(BACKBONE_PREFIX) else released


def precision_backbone(lm: SpeechLM) -> Backbone:
    """The LM as the precision layer rewrites it (`koe.runtime.precision`): the Qwen2 stack's
    linears and RMSNorms, and its C decoder step in int8 / int4; the head and embeddings stay float."""
    return Backbone(lm.backbone, RMSNorm, kernel_steps=attach_kernel_steps)


def load_lm(folder: str | Path, config: LMConfig, qwen: QwenConfig, precision: str | None = None) -> SpeechLM:
    """The LM of a released folder from `llm.pt` (weights only), strictly: every tensor named and
    shaped as the modules expect, the tied head the token embedding's shape. On the CPU;
    `precision` one of `koe.runtime.precision.PRECISIONS` (None or "fp32": float32, upstream's bits;
    the exact path runs on koe's exact kernels where this process's products are theirs). The
    returned LM carries `kernel` (what runs the backbone's products, None: torch) and `precision`."""
    numeric = precision_plan(precision, torch.device("cpu"), torch.float32, PRECISIONS, "CosyVoice's LM")
    path = Path(folder) / "llm.pt"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: missing (a CosyVoice release folder has llm.pt)")
    head = torch.load(path, map_location="meta", weights_only=True, mmap=True).get(TIED_HEAD)
    width, rows = qwen.hidden_size, qwen.vocab_size
    if head is None or tuple(head.shape) != (rows, width):
        found = "missing" if head is None else f"{tuple(head.shape)}"
        raise ConfigError(f"{path}: {TIED_HEAD} is {found}, expected the token embedding's ({rows}, {width}) ({BLANK_FOLDER} ties them)")
    lm = build_from_weights(lambda: SpeechLM(config, qwen), [path], dtype=numeric.load_dtype, rename=_koe_name)
    lm.kernel = apply_precision(numeric, lm, [precision_backbone(lm)])
    lm.precision = numeric.reported
    return lm.to(numeric.dtype).eval()
