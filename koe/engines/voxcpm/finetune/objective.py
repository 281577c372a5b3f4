"""The training loss of one batch, draw for draw as upstream's `VoxCPM2Model.forward` /
`VoxCPMModel.forward` and `UnifiedCFM.compute_loss` make it, on koe's modules.

A clip becomes one sequence (upstream's `AudioFeatureProcessingPacker`, text-to-speech without a
reference): its token ids, the audio-start token 101, one position per latent patch (the AudioVAE's
latents of the clip padded to whole patches), the audio-end token 102. The text track holds the
ids (zeros under the patches), the feature track the patches (zeros elsewhere); the loss covers
the patches, the stop label is 1 at the last patch. A batch pads every row to the longest with
zeros.

The loss: the base LM reads text embeddings and patch embeddings where each mask says, its
outputs at patch positions go through the scalar quantiser (straight-through in training), the
residual LM reads them (with the patch embeddings), and each position's two states, shifted by
one, condition the DiT on the next patch. Flow matching: per position (batch x time flattened)
a drop of the LM condition (`rand < training_cfg_rate`), a noisy-condition draw (`rand`) and its
noise (`randn`, scaled by the config's `noise_cond_scale`), two log-normal times (`randn` each; the
second is t), a `rand` for mean mode's r != t, then the noise `randn`. The diffusion loss is the
masked mean of the velocity's squared error over the patch frames; the stop loss the masked mean
of the stop head's cross-entropy. Mean-velocity training (a Jacobian-vector product) is not
reproduced: `check_trainable` refuses such a model.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe.engines.voxcpm.audio_vae import AudioVAE
from koe.engines.voxcpm.model import VoxCPMModel

__all__ = ["AUDIO_END", "AUDIO_START", "Losses", "Packed", "encode_clip", "losses", "pack"]

AUDIO_START, AUDIO_END = 101, 102


@dataclass
class Packed:
    """A batch as the model's training forward takes it: (B, T) tracks and (B, T, P, D) patches."""

    text_tokens: torch.Tensor
    text_mask: torch.Tensor
    audio_feats: torch.Tensor
    audio_mask: torch.Tensor
    loss_mask: torch.Tensor
    labels: torch.Tensor


@dataclass
class Losses:
    diff: torch.Tensor
    stop: torch.Tensor


@torch.no_grad()
def encode_clip(vae: AudioVAE, audio: torch.Tensor, patch_size: int) -> torch.Tensor:
    """A clip's float32 samples (n,) -> its latent patches (A, P, D), as upstream's packer makes them:
    the clip padded with zeros to whole patches, encoded alone."""
    patch_samples = vae.config.hop_length * patch_size
    wav = audio.view(1, 1, -1)
    if wav.shape[-1] % patch_samples:
        wav = F.pad(wav, (0, patch_samples - wav.shape[-1] % patch_samples))
    feat = vae.encode(wav, vae.config.sample_rate).transpose(1, 2)  # (1, T', D)
    return feat.reshape(-1, patch_size, feat.shape[-1])


def _row(ids: list[int], patches: torch.Tensor) -> tuple[torch.Tensor, ...]:
    text, audio = len(ids) + 1, patches.shape[0]
    tokens = torch.tensor([*ids, AUDIO_START, *([0] * audio), AUDIO_END], dtype=torch.int32)
    zeros = patches.new_zeros((text, *patches.shape[1:]))
    feats = torch.cat([zeros, patches, zeros[:1]], dim=0)
    text_mask = torch.tensor([1] * text + [0] * audio + [1], dtype=torch.int32)
    audio_mask = torch.tensor([0] * text + [1] * audio + [0], dtype=torch.int32)
    labels = torch.zeros(text + audio + 1, dtype=torch.int32)
    labels[-2] = 1
    return tokens, text_mask, feats, audio_mask, audio_mask.clone(), labels


def pack(rows: list[tuple[list[int], torch.Tensor]], max_length: int) -> Packed:
    """A batch of (token ids, latent patches) -> `Packed`, every row padded with zeros to the
    longest (at most `max_length`)."""
    built = [_row(ids, patches) for ids, patches in rows]
    length = min(max_length, max(r[0].shape[0] for r in built))

    def padded(i: int) -> torch.Tensor:
        out = []
        for r in built:
            x = r[i][:length]
            out.append(torch.cat([x, x.new_zeros((length - x.shape[0], *x.shape[1:]))], dim=0))
        return torch.stack(out)

    return Packed(padded(0), padded(1), padded(2), padded(3), padded(4), padded(5))


