"""OmniVoice's masked-diffusion LM: a Qwen3 stack run bidirectionally over text tokens and audio
frames, each frame embedded as the sum of its 8 codebook entries, with one head per codebook.

Parameter names are the release's (`llm.*`, `audio_embeddings`, `audio_heads`,
`codebook_layer_offsets`), so `model.safetensors` loads strictly.

Exactness (float32 on the CPU): upstream runs a padded batch (conditional and unconditional rows,
the shorter ones padded to the longest); koe runs the same rows packed end to end without the
padding (`koe.nn.attention.Packed`: each sequence's attention over keys zero-padded to the batch's
length, as SDPA saw them upstream) and the heads only on the positions the sampler reads. Every
other operation works per position, and under MKL's strict reproducibility a product's row does
not depend on the other rows, so each kept position gets upstream's bits. In bfloat16 (oneDNN's
products, whose rows do depend on the rows around them) koe runs upstream's padded batch as is,
which gives upstream's own bf16 bits.
"""

from __future__ import annotations

import torch
from torch import nn

from koe.engines.omnivoice.config import OmniVoiceConfig
from koe.nn.attention import Packed
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.norm import RMSNorm
from koe.nn.rotary import RotaryEmbedding
from koe.nn.rows import with_fewest_rows

__all__ = ["Backbone", "OmniVoiceLM"]


def decoder_spec(config: OmniVoiceConfig) -> DecoderSpec:
    llm = config.llm
    return DecoderSpec(
        hidden_size=llm.hidden_size,
        intermediate_size=llm.intermediate_size,
        num_layers=llm.num_hidden_layers,
        num_heads=llm.num_attention_heads,
        num_kv_heads=llm.num_key_value_heads,
        head_dim=llm.head_dim,
        rms_norm_eps=llm.rms_norm_eps,
        rope_theta=llm.rope_theta,
        attention_bias=llm.attention_bias,
        causal=False,
    )


class Backbone(nn.Module):
    """The Qwen3 stack (`llm.*`): token embeddings, decoder layers, final norm; no LM head."""

    def __init__(self, config: OmniVoiceConfig) -> None:
        super().__init__()
        spec = decoder_spec(config)
        self.embed_tokens = nn.Embedding(config.llm.vocab_size, spec.hidden_size)
        self.layers = nn.ModuleList(DecoderLayer(spec) for _ in range(spec.num_layers))
        self.norm = RMSNorm(spec.hidden_size, eps=spec.rms_norm_eps)
        self.rotary = RotaryEmbedding(spec.head_dim, spec.rope_theta)

    def forward(self, x: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | Packed) -> torch.Tensor:
        """x (B, T, C) input embeddings, positions (B, T), mask: a padded batch's boolean (B, 1, T, T)
        (True: attend), or `Packed` sequences in one row (B = 1, positions from 0 in each) -> (B, T, C)."""
        cos, sin = self.rotary(positions, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, None, mask)
        return self.norm(x)


class OmniVoiceLM(nn.Module):
    """Text and audio ids of packed sequences (1, 8, T) -> audio logits (R, 8, audio_vocab_size) at R chosen positions."""

    codebook_layer_offsets: torch.Tensor

    def __init__(self, config: OmniVoiceConfig) -> None:
        super().__init__()
        self.config = config
        n, vocab, hidden = config.num_audio_codebook, config.audio_vocab_size, config.llm.hidden_size
        self.llm = Backbone(config)
        self.audio_embeddings = nn.Embedding(n * vocab, hidden)
        self.audio_heads = nn.Linear(hidden, n * vocab, bias=False)
        self.register_buffer("codebook_layer_offsets", torch.arange(n) * vocab)

    def embed(self, ids: torch.Tensor, audio_mask: torch.Tensor) -> torch.Tensor:
        """ids (B, 8, L), audio_mask (B, L) bool -> (B, L, C): text embeddings of codebook 0's ids
        where the mask is False, the sum over codebooks of each codebook's entry where it is True."""
        text = self.llm.embed_tokens(ids[:, 0, :])  # (B, L, C)
        shifted = ids * audio_mask.unsqueeze(1) + self.codebook_layer_offsets.view(1, -1, 1)  # (B, 8, L)
        audio = self.audio_embeddings(shifted).sum(dim=1)  # (B, 8, L, C) -> (B, L, C)
        return torch.where(audio_mask.unsqueeze(-1), audio, text)

    def forward(self, ids: torch.Tensor, audio_mask: torch.Tensor, positions: torch.Tensor, mask: torch.Tensor | Packed, rows: torch.Tensor) -> torch.Tensor:
        """ids (B, 8, T), audio_mask and positions (B, T), the mask (`Backbone.forward`), `rows` (R,)
        the flat positions (row x T + column) to score -> logits (R, 8, V) in float32. Packed, the
        heads read only those positions; a padded batch is scored whole first, as upstream scores it."""
        hidden = self.llm(self.embed(ids, audio_mask), positions, mask)
        flat = hidden.reshape(-1, hidden.shape[-1])  # (B x T, C)
        if isinstance(mask, Packed):
            logits = self.audio_heads(with_fewest_rows(flat[rows], dim=0))[: len(rows)]  # upstream's: 2B x T >= 4 rows
        else:
            logits = self.audio_heads(hidden).reshape(flat.shape[0], -1)[rows]
        return logits.view(len(rows), self.config.num_audio_codebook, self.config.audio_vocab_size).to(torch.float32)
