"""IndexTTS 2's semantic features: a voice clip through w2v-BERT 2.0 to the normalised layer-17 frames.

Upstream (release 2's `IndexTTS2`) reads a speaker clip with `librosa.load` (mono, 22.05 kHz; the
emotion clip at 16 kHz) and keeps 15 s of it, brings the speaker clip to 16 kHz with
`torchaudio.transforms.Resample`, makes features with transformers' `SeamlessM4TFeatureExtractor`
(numpy: Kaldi-style 80-bin log-mel fbank, per-bin standardisation, frames stacked by 2 into 160-dim
vectors and an attention mask), runs transformers' `Wav2Vec2BertModel` with every hidden state and
keeps `hidden_states[17]` (the input of layer 17, i.e. the output of the first 17 layers), then
subtracts the release's mean and divides by the square root of its variance (`w2v_stat`).

koe does the same ops in the same order and shapes, without transformers:
- `load_clip`: koe's decoder and `koe.audio.resample.resample` (librosa's soxr_hq call), cut at 15 s;
- `to_semantic_rate`: `koe.audio.sinc_resample.resample_sinc` (the Resample transform);
- `fbank` / `extract_features`: the feature extractor's numpy math with the same array layouts (its
  mean and variance reduce a Fortran-ordered array, and the mel matmul is the same float64 `np.dot`);
- `W2VBert`: the Conformer encoder with relative-key attention, parameter names those of the hub's
  `facebook/w2v-bert-2.0` `model.safetensors`, config from its `config.json`. It runs only the
  layers up to the one read, but draws one `torch.rand([])` from torch's global (CPU) generator per
  layer of the config, as transformers' encoder does for LayerDrop even in eval (the draws decide
  nothing in eval; they move the generator, so every later sample depends on their count).
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass, fields
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from koe.audio.errors import AudioError
from koe.audio.io import load_audio
from koe.audio.resample import resample
from koe.audio.sinc_resample import resample_sinc

__all__ = [
    "EMOTION_RATE",
    "MAX_CLIP_SECONDS",
    "OUTPUT_LAYER",
    "SAMPLE_RATE",
    "SPEAKER_RATE",
    "FeatureConfig",
    "SemanticStats",
    "W2VBert",
    "W2VBertConfig",
    "extract_features",
    "fbank",
    "load_clip",
    "load_stats",
    "load_w2vbert",
    "mel_filters",
    "povey_window",
    "semantic_features",
    "to_semantic_rate",
]

SAMPLE_RATE = 16_000  # w2v-BERT's rate
SPEAKER_RATE = 22_050  # librosa.load's default rate: the speaker clip is read at it
EMOTION_RATE = 16_000  # the emotion clip is read straight at w2v-BERT's rate
MAX_CLIP_SECONDS = 15  # upstream keeps the first 15 s of a clip (at the rate it was read at)
OUTPUT_LAYER = 17  # hidden_states[17]: the input of layer 17

FRAME_LENGTH = 400  # 25 ms at 16 kHz
HOP_LENGTH = 160  # 10 ms
FFT_LENGTH = 512
PREEMPHASIS = 0.97
MEL_FLOOR = 1.192092955078125e-07  # float32 eps
PCM_SCALE = 2**15  # Kaldi works on 16-bit integer amplitudes


# --------------------------------------------------------------------------- clips


def load_clip(source, sample_rate: int = SPEAKER_RATE, max_seconds: float = MAX_CLIP_SECONDS) -> torch.Tensor:
    """A clip as upstream's `_load_and_cut_audio` gives it: float32 `(1, n)` mono at `sample_rate`
    (librosa.load: libsndfile's float32 samples, channels averaged, soxr_hq to the rate), at most
    `max_seconds * sample_rate` samples. `source`: a path, file bytes, or `(samples, rate)`."""
    y, rate = load_audio(source)
    y = resample(y, rate, sample_rate)
    audio = torch.from_numpy(np.ascontiguousarray(y, dtype=np.float32)).unsqueeze(0)
    return audio[:, : int(max_seconds * sample_rate)]


def to_semantic_rate(audio: torch.Tensor, sample_rate: int) -> torch.Tensor:
    """`(1, n)` audio at `sample_rate` -> 16 kHz (`torchaudio.transforms.Resample(sample_rate, 16000)`)."""
    return resample_sinc(audio, sample_rate, SAMPLE_RATE)


# --------------------------------------------------------------------------- features


@dataclass(frozen=True)
class FeatureConfig:
    """The feature extractor's settings (the hub's `preprocessor_config.json`; w2v-bert-2.0's pads with 1)."""

    feature_size: int = 80
    sampling_rate: int = SAMPLE_RATE
    num_mel_bins: int = 80
    padding_value: float = 1.0
    stride: int = 2
    padding_side: str = "right"

    @classmethod
    def from_dict(cls, raw: dict) -> FeatureConfig:
        known = {f.name for f in fields(cls)}
        config = cls(**{k: v for k, v in raw.items() if k in known})
        if config.sampling_rate != SAMPLE_RATE or config.padding_side != "right" or config.stride < 1:
            raise ValueError(f"koe runs w2v-BERT's features at 16 kHz, padded on the right: got {config}")
        return config

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> FeatureConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))


