"""Random-weight speech tokenizers shaped like the release, for tests and benchmarks.

`write_random_speech_tokenizer(folder, size="tiny"|"real")` writes `config.json`,
`preprocessor_config.json` and `model.safetensors` holding every key the release has. Values keep
the network numerically sane: norm weights near 1, layer scales ~0.1, fan-in-scaled weights,
positive codebook usage counts, SnakeBeta log-parameters near 0.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.runtime.weights import build_on_meta

from .config import SpeechTokenizerConfig
from .tokenizer import SpeechTokenizerModel

_REAL_ENCODER = {
    "_frame_rate": 12.5,
    "audio_channels": 1,
    "codebook_dim": 256,
    "codebook_size": 2048,
    "compress": 2,
    "dilation_growth_rate": 2,
    "head_dim": 64,
    "hidden_act": "gelu",
    "hidden_size": 512,
    "intermediate_size": 2048,
    "kernel_size": 7,
    "last_kernel_size": 3,
    "layer_scale_initial_scale": 0.01,
    "max_position_embeddings": 8000,
    "norm_eps": 1e-05,
    "num_attention_heads": 8,
    "num_filters": 64,
    "num_hidden_layers": 8,
    "num_key_value_heads": 8,
    "num_quantizers": 32,
    "num_residual_layers": 1,
    "num_semantic_quantizers": 1,
    "pad_mode": "constant",
    "residual_kernel_size": 3,
    "rope_theta": 10000.0,
    "sampling_rate": 24000,
    "sliding_window": 250,
    "trim_right_ratio": 1.0,
    "upsample_groups": 512,
    "upsampling_ratios": [8, 6, 5, 4],
    "use_cache": False,
    "use_causal_conv": True,
    "use_conv_shortcut": False,
    "use_streaming": False,
    "vector_quantization_hidden_dimension": 256,
    "model_type": "mimi",
}
_REAL_DECODER = {
    "attention_bias": False,
    "attention_dropout": 0.0,
    "latent_dim": 1024,
    "codebook_dim": 512,
    "codebook_size": 2048,
    "decoder_dim": 1536,
    "hidden_act": "silu",
    "hidden_size": 512,
    "intermediate_size": 1024,
    "layer_scale_initial_scale": 0.01,
    "max_position_embeddings": 8000,
    "head_dim": 64,
    "num_attention_heads": 16,
    "num_hidden_layers": 8,
    "num_key_value_heads": 16,
    "num_quantizers": 16,
    "num_semantic_quantizers": 1,
    "rms_norm_eps": 1e-05,
    "rope_theta": 10000,
    "semantic_codebook_size": 4096,
    "sliding_window": 72,
    "upsample_rates": [8, 5, 4, 3],
    "upsampling_ratios": [2, 2],
    "vector_quantization_hidden_dimension": 512,
}
# Small widths and depths; frame rate, sample rate, ratios, 16 codebooks of 2048 and windows kept.
_TINY_ENCODER = {
    "num_filters": 4,
    "hidden_size": 32,
    "head_dim": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "codebook_dim": 16,
    "vector_quantization_hidden_dimension": 16,
    "upsample_groups": 32,
}
_TINY_DECODER = {
    "latent_dim": 32,
    "codebook_dim": 32,
    "decoder_dim": 64,
    "hidden_size": 32,
    "head_dim": 16,
    "num_attention_heads": 2,
    "num_key_value_heads": 2,
    "intermediate_size": 64,
    "num_hidden_layers": 2,
    "vector_quantization_hidden_dimension": 32,
}

PREPROCESSOR_CONFIG = {
    "chunk_length_s": None,
    "feature_extractor_type": "EncodecFeatureExtractor",
    "feature_size": 1,
    "overlap": None,
    "padding_side": "right",
    "padding_value": 0.0,
    "return_attention_mask": True,
    "sampling_rate": 24000,
}


def speech_tokenizer_config_dict(size: str = "tiny") -> dict:
    """The `config.json` content for `size` ("tiny" or "real")."""
    if size not in ("tiny", "real"):
        raise ValueError(f"size must be 'tiny' or 'real', got {size!r}")
    encoder = dict(_REAL_ENCODER, **(_TINY_ENCODER if size == "tiny" else {}))
    decoder = dict(_REAL_DECODER, **(_TINY_DECODER if size == "tiny" else {}))
    return {
        "architectures": ["Qwen3TTSTokenizerV2Model"],
        "model_type": "qwen3_tts_tokenizer_12hz",
        "encoder_valid_num_quantizers": 16,
        "input_sample_rate": 24000,
        "output_sample_rate": 24000,
        "decode_upsample_rate": 1920,
        "encode_downsample_rate": 1920,
        "encoder_config": encoder,
        "decoder_config": decoder,
        "transformers_version": "4.57.3",
    }


def _value(key: str, shape: tuple[int, ...], gen: torch.Generator) -> torch.Tensor:
    """A sane random value for parameter `key` of `shape`."""

    def randn(*s: int) -> torch.Tensor:
        return torch.randn(*s, generator=gen)

    last = key.rsplit(".", 1)[-1]
    if last == "initialized":
        return torch.ones(shape)
    if last == "cluster_usage":
        return torch.rand(shape, generator=gen) * 1.5 + 0.5
    if last in ("embedding_sum", "embed_sum"):
        return randn(*shape)  # centroids ~ N(0, 1) / usage
    if last in ("alpha", "beta"):  # SnakeBeta log-parameters
        return 0.1 * randn(*shape)
    if last == "scale" or last == "gamma":  # layer scales
        return 0.1 + 0.02 * randn(*shape)
    if "norm" in key and last == "weight":
        return 1.0 + 0.05 * randn(*shape)
    if last == "bias":
        return 0.02 * randn(*shape)
    # weights: fan-in scaled (conv: in_channels/groups * kernel; transposed conv: in / stride-ish)
    if len(shape) == 3 and ".upsample." not in key and ".block.1." not in key:
        fan_in = shape[1] * shape[2]
    elif len(shape) == 3:  # ConvTranspose1d weight (in, out, k): each output sums in * k / stride terms
        fan_in = shape[0] * 2
    else:
        fan_in = shape[-1]
    gain = 0.2 if key.endswith(".conv2.conv.weight") else 1.0  # residual branches: keep growth small
    if key.startswith("decoder.decoder.") and len(shape) == 3 and shape[0] == 1:
        gain = 0.3  # output conv: waveform std ~0.3, rarely clipped
    return gain * randn(*shape) / math.sqrt(fan_in)


def write_random_speech_tokenizer(folder: str | Path, *, size: str = "tiny", seed: int = 0) -> Path:
    """Write a random speech tokenizer folder; returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = speech_tokenizer_config_dict(size)
    config = SpeechTokenizerConfig.from_dict(raw)
    model = build_on_meta(lambda: SpeechTokenizerModel(config))
    gen = torch.Generator().manual_seed(seed)
    tensors = {}
    for key, tensor in sorted(model.state_dict().items()):
        tensors[key] = _value(key, tuple(tensor.shape), gen).to(torch.float32).contiguous()
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(raw, indent=2))
    (folder / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2))
    return folder
