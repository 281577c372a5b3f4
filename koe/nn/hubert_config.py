"""HuBERT's sizes (transformers' `HubertConfig`), torch-free: OmniVoice's config reads its tokenizer's
semantic model into it while describing a folder, without loading torch; `koe.nn.hubert` builds the
model from it."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["HubertConfig"]


@dataclass(frozen=True)
class HubertConfig:
    """HuBERT's sizes (transformers' `HubertConfig` fields and defaults, HuBERT base)."""

    hidden_size: int = 768
    intermediate_size: int = 3072
    num_hidden_layers: int = 12
    num_attention_heads: int = 12
    conv_dim: tuple[int, ...] = (512, 512, 512, 512, 512, 512, 512)
    conv_kernel: tuple[int, ...] = (10, 3, 3, 3, 3, 2, 2)
    conv_stride: tuple[int, ...] = (5, 2, 2, 2, 2, 2, 2)
    conv_bias: bool = False
    feat_extract_norm: str = "group"
    num_conv_pos_embeddings: int = 128
    num_conv_pos_embedding_groups: int = 16
    layer_norm_eps: float = 1e-5
    do_stable_layer_norm: bool = False
    feat_proj_layer_norm: bool = True
