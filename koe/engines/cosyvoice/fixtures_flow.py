"""Random-weight `flow.pt` and `hift.pt` state dicts for CosyVoice 2 and 3, in the released names
and shapes, deterministic from a seed.

Sizes: "tiny" (runs in a second, for tests) and "real" (the released architecture, for the
bench). The yaml arguments each size implies are `flow_args` / `hift_args` (the `flow` and `hift`
mappings of `cosyvoice2.yaml` / `cosyvoice3.yaml`, upstream's keys), so the folder writer puts
the same architecture in the yaml that the weights have.

Names come from koe's own modules (which carry the released names) built on the meta device;
tensors are filled in that order from one `torch.Generator` seeded with `seed`. Weight-normed
layers are stored as upstream stores them: v2's `hift.pt` with `weight_g`/`weight_v` (the
release was saved with `torch.nn.utils.weight_norm`), v3's with the parametrization's
`parametrizations.weight.original0`/`original1`. Both load strictly into upstream's modules
(torch maps the old names onto the parametrization when loading). Saved with `torch.save` of the
state dict, as upstream saves them.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import nn

from koe.engines.cosyvoice.flow import Flow, FlowConfig
from koe.engines.cosyvoice.hift import HiFT, HiFTConfig

__all__ = [
    "SIZES",
    "flow_args",
    "flow_config",
    "flow_shapes",
    "flow_state",
    "hift_args",
    "hift_config",
    "hift_shapes",
    "hift_state",
    "write_flow",
    "write_hift",
    "yaml_sections",
]

SIZES = ("tiny", "real")
VERSIONS = (2, 3)

_HIFT_REAL: dict[str, Any] = {
    "in_channels": 80,
    "base_channels": 512,
    "nb_harmonics": 8,
    "sampling_rate": 24000,
    "nsf_alpha": 0.1,
    "nsf_sigma": 0.003,
    "nsf_voiced_threshold": 10,
    "upsample_rates": [8, 5, 3],
    "upsample_kernel_sizes": [16, 11, 7],
    "istft_params": {"n_fft": 16, "hop_len": 4},
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "source_resblock_kernel_sizes": [7, 7, 11],
    "source_resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "lrelu_slope": 0.1,
    "audio_limit": 0.99,
    "f0_predictor": {"num_class": 1, "in_channels": 80, "cond_channels": 512},
}
_HIFT_TINY = {**_HIFT_REAL, "base_channels": 16, "f0_predictor": {"num_class": 1, "in_channels": 80, "cond_channels": 16}}


_CFM_PARAMS = {
    "sigma_min": 1e-06,
    "solver": "euler",
    "t_scheduler": "cosine",
    "training_cfg_rate": 0.2,
    "inference_cfg_rate": 0.7,
    "reg_loss_type": "l1",
}
_V2_ENCODER_REAL = {"attention_heads": 8, "linear_units": 2048, "num_blocks": 6}
_V2_ENCODER_TINY = {"attention_heads": 2, "linear_units": 64, "num_blocks": 1}  # widths stay 512: upstream hard-codes them
_V2_ESTIMATOR_REAL = {"channels": [256], "attention_head_dim": 64, "n_blocks": 4, "num_mid_blocks": 12, "num_heads": 8}
_V2_ESTIMATOR_TINY = {"channels": [64], "attention_head_dim": 16, "n_blocks": 1, "num_mid_blocks": 2, "num_heads": 2}
_V3_DIT_REAL = {"dim": 1024, "depth": 22, "heads": 16, "dim_head": 64, "ff_mult": 2}
_V3_DIT_TINY = {"dim": 64, "depth": 2, "heads": 2, "dim_head": 32, "ff_mult": 2}


def _check(version: int, size: str) -> None:
    if version not in VERSIONS:
        raise ValueError(f"CosyVoice version {version!r}: koe writes 2 or 3")
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {SIZES}")


def hift_args(version: int, size: str = "tiny") -> dict[str, Any]:
    """The yaml's `hift` arguments (v3 adds `conv_pre_look_right`; the F0 predictor as a mapping)."""
    _check(version, size)
    args = dict(_HIFT_TINY if size == "tiny" else _HIFT_REAL)
    if version == 3:
        args["conv_pre_look_right"] = 4
    return args


