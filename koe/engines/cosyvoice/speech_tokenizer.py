"""CosyVoice's S3 speech tokenizer (v2: `speech_tokenizer_v2.onnx`, v3: `speech_tokenizer_v3.onnx`)
as a native PyTorch module: Whisper-style 128-bin log-mel at 100 Hz in, one token id in 3^8 = 6561
per 40 ms out (25 Hz).

The released files are ONNX graphs; this module holds the same computation and reads its weights
from the graph (`koe.runtime.onnx_weights`), by the exporter's node names. What the graphs
compute (the released architecture, as the `s3tokenizer` package reconstructed it from them):

    feats (1, 128, T) float32, feats_length (1,) int32
    conv1 (k3, stride 2, pad 1) + GELU, conv2 (k3, stride 2, pad 1) + GELU: T -> ceil(T / 4) frames,
        each conv's input zeroed past the valid length
    blocks (6 in v2, 12 in v3), each pre-norm:
        x += attn(attn_ln(x));  x += mlp(mlp_ln(x))  (mlp: Linear 4x, GELU, Linear)
        attn: query (bias), key (no bias), value (bias); rotary embedding on q and k (head size 64,
            theta 10000, the two halves rotated: [-x2, x1]); q and k each scaled by head_size^-0.25;
            softmax over q·k plus −1e10 at padded keys; out(·) plus the FSMN memory: value masked,
            a depthwise conv of 31 taps (15 each side, zero padded, no bias) plus itself, masked
    quantizer: project_in (Linear to 8), tanh, × 0.999, round, + 1 -> 8 digits in {0, 1, 2};
        id = Σ digit_i · 3^i
    indices (1, ceil(T / 4)) int32

v2 and v3 differ in depth (6 vs 12 blocks) and in how the graph stores the layer norms (v2 as
`LayerNormalization` nodes, opset 17; v3 decomposed into ReduceMean/Sub/Pow/Sqrt/Div/Mul/Add); the
loader takes either. Sizes are read from the graph (width from conv1, depth from the blocks found);
the head size is 64, as the rotary tables are built for it.

Against onnxruntime on the same graph the hidden states differ by float rounding (its MLAS kernels
are not torch's), so ids can only differ where a projected value lies within that rounding of a
rounding boundary (±0.5 after the tanh); the parity tests check the ids equal.
"""

from __future__ import annotations

import functools
import os
import re

import torch
import torch.nn.functional as F
from torch import nn

from koe.engines.cosyvoice.features import clip_16k, tokenizer_log_mel
from koe.runtime.onnx_weights import Graph, graph_state, read_graph

__all__ = ["CODEBOOK_SIZE", "HEAD_SIZE", "S3Tokenizer", "from_graph", "load_speech_tokenizer"]

HEAD_SIZE = 64
CODEBOOK_SIZE = 3**8
FSMN_KERNEL = 31
MAX_POSITIONS = 2048  # the rotary table's length: 2048 tokens = 81.9 s, past the 30 s cap
_FSQ_SCALE = 0.9990000128746033  # 0.999 as float32
_MASK_BIAS = -1.0e10


