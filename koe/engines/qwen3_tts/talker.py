"""The Qwen3-TTS talker and its code predictor, as plain modules on koe's Qwen3 decoder blocks.

The talker is a Qwen3 decoder over summed text and codec embeddings; its head predicts codebook 0
of each 12.5 Hz frame. The code predictor (a small decoder, "sub-talker") then predicts codebooks
1..G-1 of the same frame from the talker's last hidden state. Parameter names follow the released
checkpoints (`talker.model.layers.0.self_attn.q_proj.weight`, `talker.code_predictor.lm_head.3.weight`, ...).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils.checkpoint import checkpoint

from koe.engines.qwen3_tts.config import CodePredictorConfig, TalkerConfig
from koe.nn import kernel_stack
from koe.nn.decoder import DecoderLayer
from koe.nn.kernel_stack import KernelCache, KernelStack
from koe.nn.norm import RMSNorm
from koe.nn.rotary import inverse_frequencies, multimodal_cos_sin, rotary_cos_sin
from koe.runtime.kv_cache import ConcatCache
from koe.runtime.precision import Backbone


class TextProjection(nn.Module):
    """Two-layer MLP with biases mapping text embeddings into the talker's width."""

    def __init__(self, in_size: int, hidden_size: int, out_size: int) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(in_size, hidden_size, bias=True)
        self.linear_fc2 = nn.Linear(hidden_size, out_size, bias=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear_fc2(F.silu(self.linear_fc1(x)))


class DecoderStack(nn.Module):
    """Layers + final norm; runs a sequence through them with a cache and an optional mask.

    In the int8 / int4 modes `kernel` is set (`koe.nn.kernel_stack`): `new_cache` then gives a
    `KernelCache` and a run with one goes through koe's C step instead of the modules."""

    kernel: KernelStack | None = None

    def __init__(self, cfg) -> None:
        super().__init__()
        spec = cfg.decoder
        self.layers = nn.ModuleList([DecoderLayer(spec) for _ in range(spec.num_layers)])
        self.norm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)

    def new_cache(self, batch: int, capacity: int, padding: torch.Tensor | None = None) -> ConcatCache | KernelCache:
        """An empty cache for `batch` rows (`capacity`: positions expected; a `KernelCache` grows past
        it). `padding` (B, L) is 1 for real positions and 0 for left padding; a `KernelCache` takes
        it as each row's first real position (left padding only; anything else gets a ConcatCache)."""
        if self.kernel is None:
            return ConcatCache(len(self.layers))
        start = None
        if padding is not None:
            start = padding.shape[1] - padding.sum(-1)
            if not torch.equal(padding.bool(), torch.arange(padding.shape[1])[None, :] >= start[:, None]):
                return ConcatCache(len(self.layers))
        return self.kernel.new_cache(batch, capacity, start)

    def run(
        self,
        x: torch.Tensor,
        cos: torch.Tensor,
        sin: torch.Tensor,
        cache: ConcatCache | KernelCache | None,
        mask: torch.Tensor | None,
        checkpointed: bool = False,
    ) -> torch.Tensor:
        """`checkpointed` (training, no cache): each layer's activations are recomputed in the
        backward pass instead of kept (less memory, the same results). With a `KernelCache` the
        C step runs the stack (its padding is the cache's: `mask` is not read)."""
        if isinstance(cache, KernelCache):
            return cache.step(x, cos, sin)
        for i, layer in enumerate(self.layers):
            if checkpointed:
                x = checkpoint(layer, x, cos, sin, None, mask, use_reentrant=False)
            else:
                x = layer(x, cos, sin, None if cache is None else cache.layers[i], mask)
        return self.norm(x)


class TalkerBody(DecoderStack):
    def __init__(self, cfg: TalkerConfig) -> None:
        super().__init__(cfg)
        self.codec_embedding = nn.Embedding(cfg.vocab_size, cfg.decoder.hidden_size)
        self.text_embedding = nn.Embedding(cfg.text_vocab_size, cfg.text_hidden_size)


class CodePredictorBody(DecoderStack):
    def __init__(self, cfg: CodePredictorConfig, talker_hidden: int) -> None:
        super().__init__(cfg)
        self.codec_embedding = nn.ModuleList([nn.Embedding(cfg.vocab_size, talker_hidden) for _ in range(cfg.num_code_groups - 1)])