def _kaldi_mel(freq):
    return 1127.0 * np.log(1.0 + freq / 700.0)


def mel_filters(num_mel_bins: int = 80, sample_rate: int = SAMPLE_RATE) -> np.ndarray:
    """`(257, num_mel_bins)` float64 triangles on the Kaldi mel scale from 20 Hz to Nyquist, drawn in
    mel space (as torchaudio's Kaldi fbank draws them)."""
    bins = FFT_LENGTH // 2 + 1
    edges = np.linspace(_kaldi_mel(20), _kaldi_mel(sample_rate // 2), num_mel_bins + 2)  # (M + 2,)
    bin_mels = _kaldi_mel(sample_rate / ((bins - 1) * 2) * np.arange(bins))  # (257,)
    widths = np.diff(edges)
    offsets = np.expand_dims(edges, 0) - np.expand_dims(bin_mels, 1)  # (257, M + 2)
    rising = -offsets[:, :-2] / widths[:-1]
    falling = offsets[:, 2:] / widths[1:]
    return np.maximum(np.zeros(1), np.minimum(rising, falling))


def povey_window() -> np.ndarray:
    """Kaldi's Povey window, 400 samples (a symmetric Hann window to the power 0.85), float64."""
    return np.power(np.hanning(FRAME_LENGTH), 0.85)


def fbank(samples: np.ndarray, num_mel_bins: int = 80) -> np.ndarray:
    """Log-mel fbank of 16 kHz float samples `(n,)` in [-1, 1] -> float32 `(frames, num_mel_bins)`,
    a transposed view of a `(num_mel_bins, frames)` array (the layout the standardisation reads).

    Frames of 400 samples every 160 (no centring), each: DC offset removed, pre-emphasis 0.97,
    Povey window, 512-point FFT (rounded to complex64), power, mel, floor, natural log."""
    wave = np.asarray(samples) * PCM_SCALE  # float32
    frames = 1 + (wave.size - FRAME_LENGTH) // HOP_LENGTH if wave.size >= FRAME_LENGTH else 0
    if frames < 1:
        raise AudioError(f"the clip is too short for w2v-BERT's features: {wave.size} samples at 16 kHz, {FRAME_LENGTH} are needed")
    wave = wave.astype(np.float64)
    starts = np.arange(frames)[:, None] * HOP_LENGTH
    buffer = np.zeros((frames, FFT_LENGTH))
    buffer[:, :FRAME_LENGTH] = wave[starts + np.arange(FRAME_LENGTH)]
    frame = buffer[:, :FRAME_LENGTH]
    frame -= frame.mean(axis=1, keepdims=True)
    frame[:, 1:] -= PREEMPHASIS * frame[:, :-1]
    frame[:, 0] *= 1 - PREEMPHASIS
    frame *= povey_window()
    spectrum = np.fft.rfft(buffer, axis=-1).astype(np.complex64)  # (frames, 257)
    power = np.abs(spectrum, dtype=np.float64) ** 2.0
    mel = np.maximum(MEL_FLOOR, np.dot(mel_filters(num_mel_bins).T, power.T))  # (M, frames)
    return np.asarray(np.log(mel), np.float32).T


def extract_features(audio: torch.Tensor | np.ndarray, config: FeatureConfig = FeatureConfig()) -> tuple[torch.Tensor, torch.Tensor]:
    """16 kHz audio `(1, n)` (its first row is read) or `(n,)` -> `(input_features (1, T, 160) float32,
    attention_mask (1, T) int32)`, as `SeamlessM4TFeatureExtractor(audio, sampling_rate=16000,
    return_tensors="pt")` returns them for one clip."""
    wave = np.asarray(audio.detach().cpu() if isinstance(audio, torch.Tensor) else audio, dtype=np.float32)
    if wave.ndim == 2:
        wave = wave[0]
    if wave.ndim != 1:
        raise AudioError(f"w2v-BERT's features need (1, n) or (n,) audio, got shape {wave.shape}")
    x = fbank(np.squeeze(wave), config.num_mel_bins)  # (frames, M)
    if x.shape[0] < 2:
        raise AudioError(f"the clip is too short for w2v-BERT's features: {x.shape[0]} frame, 2 are needed")
    x = (x - np.expand_dims(x.mean(0), 0)) / np.sqrt(np.expand_dims(x.var(0, ddof=1), 0) + 1e-7)
    frames = x.shape[0]
    padded = -(-frames // config.stride) * config.stride
    mask = np.ones(frames, dtype=np.int32)
    if padded > frames:
        x = np.pad(x, ((0, padded - frames), (0, 0)), "constant", constant_values=config.padding_value)
        mask = np.pad(mask, (0, padded - frames))
    stacked = np.reshape(x[None], (1, padded // config.stride, x.shape[1] * config.stride))
    mask = mask[None, np.arange(padded) % config.stride == 1]
    return torch.from_numpy(np.ascontiguousarray(stacked)), torch.from_numpy(np.ascontiguousarray(mask))


# --------------------------------------------------------------------------- the encoder


@dataclass(frozen=True)
class W2VBertConfig:
    """The `config.json` keys the encoder's shape depends on (transformers' defaults are w2v-bert-2.0's)."""

    hidden_size: int = 1024
    num_hidden_layers: int = 24
    num_attention_heads: int = 16
    intermediate_size: int = 4096
    feature_projection_input_dim: int = 160
    hidden_act: str = "swish"
    layer_norm_eps: float = 1e-5
    position_embeddings_type: str = "relative_key"
    left_max_position_embeddings: int = 64
    right_max_position_embeddings: int = 8
    conv_depthwise_kernel_size: int = 31
    mask_time_prob: float = 0.05
    mask_feature_prob: float = 0.0
    add_adapter: bool = False
    use_intermediate_ffn_before_adapter: bool = False

    def __post_init__(self) -> None:
        if self.hidden_act not in ("swish", "silu"):
            raise ValueError(f"w2v-BERT: koe runs the swish activation, not {self.hidden_act!r}")
        if self.position_embeddings_type != "relative_key":
            raise ValueError(f"w2v-BERT: koe runs relative-key attention, not {self.position_embeddings_type!r}")
        if self.add_adapter or self.use_intermediate_ffn_before_adapter:
            raise ValueError("w2v-BERT: an adapter or an intermediate FFN is not supported (w2v-bert-2.0 has neither)")
        if self.hidden_size % self.num_attention_heads:
            raise ValueError(f"w2v-BERT: width {self.hidden_size} is not a multiple of {self.num_attention_heads} heads")
        if self.conv_depthwise_kernel_size % 2 != 1:
            raise ValueError("w2v-BERT: the depthwise kernel size must be odd")

    @property
    def has_mask_embedding(self) -> bool:
        return self.mask_time_prob > 0.0 or self.mask_feature_prob > 0.0

    @classmethod
    def from_dict(cls, raw: dict) -> W2VBertConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in raw.items() if k in known})

    @classmethod
    def from_json(cls, path: str | os.PathLike) -> W2VBertConfig:
        return cls.from_dict(json.loads(Path(path).read_text()))


class FeatureProjection(nn.Module):
    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        self.layer_norm = nn.LayerNorm(config.feature_projection_input_dim, eps=config.layer_norm_eps)
        self.projection = nn.Linear(config.feature_projection_input_dim, config.hidden_size)

    def forward(self, features: torch.Tensor) -> torch.Tensor:
        return self.projection(self.layer_norm(features))


class FeedForward(nn.Module):
    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        self.intermediate_dense = nn.Linear(config.hidden_size, config.intermediate_size)
        self.output_dense = nn.Linear(config.intermediate_size, config.hidden_size)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.output_dense(F.silu(self.intermediate_dense(x)))


class ConvolutionModule(nn.Module):
    """LayerNorm, pointwise conv + GLU, causal depthwise conv, LayerNorm, swish, pointwise conv."""

    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        width, kernel = config.hidden_size, config.conv_depthwise_kernel_size
        self.layer_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.pointwise_conv1 = nn.Conv1d(width, 2 * width, 1, bias=False)
        self.depthwise_conv = nn.Conv1d(width, width, kernel, groups=width, bias=False)
        self.depthwise_layer_norm = nn.LayerNorm(width, eps=config.layer_norm_eps)
        self.pointwise_conv2 = nn.Conv1d(width, width, 1, bias=False)

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None) -> torch.Tensor:
        """(B, T, C) -> (B, T, C); frames where `mask` is 0 are zeroed before the convolutions."""
        x = self.layer_norm(x)
        if mask is not None:
            x = x.masked_fill(~mask.bool().unsqueeze(-1), 0.0)
        x = F.glu(self.pointwise_conv1(x.transpose(1, 2)), dim=1)
        x = self.depthwise_conv(F.pad(x, (self.depthwise_conv.kernel_size[0] - 1, 0)))
        x = self.depthwise_layer_norm(x.transpose(1, 2)).transpose(1, 2)
        return self.pointwise_conv2(F.silu(x)).transpose(1, 2)


class RelativeKeyAttention(nn.Module):
    """Multi-head self-attention with learned relative-position keys (distances clamped to
    [-left, right]), scores scaled by 1/sqrt(head width) and added to as transformers does."""

    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        width = config.hidden_size
        self.heads = config.num_attention_heads
        self.head_width = width // self.heads
        self.left, self.right = config.left_max_position_embeddings, config.right_max_position_embeddings
        self.linear_q = nn.Linear(width, width)
        self.linear_k = nn.Linear(width, width)
        self.linear_v = nn.Linear(width, width)
        self.linear_out = nn.Linear(width, width)
        self.distance_embedding = nn.Embedding(self.left + self.right + 1, self.head_width)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
        b, t, _ = x.shape
        q = self.linear_q(x).view(b, -1, self.heads, self.head_width).transpose(1, 2)  # (B, H, T, d)
        k = self.linear_k(x).view(b, -1, self.heads, self.head_width).transpose(1, 2)
        v = self.linear_v(x).view(b, -1, self.heads, self.head_width).transpose(1, 2)
        scale = math.sqrt(self.head_width)
        scores = torch.matmul(q, k.transpose(-2, -1)) / scale
        positions = torch.arange(t, dtype=torch.long, device=x.device)
        distance = torch.clamp(positions.view(1, -1) - positions.view(-1, 1), -self.left, self.right)
        keys = self.distance_embedding(distance + self.left).to(dtype=q.dtype)  # (T, T, d)
        scores = scores + torch.einsum("bhld,lrd->bhlr", q, keys) / scale
        if bias is not None:
            scores = scores + bias
        out = torch.matmul(torch.softmax(scores, dim=-1), v)
        return self.linear_out(out.transpose(1, 2).reshape(b, -1, self.heads * self.head_width))


class ConformerLayer(nn.Module):
    """Half-step FFN, self-attention, convolution module, half-step FFN, final LayerNorm."""

    def __init__(self, config: W2VBertConfig) -> None:
        super().__init__()
        width, eps = config.hidden_size, config.layer_norm_eps
        self.ffn1_layer_norm = nn.LayerNorm(width, eps=eps)
        self.ffn1 = FeedForward(config)
        self.self_attn_layer_norm = nn.LayerNorm(width, eps=eps)
        self.self_attn = RelativeKeyAttention(config)
        self.conv_module = ConvolutionModule(config)
        self.ffn2_layer_norm = nn.LayerNorm(width, eps=eps)
        self.ffn2 = FeedForward(config)
        self.final_layer_norm = nn.LayerNorm(width, eps=eps)

    def forward(self, x: torch.Tensor, bias: torch.Tensor | None, mask: torch.Tensor | None) -> torch.Tensor:
        x = self.ffn1(self.ffn1_layer_norm(x)) * 0.5 + x
        x = self.self_attn(self.self_attn_layer_norm(x), bias) + x
        x = x + self.conv_module(x, mask)
        x = self.ffn2(self.ffn2_layer_norm(x)) * 0.5 + x
        return self.final_layer_norm(x)


class Encoder(nn.Module):
    def __init__(self, config: W2VBertConfig, layers: int) -> None:
        super().__init__()
        self.config = config
        self.layers = nn.ModuleList(ConformerLayer(config) for _ in range(layers))

    def forward(self, x: torch.Tensor, mask: torch.Tensor | None, output_layer: int) -> torch.Tensor:
        """`x` (B, T, C) projected features -> hidden state `output_layer` (0: the masked input)."""
        bias = None
        if mask is not None:
            x = x.masked_fill(~mask.bool().unsqueeze(-1), 0.0)
            bias = (1.0 - mask[:, None, None, :].to(dtype=x.dtype)) * torch.finfo(x.dtype).min
            bias = bias.expand(bias.shape[0], 1, bias.shape[-1], bias.shape[-1])
        for i in range(self.config.num_hidden_layers):
            torch.rand([])  # transformers' LayerDrop draw, made in eval too (CPU generator)
            if i < output_layer:
                x = self.layers[i](x, bias, mask)
        return x


class W2VBert(nn.Module):
    """w2v-BERT 2.0's encoder up to `output_layer` (the hub's parameter names; layers past it are
    not built). `forward(features, mask)` -> `hidden_states[output_layer]` (B, T, C)."""

    def __init__(self, config: W2VBertConfig = W2VBertConfig(), output_layer: int = OUTPUT_LAYER) -> None:
        super().__init__()
        if not 0 <= output_layer <= config.num_hidden_layers:
            raise ValueError(f"w2v-BERT: hidden state {output_layer} of a {config.num_hidden_layers}-layer encoder does not exist")
        self.config = config
        self.output_layer = output_layer
        if config.has_mask_embedding:  # SpecAugment's mask vector: in the checkpoint, unused at inference
            self.masked_spec_embed = nn.Parameter(torch.zeros(config.hidden_size))
        self.feature_projection = FeatureProjection(config)
        self.encoder = Encoder(config, output_layer)

    def forward(self, features: torch.Tensor, mask: torch.Tensor | None = None) -> torch.Tensor:
        if features.shape[-1] != self.config.feature_projection_input_dim:
            raise ValueError(f"w2v-BERT takes {self.config.feature_projection_input_dim}-dim features, got {features.shape[-1]}")
        return self.encoder(self.feature_projection(features), mask, self.output_layer)


def load_w2vbert(state: dict[str, torch.Tensor], config: W2VBertConfig, output_layer: int = OUTPUT_LAYER) -> W2VBert:
    """`W2VBert` from a whole checkpoint state (the hub's model.safetensors): the state must hold
    exactly the full model's names and shapes (checked against a meta-device build); the layers past
    `output_layer` are then dropped and the rest is loaded strictly."""
    with torch.device("meta"):
        full = W2VBert(config, config.num_hidden_layers).state_dict()
    missing = [k for k in full if k not in state]
    unexpected = [k for k in state if k not in full]
    if missing or unexpected:
        raise RuntimeError(f"w2v-BERT checkpoint does not match its config: missing {missing[:5]}, unexpected {unexpected[:5]}")
    wrong = [k for k, v in full.items() if tuple(state[k].shape) != tuple(v.shape)]
    if wrong:
        raise RuntimeError(f"w2v-BERT checkpoint: wrong shapes for {wrong[:5]}")
    model = W2VBert(config, output_layer)
    keep = model.state_dict()
    model.load_state_dict({k: state[k] for k in keep}, strict=True)
    return model.eval()


# --------------------------------------------------------------------------- normalisation


@dataclass(frozen=True)
class SemanticStats:
    """Per-channel mean and standard deviation (square root of the stored variance) of layer 17."""

    mean: torch.Tensor
    std: torch.Tensor

    @classmethod
    def from_state(cls, state: dict[str, torch.Tensor]) -> SemanticStats:
        if "mean" not in state or "var" not in state:
            raise ValueError(f"w2v-BERT stats need 'mean' and 'var', got {sorted(state)}")
        return cls(state["mean"], torch.sqrt(state["var"]))

    def normalise(self, hidden: torch.Tensor) -> torch.Tensor:
        return (hidden - self.mean) / self.std


def load_stats(path: str | os.PathLike) -> SemanticStats:
    """The release's `w2v_stat` file (`wav2vec2bert_stats.pt`: {"mean", "var"})."""
    return SemanticStats.from_state(torch.load(path, map_location="cpu", weights_only=True))


@torch.no_grad()
def semantic_features(model: W2VBert, stats: SemanticStats, features: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Upstream's `get_emb`: the normalised hidden state `(B, T, C)` of features and their mask."""
    return stats.normalise(model(features, mask))
