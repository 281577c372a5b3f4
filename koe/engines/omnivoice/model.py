"""OmniVoice's masked-diffusion LM: a Qwen3 stack run bidirectionally over text tokens and audio
frames, each frame embedded as the sum of its 8 codebook entries, with one head per codebook.

Parameter names are the release's (`llm.*`, `audio_embeddings`, `audio_heads`,
`codebook_layer_offsets`), so `model.safetensors` loads strictly.

Exactness (float32 on the CPU): the embeddings, the mask and the heads are computed on the same
shapes upstream computes them on (the whole batch of conditional and unconditional rows, every
position), so every reduction adds in upstream's order; attention goes through SDPA with a boolean
mask and repeated K/V heads as transformers' SDPA path does.
"""

from __future__ import annotations

import torch
from torch import nn

from koe.engines.omnivoice.config import OmniVoiceConfig
from koe.nn.decoder import DecoderLayer, DecoderSpec
from koe.nn.norm import RMSNorm
from koe.nn.rotary import RotaryEmbedding

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

    def forward(self, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
        """x (B, L, C) input embeddings, mask (B, 1, L, L) bool (True: attend) -> (B, L, C)."""
        positions = torch.arange(x.shape[1], device=x.device)[None].expand(x.shape[0], -1)  # (B, L): 0..L-1
        cos, sin = self.rotary(positions, x.dtype)
        for layer in self.layers:
            x = layer(x, cos, sin, None, mask)
        return self.norm(x)


class OmniVoiceLM(nn.Module):
    """Text and audio ids (B, 8, L) -> audio logits (B, 8, L, audio_vocab_size)."""

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
        """ids (B, 8, L), audio_mask (B, L) bool -> (B, L, C): text embeddings of row 0 where the
        mask is False, the sum over codebooks of each codebook's entry where it is True."""
        text = self.llm.embed_tokens(ids[:, 0, :])  # (B, L, C)
        shifted = ids * audio_mask.unsqueeze(1) + self.codebook_layer_offsets.view(1, -1, 1)  # (B, 8, L)
        audio = self.audio_embeddings(shifted).sum(dim=1)  # (B, 8, L, C) -> (B, L, C)
        return torch.where(audio_mask.unsqueeze(-1), audio, text)

    def forward(self, ids: torch.Tensor, audio_mask: torch.Tensor, attention_mask: torch.Tensor) -> torch.Tensor:
        """-> logits (B, 8, L, V) in float32 (a view of the heads' output, as upstream's)."""
        hidden = self.llm(self.embed(ids, audio_mask), attention_mask)
        b, length, _ = hidden.shape
        logits = self.audio_heads(hidden).view(b, length, self.config.num_audio_codebook, self.config.audio_vocab_size)
        return logits.permute(0, 2, 1, 3).to(torch.float32)  # (B, 8, L, V)