def hift_config(version: int, size: str = "tiny") -> HiFTConfig:
    return HiFTConfig.from_yaml(hift_args(version, size), causal=version == 3)


def flow_args(version: int, size: str = "tiny") -> dict[str, Any]:
    """The yaml's `flow` arguments, nested as upstream's yaml nests them: v2 `encoder` (the
    upsampling conformer) and `decoder` (the CFM with its U-Net `estimator`); v3
    `pre_lookahead_layer` and `decoder` (the CFM with its DiT `estimator`). Chunk sizes are the
    release's (25 tokens, 50 mel frames)."""
    _check(version, size)
    tiny = size == "tiny"
    common = {
        "output_size": 80,
        "spk_embed_dim": 192,
        "output_type": "mel",
        "vocab_size": 6561,
        "input_frame_rate": 25,
        "only_mask_loss": True,
        "token_mel_ratio": 2,
        "pre_lookahead_len": 3,
    }
    cfm = {"in_channels": 240, "n_spks": 1, "spk_emb_dim": 80, "cfm_params": dict(_CFM_PARAMS)}
    if version == 2:
        encoder = {
            "output_size": 512,
            **(_V2_ENCODER_TINY if tiny else _V2_ENCODER_REAL),
            "dropout_rate": 0.1,
            "positional_dropout_rate": 0.1,
            "attention_dropout_rate": 0.1,
            "normalize_before": True,
            "input_layer": "linear",
            "pos_enc_layer_type": "rel_pos_espnet",
            "selfattention_layer_type": "rel_selfattn",
            "input_size": 512,
            "use_cnn_module": False,
            "macaron_style": False,
            "static_chunk_size": 25,
        }
        estimator = {
            "in_channels": 320,
            "out_channels": 80,
            **(_V2_ESTIMATOR_TINY if tiny else _V2_ESTIMATOR_REAL),
            "dropout": 0.0,
            "act_fn": "gelu",
            "static_chunk_size": 50,
            "num_decoding_left_chunks": -1,
        }
        return {"input_size": 512, **common, "encoder": encoder, "decoder": {**cfm, "estimator": estimator}}
    dit = _V3_DIT_TINY if tiny else _V3_DIT_REAL
    estimator = {**dit, "mel_dim": 80, "mu_dim": 80, "spk_dim": 80, "out_channels": 80, "static_chunk_size": 50, "num_decoding_left_chunks": -1}
    lookahead = {"in_channels": 80, "channels": dit["dim"], "pre_lookahead_len": 3}
    return {"input_size": 80, **common, "pre_lookahead_layer": lookahead, "decoder": {**cfm, "estimator": estimator}}


_CLASSES = {
    (2, "flow"): "cosyvoice.flow.flow.CausalMaskedDiffWithXvec",
    (2, "encoder"): "cosyvoice.transformer.upsample_encoder.UpsampleConformerEncoder",
    (2, "decoder"): "cosyvoice.flow.flow_matching.CausalConditionalCFM",
    (2, "estimator"): "cosyvoice.flow.decoder.CausalConditionalDecoder",
    (2, "hift"): "cosyvoice.hifigan.generator.HiFTGenerator",
    (2, "f0_predictor"): "cosyvoice.hifigan.f0_predictor.ConvRNNF0Predictor",
    (3, "flow"): "cosyvoice.flow.flow.CausalMaskedDiffWithDiT",
    (3, "pre_lookahead_layer"): "cosyvoice.transformer.upsample_encoder.PreLookaheadLayer",
    (3, "decoder"): "cosyvoice.flow.flow_matching.CausalConditionalCFM",
    (3, "estimator"): "cosyvoice.flow.DiT.dit.DiT",
    (3, "hift"): "cosyvoice.hifigan.generator.CausalHiFTGenerator",
    (3, "f0_predictor"): "cosyvoice.hifigan.f0_predictor.CausalConvRNNF0Predictor",
}


