"""IndexTTS 2.5's semantic codec: upstream's `EnhancedCodec` (`codec.pth`), 25 codes a second.

Release 2.5 replaces MaskGCT's codec with its own, of the same build: a strided conv and GELU that
halve w2v-BERT's 50 Hz frames, a Vocos ConvNeXt encoder and a linear layer, one residual stack of
factorised vector quantizers, and a decoder (Vocos backbone and linear) followed by a nearest
doubling in time and a conv. Upstream's `infer` calls `decode(codes)` on the GPT's codes (the
frames `S_infer` that s2mel's length regulator reads, back at 50 Hz); `quantize(frames)` is its
`get_scode`, defined but not called. koe builds it from `SemanticCodec`'s blocks (the parameter
names are the same) and adds `decode`.

The `semantic_codec:` section of 2.5's config.yaml (no released config.yaml is in upstream's
repository) was derived from upstream's classes:

- keys: `EnhancedCodec(**cfg.semantic_codec, cfg=cfg.semantic_codec)` takes `codebook_size`,
  `hidden_size`, `codebook_dim`, `vocos_dim`, `vocos_intermediate_dim`, `vocos_num_layers`,
  `num_quantizers` and `downsample_scale`; each is read on its own (unlike RepCodec, which reads the
  Vocos inner width and depth only when `vocos_dim` is there); a key absent keeps the default.
  Another key would be a TypeError upstream (the section is also passed as keyword arguments).
- values, the class's defaults, which the rest of 2.5 confirms where it can: `hidden_size` 1024
  (w2v-BERT's width: s2mel's length regulator reads `decode`'s frames and the reference's w2v-BERT
  frames alike), `num_quantizers` 1 (infer passes the GPT's `(1, T)` codes, which `decode` reads as
  one stage), `downsample_scale` 2 (infer sizes the mel as `decode`'s frames x 1.72, 22050 / 256 /
  50: `decode` gives 50 Hz frames from the codes, so the codes are 25 Hz), `codebook_size` 8192
  (the GPT's stop code is 8193), and `codebook_dim` 8 with Vocos 384 / 2048 / 12 (nothing else
  in the code fixes them; `codec.pth`'s shapes will: koe's strict load names any that differ).
  So: `{codebook_size: 8192, hidden_size: 1024, codebook_dim: 8, vocos_dim: 384,
  vocos_intermediate_dim: 2048, vocos_num_layers: 12, num_quantizers: 1, downsample_scale: 2}`.

`codec.pth` is a pickled dict whose `model` entry is the state dict under upstream's names
(`load_checkpoint` reads only `checkpoint["model"]`); koe reads it with `weights_only=True` and
loads it strictly, where upstream keeps its random initialisation, with a warning, for a missing
or misshapen key and ignores an unexpected one.

Upstream never puts this codec in eval mode, so its quantizer runs in training mode: each
`quantize` draws one `torch.randint(1, N + 1, (batch,))` from the global CPU generator (quantizer
dropout at rate 0, which changes no value). koe's `quantize` makes the same draw, so a seeded
request stays in step. `decode` draws nothing. Upstream's `decode` has no output without
downsampling (`downsample_scale` <= 1 leaves its result unset): koe refuses that with a message.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe_indextts.config25 import CODEC_FILE
from koe_indextts.semantic_codec import SemanticCodec, SemanticCodecConfig

__all__ = ["CODEC_FILE", "Codec25", "Codec25Config", "load_codec25", "read_codec25"]

_KEYS = ("codebook_size", "hidden_size", "codebook_dim", "vocos_dim", "vocos_intermediate_dim", "vocos_num_layers", "num_quantizers", "downsample_scale")


@dataclass(frozen=True)
class Codec25Config(SemanticCodecConfig):
    """config.yaml's `semantic_codec` section for 2.5 (EnhancedCodec's defaults where a key is absent)."""

    downsample_scale: int = 2

    @classmethod
    def from_dict(cls, section: dict) -> Codec25Config:
        """As EnhancedCodec reads its cfg: every key on its own; `downsample_scale: null` means none."""
        section = dict(section or {})
        unknown = sorted(set(section) - set(_KEYS))
        if unknown:
            raise ValueError(f"semantic_codec: unknown keys {unknown} (EnhancedCodec takes {list(_KEYS)})")
        values = {k: section[k] for k in _KEYS if k in section}
        if values.get("downsample_scale", 2) is None:
            values["downsample_scale"] = 1
        missing = [k for k, v in values.items() if v is None]
        if missing:
            raise ValueError(f"semantic_codec: {missing} must be numbers, not null")
        config = cls(**{k: int(v) for k, v in values.items()})
        if min(config.codebook_size, config.hidden_size, config.codebook_dim, config.vocos_dim, config.vocos_intermediate_dim, config.num_quantizers) < 1:
            raise ValueError(f"semantic_codec: sizes must be positive, got {config}")
        return config


class Codec25(SemanticCodec):
    """EnhancedCodec under the checkpoint's names: `quantize` (as upstream, its draw included) and `decode`."""

    config: Codec25Config

    def __init__(self, config: Codec25Config = Codec25Config()) -> None:
        super().__init__(config)

    @torch.no_grad()
    def quantize(self, frames: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(B, T, D) w2v-BERT frames -> (codes, quantized (B, T', D)): codes (B, T') for one quantizer,
        (N, B, T') for N; T' = ceil(T / 2) with downsampling. Draws as upstream's training-mode
        quantizer does (see the module's docstring)."""
        codes, quantized = super().quantize(frames)
        torch.randint(1, self.config.num_quantizers + 1, (frames.shape[0],))  # upstream's dropout draw, unused
        return codes, quantized

    @torch.no_grad()
    def decode(self, codes: torch.Tensor) -> torch.Tensor:
        """Codes (B, T) (one quantizer) or stage-major (N, B, T) -> frames (B, 2T, D)."""
        if self.config.downsample_scale <= 1:
            raise ValueError("codec decode needs downsample_scale > 1: upstream's EnhancedCodec.decode gives no output without it")
        if codes.dim() == 2:
            codes = codes.unsqueeze(0)  # (1, B, T)
        stages = self.config.num_quantizers
        if codes.dim() != 3 or codes.shape[0] < stages:
            raise ValueError(f"codec decode takes codes (B, T) for one quantizer or (N, B, T) with N >= {stages}, got shape {tuple(codes.shape)}")
        if codes.is_floating_point() or codes.dtype == torch.bool:
            raise ValueError(f"codec decode takes integer codes, got {codes.dtype}")
        used = codes[:stages]
        if used.numel() and (int(used.min()) < 0 or int(used.max()) >= self.config.codebook_size):
            raise ValueError(
                f"codec decode: codes must lie in [0, {self.config.codebook_size}), got {int(used.min())}..{int(used.max())} (strip the GPT's stop code first)"
            )
        x = self.decoder(self.quantizer.vq2emb(codes))  # (B, T, D)
        x = F.interpolate(x.transpose(1, 2), scale_factor=2, mode="nearest")  # (B, D, 2T)
        return self.up(x).transpose(1, 2)


def load_codec25(state: dict[str, torch.Tensor], config: Codec25Config, *, source: str = CODEC_FILE) -> Codec25:
    """The codec from `codec.pth`'s `model` state, strictly: a missing, unexpected or misshapen key
    is a ValueError naming it. Tensors are copied as float32, as upstream's `load_state_dict` does."""
    with torch.device("meta"):
        codec = Codec25(config)
    own = codec.state_dict()
    missing = [k for k in own if k not in state]
    unexpected = [k for k in state if k not in own]
    shapes = [f"{k} {tuple(state[k].shape)} (expected {tuple(v.shape)})" for k, v in own.items() if k in state and tuple(state[k].shape) != tuple(v.shape)]
    problems = []
    if missing:
        problems.append(f"missing keys {missing}")
    if unexpected:
        problems.append(f"unexpected keys {unexpected}")
    if shapes:
        problems.append(f"wrong shapes: {'; '.join(shapes)}")
    if problems:
        raise ValueError(f"{source}: not a codec for this semantic_codec config: {', '.join(problems)}")
    not_tensors = [k for k in own if not isinstance(state[k], torch.Tensor) or not state[k].is_floating_point()]
    if not_tensors:
        raise ValueError(f"{source}: {not_tensors} must be floating-point tensors")
    codec.load_state_dict({k: state[k].to(dtype=v.dtype, device="cpu").contiguous() for k, v in own.items()}, strict=True, assign=True)
    return codec.eval()


def read_codec25(path: str | os.PathLike, config: Codec25Config) -> Codec25:
    """`load_codec25` from a `codec.pth` file (a dict with the state under `model`), read with `weights_only=True`."""
    path = str(path)
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path}: no codec checkpoint (release 2.5's {CODEC_FILE})")
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # a truncated file, or one that needs code to unpickle
        raise ValueError(f"{path}: not a readable codec checkpoint ({type(e).__name__}: {e})") from e
    if not isinstance(checkpoint, dict) or not isinstance(checkpoint.get("model"), dict):
        keys = sorted(checkpoint)[:8] if isinstance(checkpoint, dict) else type(checkpoint).__name__
        raise ValueError(f"{path}: a codec checkpoint holds its state dict under 'model' (upstream's load_checkpoint reads checkpoint['model']); found {keys}")
    return load_codec25(checkpoint["model"], config, source=path)
