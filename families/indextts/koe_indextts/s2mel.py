"""IndexTTS 2's semantic-to-mel stage (`s2mel.pth`): GPT latents and semantic codes to a 22.05 kHz mel.

Per text segment upstream's `IndexTTS2.infer` runs, and `S2Mel.segment_mel` runs the same:

    latent   = gpt_layer(gpt_latent)                        (1, N, 1280) -> (1, N, 1024)
    S_infer  = semantic_codec.quantizer.vq2emb(codes)^T + latent        (1, N, 1024)
    cond     = length_regulator(S_infer, ylens=(code_lens * 1.72).long())  (1, frames, C)
    mel      = cfm.inference([prompt_condition, cond], ref_mel, style, 25 steps, cfg 0.7)
               [:, :, ref_mel frames:]                                  (1, 80, frames)

where a voice's `prompt_condition = length_regulator(S_ref, ylens=ref_mel frames)` (`S2Mel.prompt_condition`),
`ref_mel` its `koe_indextts.mel22k` log-mel and `style` its 192-d CAMPPlus embedding. The semantic
codec and CAMPPlus are other modules: here `S_infer` (without the latent) and `style` are inputs.

The length regulator (Seed-VC's `InterpolateRegulator`, continuous content): `content_in_proj`
(Linear in_channels -> C), nearest interpolation of the frames to `ylens.max()`, then per sampling
ratio a Conv1d (k3) / GroupNorm(1) / Mish, a 1x1 Conv1d, and the frames past each length zeroed.
Its discrete-code embeddings (`embedding`, `mask_token`) are in the checkpoint but unused here.

`s2mel.pth` is `{"net": {"cfm": ..., "length_regulator": ..., "gpt_layer": ...}, ...}`;
`load_s2mel` reads it with `torch.load(weights_only=True)` and loads each of the three strictly
(a `module.` prefix, as DDP saves it, is dropped as upstream drops it; other groups of `net` are
not this stage's and are left alone).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .cfm import FlowMatching
from .dit import DiTConfig, sequence_mask
from .mel22k import MelConfig

__all__ = ["GPT_DIM", "LENGTH_RATIO", "LengthRegulator", "RegulatorConfig", "S2Mel", "S2MelConfig", "load_s2mel"]

GPT_DIM = 1280  # upstream's gpt_layer takes the GPT's width, hard-coded
SEMANTIC_DIM = 1024  # and gives the semantic codec's embedding width, hard-coded
LENGTH_RATIO = 1.72  # mel frames per semantic code
GROUPS = ("cfm", "length_regulator", "gpt_layer")


@dataclass(frozen=True)
class RegulatorConfig:
    """`s2mel.length_regulator` (the continuous-content regulator IndexTTS 2 uses)."""

    channels: int
    in_channels: int
    content_codebook_size: int
    sampling_ratios: tuple[int, ...] = (1, 1, 1, 1)

    def __post_init__(self) -> None:
        object.__setattr__(self, "sampling_ratios", tuple(int(r) for r in self.sampling_ratios))
        for name in ("channels", "in_channels", "content_codebook_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
                raise ValueError(f"s2mel length_regulator config: {name} must be a positive int, got {value!r}")

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> RegulatorConfig:
        if not isinstance(data, Mapping):
            raise ValueError("s2mel config: missing the length_regulator section")
        missing = [k for k in ("channels", "in_channels", "content_codebook_size", "sampling_ratios", "is_discrete") if k not in data]
        if missing:
            raise ValueError(f"s2mel length_regulator config: missing {', '.join(missing)}")
        unsupported = {
            "is_discrete": bool(data["is_discrete"]),
            "vector_quantize": bool(data.get("vector_quantize", False)),
            "f0_condition": bool(data.get("f0_condition", False)),
            "n_codebooks > 1": int(data.get("n_codebooks", 1)) > 1,
        }
        for what, on in unsupported.items():
            if on:
                raise ValueError(f"s2mel length_regulator config: {what} is not supported (IndexTTS 2's regulator takes continuous content)")
        return cls(data["channels"], data["in_channels"], data["content_codebook_size"], tuple(data["sampling_ratios"]))


@dataclass(frozen=True)
class S2MelConfig:
    """`config.yaml`'s `s2mel` section: the mel, the length regulator and the estimator."""

    mel: MelConfig
    regulator: RegulatorConfig
    dit: DiTConfig

    def __post_init__(self) -> None:
        if self.regulator.channels != self.dit.content_dim:
            raise ValueError(f"s2mel config: length_regulator.channels ({self.regulator.channels}) must equal DiT.content_dim ({self.dit.content_dim})")
        if self.regulator.in_channels != SEMANTIC_DIM:
            raise ValueError(f"s2mel config: length_regulator.in_channels must be {SEMANTIC_DIM} (gpt_layer's output), got {self.regulator.in_channels}")
        if self.mel.n_mels != self.dit.in_channels:
            raise ValueError(f"s2mel config: n_mels ({self.mel.n_mels}) must equal DiT.in_channels ({self.dit.in_channels})")

    @classmethod
    def from_dict(cls, s2mel: Mapping[str, Any]) -> S2MelConfig:
        if not isinstance(s2mel, Mapping):
            raise ValueError(f"s2mel config must be a mapping, got {type(s2mel).__name__}")
        return cls(MelConfig.from_dict(s2mel.get("preprocess_params")), RegulatorConfig.from_dict(s2mel.get("length_regulator")), DiTConfig.from_dict(s2mel))