def _yaml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, str):
        return f"'{value}'"
    if isinstance(value, float) and 0 < value < 1e-3:
        return f"{value:.0e}"  # as upstream's yaml writes it (1e-06)
    if isinstance(value, list):
        return "[" + ", ".join(_yaml_value(v) for v in value) + "]"
    return str(value)


def _yaml_node(version: int, key: str, args: dict[str, Any], indent: int) -> list[str]:
    pad = " " * indent
    lines = []
    for k, v in args.items():
        if (version, k) in _CLASSES and isinstance(v, dict):
            lines.append(f"{pad}{k}: !new:{_CLASSES[(version, k)]}")
            lines += _yaml_node(version, k, v, indent + 4)
        elif k == "cfm_params":
            lines.append(f"{pad}{k}: !new:omegaconf.DictConfig")
            lines.append(f"{pad}    content:")
            lines += [f"{pad}        {ck}: {_yaml_value(cv)}" for ck, cv in v.items()]
        elif isinstance(v, dict):
            lines.append(f"{pad}{k}:")
            lines += [f"{pad}    {ck}: {_yaml_value(cv)}" for ck, cv in v.items()]
        else:
            lines.append(f"{pad}{k}: {_yaml_value(v)}")
    return lines


def yaml_sections(version: int, size: str = "tiny") -> str:
    """The `flow:` and `hift:` sections of `cosyvoice2.yaml` / `cosyvoice3.yaml` (hyperpyyaml tags,
    upstream's classes and argument names) for the architecture `flow_args` / `hift_args` give."""
    lines = [f"flow: !new:{_CLASSES[(version, 'flow')]}", *_yaml_node(version, "flow", flow_args(version, size), 4), ""]
    lines += [f"hift: !new:{_CLASSES[(version, 'hift')]}", *_yaml_node(version, "hift", hift_args(version, size), 4), ""]
    return "\n".join(lines)


# -- filling ------------------------------------------------------------------------------------------


def _weight_normed(model: nn.Module, prefixes: tuple[str, ...]) -> set[str]:
    """Names of the conv layers upstream wraps in weight norm (every conv but the source downsamplers)."""
    names = set()
    for name, module in model.named_modules():
        if isinstance(module, (nn.Conv1d, nn.ConvTranspose1d)) and name.startswith(prefixes) and not name.startswith("source_downs"):
            names.add(name)
    return names


def _fill(name: str, shape: tuple[int, ...], g: torch.Generator, fan_in: int) -> torch.Tensor:
    """A random tensor for `name`: norms' weights near 1, Snake's alpha in [0.5, 1.5], biases small,
    weights ~ N(0, 1/fan_in)."""
    leaf = name.rsplit(".", 1)[-1]
    if leaf == "alpha":
        return torch.rand(shape, generator=g) + 0.5
    if leaf == "weight" and len(shape) == 1:  # a norm's scale
        return 1 + torch.randn(shape, generator=g) * 0.1
    if leaf == "bias":
        return torch.randn(shape, generator=g) * 0.02
    return torch.randn(shape, generator=g) / math.sqrt(max(fan_in, 1))


def _hift_layout(version: int, size: str) -> list[tuple[str, tuple[int, ...], str, int]]:
    """`hift.pt`'s tensors in the modules' order: (name, shape, role, fan-in); role "g" / "v" for a
    weight-normed layer's pair (v2: `weight_g`/`weight_v`, v3: the parametrization's names), else "plain"."""
    with torch.device("meta"):
        model = HiFT(hift_config(version, size))
    normed = _weight_normed(model, ("conv_pre", "ups", "resblocks", "source_resblocks", "conv_post", "f0_predictor"))
    g_name, v_name = (".weight_g", ".weight_v") if version == 2 else (".parametrizations.weight.original0", ".parametrizations.weight.original1")
    layout = []
    for key, meta in model.state_dict().items():
        prefix, leaf = key.rsplit(".", 1)
        shape = tuple(meta.shape)
        if leaf == "weight" and prefix in normed:
            fan_in = shape[0] * shape[2] if isinstance(model.get_submodule(prefix), nn.ConvTranspose1d) else shape[1] * shape[2]
            layout += [(prefix + g_name, (shape[0], 1, 1), "g", fan_in), (prefix + v_name, shape, "v", fan_in)]
        else:
            layout.append((key, shape, "plain", int(math.prod(shape[1:])) if len(shape) > 1 else 1))
    return layout


