"""F5-TTS's DiT: text embedding (+ ConvNeXt-V2 blocks), input embedding, AdaLN-zero blocks.

`F5Model.transformer` is the DiT, with the released checkpoint's names under `transformer.`
(the checkpoint stores them under `ema_model.transformer.`). Inference runs one text at a time
(as upstream's `infer_batch_process` does), so there is no padding mask: cond and uncond run as
one batch of two when classifier-free guidance is on.
"""

from __future__ import annotations

import torch
from torch import nn
from torch.utils.checkpoint import checkpoint

from koe.engines.f5_tts.config import F5Config
from koe.nn.dit import AdaLayerNormFinal, ConvNeXtV2Block, DiTBlock, InputEmbedding, RotaryFrequencies, TimestepEmbedding, text_position_table

__all__ = ["DiT", "F5Model"]

_TEXT_POSITIONS = 8192  # upstream's precomputed text positions (~87 s of 24 kHz audio)


class TextEmbedding(nn.Module):
    """Token ids (B, nt) -> (B, n, text_dim) for n mel frames: ids + 1 (0 = filler), cut or padded to
    n, embedded, positions added, ConvNeXt-V2 blocks (padding masked to zero when `mask_padding`)."""

    def __init__(self, vocab_size: int, dim: int, mask_padding: bool, conv_layers: int) -> None:
        super().__init__()
        self.text_embed = nn.Embedding(vocab_size + 1, dim)
        self.mask_padding = mask_padding
        self.text_blocks = nn.Sequential(*[ConvNeXtV2Block(dim, dim * 2) for _ in range(conv_layers)])
        self.register_buffer("freqs_cis", text_position_table(dim, _TEXT_POSITIONS) if conv_layers else None, persistent=False)

    def forward(self, text: torch.Tensor, frames: int, drop_text: bool = False, lens: torch.Tensor | None = None) -> torch.Tensor:
        """`lens` (B,): each row's real frames in a padded training batch (positions past them are
        filler, their embeddings and positions zeroed, as upstream's training forward does)."""
        text = text + 1
        text = text[:, :frames]
        text = nn.functional.pad(text, (0, frames - text.shape[1]), value=0)
        valid = None
        if lens is not None:
            valid = torch.arange(frames, device=text.device).unsqueeze(0) < lens.unsqueeze(1)
            text = text.masked_fill(~valid, 0)
        padding = text == 0
        if drop_text:
            text = torch.zeros_like(text)
        x = self.text_embed(text)
        if valid is not None:
            x = x.masked_fill(~valid.unsqueeze(-1), 0.0)
        if len(self.text_blocks):
            positions = self.freqs_cis[:frames, :]
            x = x + (positions if valid is None else positions.unsqueeze(0) * valid.unsqueeze(-1).to(positions.dtype))
            if self.mask_padding:
                keep = padding.unsqueeze(-1).expand(-1, -1, x.size(-1))
                x = x.masked_fill(keep, 0.0)
                for block in self.text_blocks:
                    x = block(x).masked_fill(keep, 0.0)
            else:
                x = self.text_blocks(x)
        return x