@functools.lru_cache(maxsize=2)
def _rotary(head_size: int, positions: int) -> tuple[torch.Tensor, torch.Tensor]:
    """(cos, sin), each `(positions, head_size)`: the angles `p / 10000^(2i / head_size)` for the
    first half, repeated for the second. Through `torch.polar` (unit length), as LLaMA-style
    rotary tables are built and as the s3tokenizer package builds these: its cosines and sines
    differ from `torch.cos`/`torch.sin`'s in the last bit here and there."""
    inv = 1.0 / (10000.0 ** (torch.arange(0, head_size, 2)[: head_size // 2].float() / head_size))
    angles = torch.outer(torch.arange(positions), inv).float()  # (positions, head_size / 2)
    unit = torch.view_as_real(torch.polar(torch.ones_like(angles), angles))  # (positions, head_size / 2, 2)
    cos, sin = unit[..., 0], unit[..., 1]
    return torch.cat((cos, cos), dim=-1), torch.cat((sin, sin), dim=-1)


def _rotate(x: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
    """x (B, T, H, D) rotated: x·cos + [−x2, x1]·sin, cos and sin (1, T, 1, D)."""
    half = x.shape[-1] // 2
    turned = torch.cat((-x[..., half:], x[..., :half]), dim=-1)
    return x * cos + turned * sin


def _valid(lengths: torch.Tensor, frames: int) -> torch.Tensor:
    """(B, 1, frames) float mask: 1 before each length, 0 after."""
    return (torch.arange(frames, device=lengths.device).unsqueeze(0) < lengths.unsqueeze(-1)).unsqueeze(1).float()


class Attention(nn.Module):
    """Self-attention with rotary positions and an FSMN memory over the values (`blocks.N.attn`)."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.heads = width // HEAD_SIZE
        self.query = nn.Linear(width, width)
        self.key = nn.Linear(width, width, bias=False)
        self.value = nn.Linear(width, width)
        self.out = nn.Linear(width, width)
        self.fsmn_block = nn.Conv1d(width, width, FSMN_KERNEL, groups=width, bias=False)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, valid: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        b, t, width = x.shape
        q = self.query(x).view(b, t, self.heads, -1)  # (B, T, H, D)
        k = self.key(x).view(b, t, self.heads, -1)
        v = self.value(x).view(b, t, self.heads, -1)
        q, k = _rotate(q, cos, sin), _rotate(k, cos, sin)

        memory = v.reshape(b, t, width) * valid  # (B, T, C), padded frames zeroed
        taps = F.pad(memory.transpose(1, 2), ((FSMN_KERNEL - 1) // 2, FSMN_KERNEL // 2))  # (B, C, T + 30)
        memory = (self.fsmn_block(taps).transpose(1, 2) + memory) * valid

        scale = (width // self.heads) ** -0.25
        q = q.permute(0, 2, 1, 3) * scale  # (B, H, T, D)
        k = k.permute(0, 2, 3, 1) * scale  # (B, H, D, T)
        weights = torch.softmax(q @ k + bias, dim=-1)  # (B, H, T, T)
        attended = (weights @ v.permute(0, 2, 1, 3)).permute(0, 2, 1, 3).flatten(start_dim=2)  # (B, T, C)
        return self.out(attended) + memory


class Block(nn.Module):
    def __init__(self, width: int) -> None:
        super().__init__()
        self.attn = Attention(width)
        self.attn_ln = nn.LayerNorm(width, eps=1e-5)
        self.mlp = nn.Sequential(nn.Linear(width, 4 * width), nn.GELU(), nn.Linear(4 * width, width))
        self.mlp_ln = nn.LayerNorm(width, eps=1e-5)

    def forward(self, x: torch.Tensor, bias: torch.Tensor, valid: torch.Tensor, cos: torch.Tensor, sin: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.attn_ln(x), bias, valid, cos, sin)
        return x + self.mlp(self.mlp_ln(x))


class Quantizer(nn.Module):
    """Finite scalar quantisation: 8 values in {0, 1, 2}, read as a base-3 number."""

    def __init__(self, width: int) -> None:
        super().__init__()
        self.project_in = nn.Linear(width, 8)
        self.register_buffer("powers", 3.0 ** torch.arange(8, dtype=torch.float32), persistent=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        digits = (torch.tanh(self.project_in(x)) * _FSQ_SCALE).round() + 1  # (B, T, 8)
        return (digits * self.powers).sum(dim=-1).int()  # (B, T)


class S3Tokenizer(nn.Module):
    """The S3 speech tokenizer: `forward(feats (B, 128, T), feats_length (B,) int32) -> ids (B, ceil(T / 4))`
    int32, with ids past a row's own length meaningless (the released graphs are run on one clip at a time)."""

    def __init__(self, width: int = 1280, layers: int = 6, n_mels: int = 128) -> None:
        super().__init__()
        if width % HEAD_SIZE:
            raise ValueError(f"the speech tokenizer's width {width} is not a multiple of the head size {HEAD_SIZE}")
        self.conv1 = nn.Conv1d(n_mels, width, 3, stride=2, padding=1)
        self.conv2 = nn.Conv1d(width, width, 3, stride=2, padding=1)
        self.blocks = nn.ModuleList(Block(width) for _ in range(layers))
        self.quantizer = Quantizer(width)
        cos, sin = _rotary(HEAD_SIZE, MAX_POSITIONS)
        self.register_buffer("cos", cos, persistent=False)
        self.register_buffer("sin", sin, persistent=False)

    @property
    def width(self) -> int:
        return self.conv1.out_channels

    def forward(self, feats: torch.Tensor, feats_length: torch.Tensor) -> torch.Tensor:
        return self.quantizer(self.encode(feats, feats_length)[0])

    def encode(self, feats: torch.Tensor, feats_length: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """The hidden states before the quantizer `(B, T', width)` and each row's length `(B,)`."""
        lengths = feats_length.long()
        x = F.gelu(self.conv1(feats * _valid(lengths, feats.shape[-1])))
        lengths = (lengths - 1) // 2 + 1
        x = F.gelu(self.conv2(x * _valid(lengths, x.shape[-1])))
        lengths = (lengths - 1) // 2 + 1
        valid = _valid(lengths, x.shape[-1])  # (B, 1, T')
        x = x.permute(0, 2, 1)  # (B, T', C)
        bias = ((1.0 - valid) * _MASK_BIAS).unsqueeze(1)  # (B, 1, 1, T'): −1e10 at padded keys
        frames = x.shape[1]
        cos, sin = self.cos[:frames].unsqueeze(0).unsqueeze(2), self.sin[:frames].unsqueeze(0).unsqueeze(2)  # (1, T', 1, D)
        valid = valid.transpose(1, 2)  # (B, T', 1)
        for block in self.blocks:
            x = block(x, bias, valid, cos, sin)
        return x, lengths

    @torch.inference_mode()
    def tokenize(self, speech: torch.Tensor) -> torch.Tensor:
        """Token ids of a `(1, samples)` 16 kHz clip, as upstream's `_extract_speech_token` makes them:
        `(1, tokens)` int32. A clip over 30 s is refused (upstream asserts)."""
        feats = tokenizer_log_mel(speech)  # (1, 128, T), T <= 3000 (30 s): within the rotary table
        return self(feats, torch.tensor([feats.shape[-1]], dtype=torch.int32)).flatten().unsqueeze(0)

    def tokenize_clip(self, samples, sample_rate: int) -> torch.Tensor:
        """`tokenize` of a clip at any rate ≥ 16 kHz (mono or channels averaged, resampled as upstream does)."""
        return self.tokenize(clip_16k(samples, sample_rate))


_BLOCK = re.compile(r"^/?blocks\.(\d+)/")


def from_graph(graph: Graph) -> S3Tokenizer:
    """An S3Tokenizer shaped and filled from a speech tokenizer graph (strict: every weight of the
    module found in the graph, every weight-carrying node of the graph taken)."""
    names = [v.name for v in graph.inputs]
    if len(names) != 2:
        raise ValueError(f"a speech tokenizer graph has two inputs (feats, feats_length), this one has {names}")
    conv1 = [n for n in graph.find("Conv") if n.name.strip("/").startswith("conv1/")]
    if not conv1 or graph.static(conv1[0].inputs[1]) is None:
        raise ValueError("no /conv1/Conv node with a weight: not an S3 speech tokenizer graph")
    weight = graph.static(conv1[0].inputs[1])
    layers = 1 + max((int(m.group(1)) for n in graph.nodes if (m := _BLOCK.match(n.name))), default=-1)
    if layers == 0:
        raise ValueError("no /blocks.N/ nodes: not an S3 speech tokenizer graph")
    model = S3Tokenizer(width=weight.shape[0], layers=layers, n_mels=weight.shape[1])
    state, unclaimed = graph_state(graph, model)
    if unclaimed:
        raise ValueError(f"the speech tokenizer graph has weights koe does not place: {unclaimed[:5]}")
    for name, module in model.named_modules():
        if isinstance(module, nn.LayerNorm) and f"{name}.weight" in state and f"{name}.bias" not in state:
            state[f"{name}.bias"] = torch.zeros_like(module.bias)  # a norm exported without a shift adds none
    missing, unexpected = model.load_state_dict(state, strict=False)
    if missing or unexpected:
        raise ValueError(f"the speech tokenizer graph does not fit the module: missing {missing[:5]}, unexpected {unexpected[:5]}")
    return model.eval()


def load_speech_tokenizer(path: str | os.PathLike) -> S3Tokenizer:
    """The S3 speech tokenizer of a released `speech_tokenizer_v2.onnx` / `_v3.onnx`, in float32, eval mode."""
    return from_graph(read_graph(path))