def hift_shapes(version: int, size: str = "tiny") -> dict[str, tuple[int, ...]]:
    """Names and shapes of `hift.pt`'s tensors (what `hift_state` writes), without making them."""
    return {name: shape for name, shape, _, _ in _hift_layout(version, size)}


def hift_state(version: int, size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """`hift.pt`'s state dict for `version` at `size`, filled from `seed` (each pair: v, then g from
    v's norm times a gain in [0.5, 1.5])."""
    g = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    layout = _hift_layout(version, size)
    rates = hift_config(version, size).upsample_rates
    for i, (name, shape, role, fan_in) in enumerate(layout):
        if role == "g":
            continue
        if role == "v":
            v = _fill(name, shape, g, fan_in)
            gain = torch.rand((shape[0], 1, 1), generator=g) + 0.5
            if name.startswith("conv_post."):
                gain = gain * 0.3  # log-magnitudes small enough that the tiny vocoders' audio stays under the clamp
            elif name.startswith("ups.") and version == 3:  # v3 convolves a nearest-upsampled (repeated) signal
                gain = gain / math.sqrt(rates[int(name.split(".")[1])])
            state[layout[i - 1][0]], state[name] = torch.norm_except_dim(v, 2, 0) * gain, v
            continue
        value = _fill(name, shape, g, fan_in)
        if name == "f0_predictor.classifier.bias":
            value = torch.rand(shape, generator=g) * 200 + 80  # F0 around 80-280 Hz: a voiced source
        state[name] = value.float()
    return state


def flow_config(version: int, size: str = "tiny") -> FlowConfig:
    return FlowConfig.from_yaml(flow_args(version, size), version)


def flow_shapes(version: int, size: str = "tiny") -> dict[str, tuple[int, ...]]:
    """Names and shapes of `flow.pt`'s tensors (what `flow_state` writes), without making them."""
    with torch.device("meta"):
        model = Flow(flow_config(version, size))
    return {k: tuple(v.shape) for k, v in model.state_dict().items()}


def flow_state(version: int, size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """`flow.pt`'s state dict for `version` at `size`, filled from `seed` in the modules' order."""
    with torch.device("meta"):
        model = Flow(flow_config(version, size))
    g = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    for key, meta in model.state_dict().items():
        shape = tuple(meta.shape)
        fan_in = int(math.prod(shape[1:])) if len(shape) > 1 else 1
        if key.endswith("inv_freq"):  # x-transformers' rotary buffer: its value, not a weight
            dim_head = 2 * shape[0]
            state[key] = 1.0 / (10000.0 ** (torch.arange(0, dim_head, 2).float() / dim_head))
            continue
        if key.endswith(("pos_bias_u", "pos_bias_v")):
            fan_in = shape[1]
        state[key] = _fill(key, shape, g, fan_in)
    return state


def write_flow(path: Path, version: int, size: str = "tiny", seed: int = 0) -> Path:
    """Write `flow.pt` (torch.save of the state dict) and return its path."""
    path = Path(path)
    torch.save(flow_state(version, size, seed), path)
    return path


def write_hift(path: Path, version: int, size: str = "tiny", seed: int = 0) -> Path:
    """Write `hift.pt` (torch.save of the state dict) and return its path."""
    path = Path(path)
    torch.save(hift_state(version, size, seed), path)
    return path