class DiT(nn.Module):
    def __init__(self, cfg: F5Config, vocab_size: int) -> None:
        super().__init__()
        self.config = cfg
        mel = cfg.mel.n_mels
        self.time_embed = TimestepEmbedding(cfg.dim)
        self.text_embed = TextEmbedding(vocab_size, cfg.text_width, cfg.text_mask_padding, cfg.conv_layers)
        self.input_embed = InputEmbedding(mel, cfg.text_width, cfg.dim)
        self.rotary_embed = RotaryFrequencies(cfg.dim_head)
        self.transformer_blocks = nn.ModuleList(
            [DiTBlock(cfg.dim, cfg.heads, cfg.dim_head, cfg.ff_mult, cfg.qk_norm, cfg.pe_attn_head, dropout=cfg.dropout) for _ in range(cfg.depth)]
        )
        self.long_skip_connection = nn.Linear(cfg.dim * 2, cfg.dim, bias=False) if cfg.long_skip_connection else None
        self.norm_out = AdaLayerNormFinal(cfg.dim)
        self.proj_out = nn.Linear(cfg.dim, mel)

    def embed_text(self, text: torch.Tensor, frames: int, guided: bool) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Text embeddings for the whole sampling run: (cond, uncond or None). Fixed over the ODE steps."""
        cond = self.text_embed(text, frames)
        return cond, (self.text_embed(text, frames, drop_text=True) if guided else None)

    def forward(self, x: torch.Tensor, cond: torch.Tensor, time: torch.Tensor, text_cond: torch.Tensor, text_uncond: torch.Tensor | None) -> torch.Tensor:
        """One velocity prediction. x, cond (1, n, mels); time 0-d; with `text_uncond` the batch is
        [cond, uncond] (audio and text dropped) and the output (2, n, mels)."""
        t = self.time_embed(time.repeat(x.shape[0]))
        h = self.input_embed(x, cond, text_cond)
        if text_uncond is not None:
            h = torch.cat((h, self.input_embed(x, cond, text_uncond, drop_cond=True)), dim=0)
            t = torch.cat((t, t), dim=0)
        return self._transform(h, t)

    def forward_batch(
        self,
        x: torch.Tensor,
        cond: torch.Tensor,
        text: torch.Tensor,
        time: torch.Tensor,
        mask: torch.Tensor,
        drop_audio_cond: bool,
        drop_text: bool,
        checkpointed: bool = False,
    ) -> torch.Tensor:
        """One velocity prediction for a padded training batch: x, cond (B, n, mels), text (B, nt)
        ids (-1 past each row's end), time (B,), mask (B, n) True on real frames; audio and text
        conditions dropped for the whole batch as asked (upstream's training forward).
        `checkpointed`: each block's activations recomputed in the backward pass instead of kept
        (upstream's `checkpoint_activations`; the dropout draws are replayed: the same bits)."""
        t = self.time_embed(time)
        text_embed = self.text_embed(text, x.shape[1], drop_text=drop_text, lens=mask.sum(dim=1))
        h = self.input_embed(x, cond, text_embed, drop_cond=drop_audio_cond, mask=mask)
        return self._transform(h, t, mask, checkpointed)

    def _transform(self, h: torch.Tensor, t: torch.Tensor, mask: torch.Tensor | None = None, checkpointed: bool = False) -> torch.Tensor:
        """The input embedding `h` (B, n, dim) through the blocks, the long skip and the output
        projection, conditioned on the time embedding `t` (B, dim)."""
        rope = self.rotary_embed(h.shape[1])
        residual = h
        for block in self.transformer_blocks:
            h = checkpoint(block, h, t, rope, mask, use_reentrant=False) if checkpointed else block(h, t, rope, mask)
        if self.long_skip_connection is not None:
            h = self.long_skip_connection(torch.cat((h, residual), dim=-1))
        return self.proj_out(self.norm_out(h, t))


class F5Model(nn.Module):
    """The checkpoint's root (`transformer.*`); the mel front end and sampler live outside it."""

    def __init__(self, cfg: F5Config, vocab_size: int) -> None:
        super().__init__()
        self.transformer = DiT(cfg, vocab_size)

    @staticmethod
    def checkpoint_name(key: str) -> str | None:
        """A released checkpoint's tensor name -> this module's, or None to skip it.

        EMA weights are read (`ema_model.` prefix; for `.pt` checkpoints the `ema_model_state_dict.`
        dict); EMA counters (`initted`, `step`), old mel buffers and the training weights are skipped.
        """
        if key.startswith(("model_state_dict.", "optimizer_state_dict.", "scheduler_state_dict.")):
            return None
        key = key.removeprefix("ema_model_state_dict.").removeprefix("ema_model.")
        if key in ("initted", "step") or key.startswith("mel_spec."):
            return None
        return key