class LengthRegulator(nn.Module):
    """Content frames (B, N, in_channels) -> condition (B, max(ylens), channels), zero past each length."""

    def __init__(self, config: RegulatorConfig) -> None:
        super().__init__()
        channels = config.channels
        layers: list[nn.Module] = []
        for _ in config.sampling_ratios:
            layers += [nn.Conv1d(channels, channels, 3, 1, 1), nn.GroupNorm(1, channels), nn.Mish()]
        layers.append(nn.Conv1d(channels, channels, 1, 1))
        self.model = nn.Sequential(*layers)
        self.embedding = nn.Embedding(config.content_codebook_size, channels)  # discrete content: unused
        self.mask_token = nn.Parameter(torch.zeros(1, channels))  # training only
        self.content_in_proj = nn.Linear(config.in_channels, channels)
        self.interpolate = bool(config.sampling_ratios)

    def forward(self, x: torch.Tensor, ylens: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(condition (B, T, C), lengths (B,)); T = max(ylens) (at most N without sampling ratios)."""
        x = self.content_in_proj(x)  # (B, N, C)
        mask = sequence_mask(ylens).unsqueeze(-1)  # (B, T, 1)
        if self.interpolate:
            x = F.interpolate(x.transpose(1, 2).contiguous(), size=int(ylens.max()), mode="nearest")  # (B, C, T)
        else:
            x = x.transpose(1, 2).contiguous()
            mask = mask[:, : x.size(2), :]
            ylens = ylens.clamp(max=x.size(2)).long()
        out = self.model(x).transpose(1, 2).contiguous()
        return out * mask, ylens


class S2Mel(nn.Module):
    """`s2mel.pth`'s modules: `cfm` (flow matching), `length_regulator`, and release 2's `gpt_layer`
    (2.5's has none: `gpt_layer=False`)."""

    def __init__(self, config: S2MelConfig, gpt_layer: bool = True) -> None:
        super().__init__()
        self.config = config
        self.cfm = FlowMatching(config.dit)
        self.length_regulator = LengthRegulator(config.regulator)
        if gpt_layer:
            self.gpt_layer = nn.Sequential(nn.Linear(GPT_DIM, 256), nn.Linear(256, 128), nn.Linear(128, SEMANTIC_DIM))

    @torch.inference_mode()
    def prompt_condition(self, s_ref: torch.Tensor, ref_frames: int) -> torch.Tensor:
        """A voice's condition (1, ref_frames, C) from its semantic features `S_ref` (1, N, 1024),
        stretched to its reference mel's frames."""
        return self.length_regulator(s_ref, torch.LongTensor([ref_frames]).to(s_ref.device))[0]

    @torch.inference_mode()
    def target_condition(self, gpt_latent: torch.Tensor, s_infer: torch.Tensor, code_lens: torch.Tensor) -> torch.Tensor:
        """A segment's condition (B, frames, C): `s_infer` (B, N, 1024) the codes' semantic
        embeddings plus `gpt_layer(gpt_latent)` (B, N, 1280), stretched to `(code_lens * 1.72).long()`."""
        s_infer = s_infer + self.gpt_layer(gpt_latent)
        return self.length_regulator(s_infer, (code_lens * LENGTH_RATIO).long())[0]

    @torch.inference_mode()
    def decode(
        self, prompt_condition: torch.Tensor, condition: torch.Tensor, ref_mel: torch.Tensor, style: torch.Tensor, steps: int = 25, cfg_rate: float = 0.7
    ) -> torch.Tensor:
        """The segment's mel (B, 80, frames): flow matching over [prompt, segment], prompt frames cut."""
        both = torch.cat([prompt_condition, condition], dim=1)
        lengths = torch.LongTensor([both.size(1)]).to(condition.device)
        mel = self.cfm.inference(both, lengths, ref_mel, style, steps, cfg_rate)
        return mel[:, :, ref_mel.size(-1) :]

    def segment_mel(
        self,
        gpt_latent: torch.Tensor,
        s_infer: torch.Tensor,
        code_lens: torch.Tensor,
        prompt_condition: torch.Tensor,
        ref_mel: torch.Tensor,
        style: torch.Tensor,
        steps: int = 25,
        cfg_rate: float = 0.7,
    ) -> torch.Tensor:
        """Upstream's per-segment s2mel in one call (one `torch.randn` from the global generator)."""
        return self.decode(prompt_condition, self.target_condition(gpt_latent, s_infer, code_lens), ref_mel, style, steps, cfg_rate)


def _group(net: Mapping[str, Any], name: str) -> dict[str, torch.Tensor]:
    if name not in net or not isinstance(net[name], Mapping):
        raise ValueError(f"s2mel.pth: net has no {name!r} state (it has {sorted(net)})")
    return {k.removeprefix("module."): v for k, v in net[name].items()}


def load_s2mel(checkpoint: str | os.PathLike | Mapping[str, Any], config: S2MelConfig, device: str | torch.device = "cpu", gpt_layer: bool = True) -> S2Mel:
    """`S2Mel` from `s2mel.pth` (a path, or its loaded dict), each module strictly (2.5's without
    `gpt_layer`: other groups of `net` are left alone, as upstream reads only its modules'); float
    tensors are kept in float32 as upstream's `load_state_dict` copies them into its float32 modules."""
    if not isinstance(checkpoint, Mapping):
        checkpoint = torch.load(checkpoint, map_location="cpu", weights_only=True)
    net = checkpoint.get("net")
    if not isinstance(net, Mapping):
        raise ValueError("s2mel.pth: no `net` mapping of module states")
    state = {}
    for name in GROUPS if gpt_layer else GROUPS[:2]:
        for key, value in _group(net, name).items():
            state[f"{name}.{key}"] = value.to(torch.float32) if value.is_floating_point() else value
    with torch.device("meta"):
        model = S2Mel(config, gpt_layer)
    model.load_state_dict(state, strict=True, assign=True)
    return model.to(device).eval()
