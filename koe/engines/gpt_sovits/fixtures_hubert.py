"""A random-weight `chinese-hubert-base` folder in the released layout, for tests and the bench.

The release is a transformers 4.30 save of a `HubertModel` in float16: `config.json`,
`preprocessor_config.json` and `pytorch_model.bin` (a plain state dict without a prefix, the
positional conv's weight norm as `weight_g` / `weight_v`, and `masked_spec_embed`). The fixture
writes the same files with the release's config keys and its hidden width 768 (SoVITS hard-codes
it) but small convs, positional conv, feed-forward and depth.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

__all__ = ["PREPROCESSOR_CONFIG", "hubert_config_json", "random_hubert_state", "write_random_hubert"]

PREPROCESSOR_CONFIG = {
    "do_normalize": True,
    "feature_extractor_type": "Wav2Vec2FeatureExtractor",
    "feature_size": 1,
    "padding_side": "right",
    "padding_value": 0,
    "return_attention_mask": False,
    "sampling_rate": 16000,
}


def hubert_config_json(layers: int = 2, conv_width: int = 64, pos_kernel: int = 16, intermediate: int = 256) -> dict:
    """The release's config.json with smaller sizes (768 wide, 12 heads, as released)."""
    return {
        "_name_or_path": "chinese-hubert-base",
        "activation_dropout": 0.1,
        "apply_spec_augment": True,
        "architectures": ["HubertModel"],
        "attention_dropout": 0.1,
        "bos_token_id": 1,
        "classifier_proj_size": 256,
        "conv_bias": False,
        "conv_dim": [conv_width] * 7,
        "conv_kernel": [10, 3, 3, 3, 3, 2, 2],
        "conv_stride": [5, 2, 2, 2, 2, 2, 2],
        "ctc_loss_reduction": "sum",
        "ctc_zero_infinity": False,
        "do_stable_layer_norm": False,
        "eos_token_id": 2,
        "feat_extract_activation": "gelu",
        "feat_extract_norm": "group",
        "feat_proj_dropout": 0.0,
        "feat_proj_layer_norm": True,
        "final_dropout": 0.1,
        "hidden_act": "gelu",
        "hidden_dropout": 0.1,
        "hidden_size": 768,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "layer_norm_eps": 1e-05,
        "layerdrop": 0.1,
        "mask_feature_length": 10,
        "mask_feature_min_masks": 0,
        "mask_feature_prob": 0.0,
        "mask_time_length": 10,
        "mask_time_min_masks": 2,
        "mask_time_prob": 0.05,
        "model_type": "hubert",
        "num_attention_heads": 12,
        "num_conv_pos_embedding_groups": 16,
        "num_conv_pos_embeddings": pos_kernel,
        "num_feat_extract_layers": 7,
        "num_hidden_layers": layers,
        "pad_token_id": 0,
        "torch_dtype": "float16",
        "transformers_version": "4.30.2",
        "use_weighted_layer_sum": False,
        "vocab_size": 32,
    }


def random_hubert_state(seed: int, **sizes: int) -> dict[str, torch.Tensor]:
    """The release's `pytorch_model.bin` state dict (float16), seeded; convs scaled by fan-in so
    the features keep a sane range."""
    c = hubert_config_json(**sizes)
    g = torch.Generator().manual_seed(seed)
    width, conv = c["hidden_size"], c["conv_dim"]

    def normal(*shape: int, std: float = 0.02) -> torch.Tensor:
        return (torch.randn(shape, generator=g) * std).to(torch.float16)

    def norm(prefix: str, n: int) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": (1 + normal(n, std=0.1).float()).half(), f"{prefix}.bias": normal(n)}

    def linear(prefix: str, c_in: int, c_out: int) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": normal(c_out, c_in, std=c_in**-0.5), f"{prefix}.bias": normal(c_out)}

    state = {"masked_spec_embed": normal(width, std=0.5)}
    c_in = 1
    for i, (c_out, k) in enumerate(zip(conv, c["conv_kernel"], strict=True)):
        state[f"feature_extractor.conv_layers.{i}.conv.weight"] = normal(c_out, c_in, k, std=(c_in * k) ** -0.5)
        if i == 0:
            state.update(norm("feature_extractor.conv_layers.0.layer_norm", c_out))
        c_in = c_out
    state.update(norm("feature_projection.layer_norm", conv[-1]))
    state.update(linear("feature_projection.projection", conv[-1], width))
    kernel, groups = c["num_conv_pos_embeddings"], c["num_conv_pos_embedding_groups"]
    state["encoder.pos_conv_embed.conv.bias"] = normal(width)
    state["encoder.pos_conv_embed.conv.weight_g"] = (1 + normal(1, 1, kernel, std=0.1).float()).half()
    state["encoder.pos_conv_embed.conv.weight_v"] = normal(width, width // groups, kernel, std=1.0)
    state.update(norm("encoder.layer_norm", width))
    for i in range(c["num_hidden_layers"]):
        p = f"encoder.layers.{i}"
        for name in ("k_proj", "v_proj", "q_proj", "out_proj"):
            state.update(linear(f"{p}.attention.{name}", width, width))
        state.update(norm(f"{p}.layer_norm", width))
        state.update(linear(f"{p}.feed_forward.intermediate_dense", width, c["intermediate_size"]))
        state.update(linear(f"{p}.feed_forward.output_dense", c["intermediate_size"], width))
        state.update(norm(f"{p}.final_layer_norm", width))
    return state


def write_random_hubert(folder: str | Path, seed: int = 0, **sizes: int) -> Path:
    """Write the random folder; returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(hubert_config_json(**sizes), indent=2) + "\n")
    (folder / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR_CONFIG, indent=2) + "\n")
    torch.save(random_hubert_state(seed, **sizes), folder / "pytorch_model.bin")
    return folder