class CodePredictor(nn.Module):
    """Predicts codebooks 1..G-1 of a frame, one per step, from [talker hidden, code 0 embedding]."""

    def __init__(self, cfg: CodePredictorConfig, talker_hidden: int) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = CodePredictorBody(cfg, talker_hidden)
        self.lm_head = nn.ModuleList([nn.Linear(cfg.decoder.hidden_size, cfg.vocab_size, bias=False) for _ in range(cfg.num_code_groups - 1)])
        if cfg.decoder.hidden_size != talker_hidden:
            self.small_to_mtp_projection: nn.Module = nn.Linear(talker_hidden, cfg.decoder.hidden_size, bias=True)
        else:
            self.small_to_mtp_projection = nn.Identity()
        self.register_buffer("inv_freq", inverse_frequencies(cfg.decoder.head_dim, cfg.decoder.rope_theta), persistent=False)

    def forward_step(self, embeds: torch.Tensor, positions: torch.Tensor | int, cache: ConcatCache, head: int) -> torch.Tensor:
        """embeds (B, T, C_talker) at `positions` (B, T), or at `start`..`start + T` for every row
        when an int -> logits (B, T, V) of lm_head[head]."""
        x = self.small_to_mtp_projection(embeds)
        if isinstance(positions, int):  # a frame's steps sit at positions 0..G for every row: one table per model
            cos, sin = (t[:, positions : positions + x.shape[1]] for t in self._rotary_table(x.dtype, x.device))
        else:
            cos, sin = rotary_cos_sin(self.inv_freq, positions, x.dtype)
        hidden = self.model.run(x, cos.unsqueeze(1), sin.unsqueeze(1), cache, None)
        return self.lm_head[head](hidden)

    def _rotary_table(self, dtype: torch.dtype, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        """cos/sin (1, G + 1, D) of positions 0..G, made once (each position's values are those
        `rotary_cos_sin` gives it alone: elementwise functions of the position)."""
        key = (dtype, device, self.inv_freq.device)
        table = self.__dict__.get("_rotary", {}).get(key)
        if table is None:
            with torch.inference_mode(False), torch.no_grad():  # plain tensors: usable in and out of inference mode
                positions = torch.arange(self.cfg.num_code_groups + 1, device=self.inv_freq.device)[None]
                table = tuple(t.to(device) for t in rotary_cos_sin(self.inv_freq, positions, dtype))
            self.__dict__.setdefault("_rotary", {})[key] = table
        return table


class Talker(nn.Module):
    def __init__(self, cfg: TalkerConfig) -> None:
        super().__init__()
        self.cfg = cfg
        self.model = TalkerBody(cfg)
        self.text_projection = TextProjection(cfg.text_hidden_size, cfg.text_hidden_size, cfg.decoder.hidden_size)
        self.codec_head = nn.Linear(cfg.decoder.hidden_size, cfg.vocab_size, bias=False)
        self.code_predictor = CodePredictor(cfg.code_predictor, cfg.decoder.hidden_size)
        self.register_buffer("inv_freq", inverse_frequencies(cfg.decoder.head_dim, cfg.decoder.rope_theta), persistent=False)

    def embed_text(self, ids: torch.Tensor) -> torch.Tensor:
        """Text ids (B, T) -> projected embeddings (B, T, C)."""
        return self.text_projection(self.model.text_embedding(ids))

    def embed_codec(self, ids: torch.Tensor) -> torch.Tensor:
        return self.model.codec_embedding(ids)

    def forward_hidden(
        self, embeds: torch.Tensor, positions: torch.Tensor, cache: ConcatCache | None, mask: torch.Tensor | None, checkpointed: bool = False
    ) -> torch.Tensor:
        """embeds (B, T, C) at multimodal `positions` (3, B, T) -> final-norm hidden states (B, T, C)."""
        cos, sin = rotary_cos_sin(self.inv_freq, positions, embeds.dtype)  # (3, B, T, D)
        cos, sin = multimodal_cos_sin(cos, sin, list(self.cfg.mrope_section), self.cfg.mrope_interleaved)
        return self.model.run(embeds, cos, sin, cache, mask, checkpointed)


def attach_kernel_steps(talker: Talker) -> None:
    """int8 / int4 modes: the talker's and code predictor's stacks step in C where they can
    (`koe.nn.kernel_stack`; left as modules where not, e.g. int8 on fbgemm)."""
    for stack in (talker.model, talker.code_predictor.model):
        stack.kernel = kernel_stack.attach(stack)


def backbone(talker: Talker) -> Backbone:
    """The talker as the precision layer rewrites it (`koe.runtime.precision`): its decoder layers,
    codec head and code predictor (in int8 / int4 the text projection stays float), its RMSNorms,
    the text embedding (1.2 GB in float32) read row by row, and the C decoder step."""
    return Backbone(talker, RMSNorm, keep_float=("text_projection",), embeddings=((talker.model, "text_embedding"),), kernel_steps=attach_kernel_steps)