def _shifted(x: torch.Tensor) -> torch.Tensor:
    """Each position gets the previous one's value (zeros at the first)."""
    return torch.cat((torch.zeros_like(x[:, 0:1, ...]), x[:, :-1, ...]), dim=1)


def losses(model: VoxCPMModel, batch: Packed, progress: float = 0.0) -> Losses:
    """The diffusion and stop losses of `batch` (see the module doc), drawing from torch's generator."""
    cfg = model.cfg
    dtype = model.stop_proj.weight.dtype
    tokens = batch.text_tokens.to(torch.long)
    text_mask, audio_mask = batch.text_mask.to(dtype).unsqueeze(-1), batch.audio_mask.to(dtype).unsqueeze(-1)
    loss_mask = batch.loss_mask.to(dtype)
    feats = batch.audio_feats.to(dtype)
    b, t, p, d = feats.shape
    feat_embed = model.embed_patches(feats)
    text_embed = model.base_lm.embed_tokens(tokens) * cfg.lm.embedding_scale
    out = model.base_lm(text_mask * text_embed + audio_mask * feat_embed, causal=True)
    out = model.fsq_layer(out) * audio_mask + out * text_mask
    lm_hidden = _shifted(out)
    residual_hidden = _shifted(model.residual_lm(model._residual_input(out, audio_mask * feat_embed), causal=True))
    a, r = model.lm_to_dit_proj(lm_hidden), model.res_to_dit_proj(residual_hidden)
    mu = (torch.cat((a, r), dim=-1) if cfg.v2 else a + r).reshape(b * t, -1)
    x1 = feats.reshape(b * t, p, d).transpose(1, 2).contiguous()
    cond = _shifted(feats).reshape(b * t, p, d).transpose(1, 2).contiguous()
    frames = loss_mask.unsqueeze(-1).repeat(1, 1, p).reshape(b * t, p, 1).transpose(1, 2).contiguous()
    diff = _flow_loss(model, x1, mu, cond, frames, progress)
    logits = model.stop_head(F.silu(model.stop_proj(lm_hidden)))
    stop = F.cross_entropy(logits.transpose(1, 2), batch.labels.to(torch.long), reduction="none")
    stop = (stop * loss_mask).sum() / torch.clamp(loss_mask.sum(), min=1.0)
    return Losses(diff, stop)


def _flow_loss(model: VoxCPMModel, x1: torch.Tensor, mu: torch.Tensor, cond: torch.Tensor, frames: torch.Tensor, progress: float) -> torch.Tensor:
    cfm = model.cfg.cfm
    n = x1.shape[0]
    if cfm.training_cfg_rate > 0:
        mu = mu * (torch.rand(n, device=x1.device) > cfm.training_cfg_rate).view(-1, 1)
    low, high = cfm.noise_cond_prob_range
    noisy = torch.rand(n, device=x1.device) > (1.0 - (low + progress * (high - low)))
    cond = cond + noisy.view(-1, 1, 1) * torch.randn_like(cond) * cfm.noise_cond_scale
    r, t = _times(x1, cfm.t_scheduler)
    z = torch.randn_like(x1)
    y = (1 - t.view(-1, 1, 1)) * x1 + t.view(-1, 1, 1) * z
    velocity = model.feat_decoder.estimator(y, mu, t, cond, t - r)
    errors = F.mse_loss(velocity, (z - x1).detach(), reduction="none").mean(dim=1)
    weights = (1.0 / ((errors + 1e-3).pow(0.0)) * frames.squeeze(1)).detach()  # upstream's adaptive weighting at p = 0
    return (weights * errors).sum() / torch.clamp(torch.sum(frames), min=1.0)


def _times(x: torch.Tensor, scheduler: str) -> tuple[torch.Tensor, torch.Tensor]:
    """(r, t) per row: r = t outside mean mode (its `rand` is drawn all the same)."""
    n = x.shape[0]
    if scheduler == "log-norm":
        r = torch.sigmoid(torch.randn(n, device=x.device, dtype=x.dtype) * 1.0 + -0.4)
        t = torch.sigmoid(torch.randn(n, device=x.device, dtype=x.dtype) * 1.0 + -0.4)
    elif scheduler == "uniform":
        r = torch.rand(n, device=x.device, dtype=x.dtype)
        t = torch.rand(n, device=x.device, dtype=x.dtype)
    else:
        raise ValueError(f"unsupported time scheduler {scheduler!r}")
    apart = torch.rand(n, device=x.device, dtype=x.dtype) < 0.0
    r, t = torch.where(apart, torch.stack([torch.min(r, t), torch.max(r, t)], dim=0), torch.stack([t, t], dim=0))
    return r.squeeze(), t.squeeze()
