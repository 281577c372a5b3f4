"""The VoxCPM language-and-diffusion model (everything but the AudioVAE), named as the release.

Text tokens and latent patches go in as one sequence; the base LM (MiniCPM-4) reads it, its
outputs at audio positions pass the scalar quantiser, the residual LM reads those (plus the
patch embeddings: a sum in VoxCPM 1.5, a fusion projection in VoxCPM2), and the two last states
condition the local DiT, which samples the next patch. The stop head reads the base LM's state.
`prefill` and `step` are the two halves of the autoregressive loop in `koe.engines.voxcpm.generate`.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.voxcpm.cfm import sample_patch
from koe.engines.voxcpm.config import VoxCPMConfig
from koe.engines.voxcpm.local import LocalDiT, LocalEncoder, ScalarQuantizer
from koe.engines.voxcpm.minicpm import KVCache, MiniCPM

__all__ = ["LoopState", "VoxCPMModel"]


class FlowDecoder(nn.Module):
    """Holds the DiT as upstream's `UnifiedCFM` does (`feat_decoder.estimator.*`)."""

    def __init__(self, estimator: LocalDiT) -> None:
        super().__init__()
        self.estimator = estimator


@dataclass
class LoopState:
    """What the next step needs: the two LMs' last states, their caches, the previous patch."""

    lm_hidden: torch.Tensor  # (B, H)
    residual_hidden: torch.Tensor  # (B, H)
    lm_cache: KVCache
    residual_cache: KVCache
    previous: torch.Tensor  # (B, P, D): the DiT's condition


class VoxCPMModel(nn.Module):
    def __init__(self, cfg: VoxCPMConfig) -> None:
        super().__init__()
        self.cfg = cfg
        h = cfg.lm.hidden_size
        self.base_lm = MiniCPM(cfg.lm)
        self.residual_lm = MiniCPM(cfg.residual_lm)
        self.feat_encoder = LocalEncoder(cfg.encoder_lm, cfg.feat_dim)
        self.feat_decoder = FlowDecoder(LocalDiT(cfg.dit_lm, cfg.feat_dim, cfg.v2))
        self.fsq_layer = ScalarQuantizer(h, cfg.scalar_quantization_latent_dim, cfg.scalar_quantization_scale)
        self.enc_to_lm_proj = nn.Linear(cfg.encoder.hidden_dim, h)
        self.lm_to_dit_proj = nn.Linear(h, cfg.dit.hidden_dim)
        self.res_to_dit_proj = nn.Linear(h, cfg.dit.hidden_dim)
        if cfg.v2:
            self.fusion_concat_proj = nn.Linear(2 * h, h)
        self.stop_proj = nn.Linear(h, h)
        self.stop_head = nn.Linear(h, 2, bias=False)

    @staticmethod
    def checkpoint_name(name: str) -> str:
        """A pickled checkpoint may wrap its tensors in `state_dict` (upstream reads it so)."""
        return name.removeprefix("state_dict.")

    def embed_patches(self, feat: torch.Tensor) -> torch.Tensor:
        """(B, T, P, D) latent patches -> (B, T, H) in the LM's width."""
        return self.enc_to_lm_proj(self.feat_encoder(feat))

    def _residual_input(self, lm_out: torch.Tensor, patch_embed: torch.Tensor) -> torch.Tensor:
        if self.cfg.v2:
            return self.fusion_concat_proj(torch.cat((lm_out, patch_embed), dim=-1))
        return lm_out + patch_embed

    def prefill(self, tokens: torch.Tensor, text_mask: torch.Tensor, feat: torch.Tensor, feat_mask: torch.Tensor, capacity: int) -> LoopState:
        """Read the whole prompt sequence (tokens (B, T), masks (B, T), feat (B, T, P, D));
        caches hold `capacity` positions (the prompt's and the patches to come)."""
        feat_embed = self.embed_patches(feat)
        text_embed = self.base_lm.embed_tokens(tokens) * self.cfg.lm.embedding_scale
        combined = text_mask.unsqueeze(-1) * text_embed + feat_mask.unsqueeze(-1) * feat_embed
        lm_cache, residual_cache = self.base_lm.new_cache(capacity, tokens.shape[0]), self.residual_lm.new_cache(capacity, tokens.shape[0])
        out = self.base_lm(combined, causal=True, cache=lm_cache)
        out = self.fsq_layer(out) * feat_mask.unsqueeze(-1) + out * text_mask.unsqueeze(-1)
        residual = self.residual_lm(self._residual_input(out, feat_mask.unsqueeze(-1) * feat_embed), causal=True, cache=residual_cache)
        return LoopState(out[:, -1, :], residual[:, -1, :], lm_cache, residual_cache, feat[:, -1, ...])

    def dit_condition(self, state: LoopState) -> torch.Tensor:
        a, b = self.lm_to_dit_proj(state.lm_hidden), self.res_to_dit_proj(state.residual_hidden)
        return torch.cat((a, b), dim=-1) if self.cfg.v2 else a + b

    def next_patch(self, state: LoopState, steps: int, cfg_value: float, generator: torch.Generator | None = None) -> torch.Tensor:
        """The DiT's next patch (B, P, D), conditioned on the LM states and the previous patch."""
        cond = state.previous.transpose(1, 2).contiguous()
        patch = sample_patch(
            self.feat_decoder.estimator, self.dit_condition(state), cond, self.cfg.patch_size, steps, cfg_value, self.cfg.dit_mean_mode, generator
        )
        return patch.transpose(1, 2)

    def stops(self, state: LoopState) -> bool:
        """The stop head's verdict on the base LM's current state (batch item 0, as upstream reads it)."""
        logits = self.stop_head(F.silu(self.stop_proj(state.lm_hidden)))
        return int(logits.argmax(dim=-1)[0].item()) == 1

    def step(self, state: LoopState, patch: torch.Tensor) -> None:
        """Feed the patch just made (B, P, D) to both LMs; `state` moves on by one position."""
        embed = self.embed_patches(patch.unsqueeze(1))[:, 0, :]
        lm_hidden = self.fsq_layer(self.base_lm.step(embed, state.lm_cache))
        state.residual_hidden = self.residual_lm.step(self._residual_input(lm_hidden, embed), state.residual_cache)
        state.lm_hidden = lm_hidden
        state.previous = patch
