"""Reading a SoVITS v3/v4 file (`s2Gv3.pth`, `s2Gv4.pth`, or a LoRA fine-tune of one) as upstream's
`TTS.init_vits_weights` does, without running code from it.

The file format, the version sniffing and the weights-only reading are v2's (`sovits_weights`): a
`{"weight": fp16 tensors, "config": hps, "info"}` zip, b"02" marks v3, b"03"/b"04" a v3/v4 LoRA
(the pretrained files are told by their md5; an unmarked zip above 700 MiB is v3). The
architecture comes from `config` (the text encoder's sizes; upstream always builds v2's symbol
table for v3/v4) and the version; the DiT's sizes are fixed in upstream's code.

A LoRA file (upstream's `s2_train_v3_lora.py`) holds the tensors its training updated: the LoRA
pairs of the DiT's attention projections (`to_q`, `to_k`, `to_v`, `to_out.0`) under peft's names
(`cfm.base_model.model.estimator.....lora_A.default.weight` / `lora_B`), the parts trained whole
(`ref_enc`, `bridge`, `wns1`, `linear_mel`) and the buffers (the codebook's, the rotary `inv_freq`),
plus `lora_rank`. Upstream loads the pretrained file of that version, then the LoRA file over it,
then merges with peft (`lora_alpha = r`, so the scale is 1): each projection's weight becomes
`W + (B @ A) * 1.0` in float32. koe does the same arithmetic on the same float32 tensors, so the
merged model has upstream's bits; the pretrained file is named by the caller (`base`).

Loading is strict as for v2: the training-only `linear_mel` and the codebook's training buffers
are returned as ignored names; anything else missing or unexpected is an error naming it.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch

from koe.engines.gpt_sovits.dit import DiTConfig
from koe.engines.gpt_sovits.quantizer import CODEBOOK
from koe.engines.gpt_sovits.sovits_config import SoVITSConfig
from koe.engines.gpt_sovits.sovits_v3 import BRIDGE, V3_VERSIONS, SoVITSV3
from koe.engines.gpt_sovits.sovits_weights import SoVITSFile, read_sovits, sovits_state
from koe.runtime.weights import WeightsError, build_on_meta, check_state_fits

__all__ = ["LORA_PREFIX", "LORA_TARGETS", "load_sovits_v3", "merge_lora", "released_shapes_v3", "sovits_v3_config", "sovits_v3_state"]

LORA_PREFIX = "cfm.base_model.model."  # peft's wrapping of `cfm` in a LoRA file's names
LORA_TARGETS = ("to_q", "to_k", "to_v", "to_out.0")
TRAINING_ONLY = ("linear_mel.",)
_LORA = re.compile(r"(.+)\.lora_([AB])\.default\.weight")
WEIGHT_NORMED = r"wns1\.enc\.(cond_layer|in_layers\.\d+|res_skip_layers\.\d+)"
_TRAINING_BUFFERS = {"inited": (1,), "cluster_size": (1024,), "embed_avg": (1024, 768)}


def sovits_v3_config(hps: dict) -> SoVITSConfig:
    """The text encoder's architecture of a v3/v4 file's `config` (v2's symbols, as upstream builds it)."""
    return SoVITSConfig.from_hps(hps, "v2")


def merge_lora(weight: dict[str, torch.Tensor], lora: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """float32 pretrained tensors (koe's names), the LoRA file's float32 tensors -> the merged
    mapping: the LoRA file's plain tensors over the pretrained ones (peft's prefix removed), then each
    target's `weight + (B @ A) * 1.0`."""
    merged = dict(weight)
    pairs: dict[str, dict[str, torch.Tensor]] = {}
    for name, value in lora.items():
        plain = "cfm." + name[len(LORA_PREFIX) :] if name.startswith(LORA_PREFIX) else name
        m = _LORA.fullmatch(plain)
        if m is None:
            merged[plain] = value
            continue
        layer = m.group(1)
        if not layer.startswith("cfm.estimator.") or not layer.endswith(tuple("." + t for t in LORA_TARGETS)):
            raise WeightsError(f"a LoRA pair on {layer}, which upstream's LoRA does not target (it targets {', '.join(LORA_TARGETS)} in the DiT)")
        pairs.setdefault(layer, {})[m.group(2)] = value
    for layer, pair in sorted(pairs.items()):
        if set(pair) != {"A", "B"}:
            raise WeightsError(f"{layer}: a LoRA needs both lora_A and lora_B; only lora_{''.join(pair)} is stored")
        base = merged.get(layer + ".weight")
        if base is None:
            raise WeightsError(f"{layer}: the LoRA's layer is not in the pretrained model")
        merged[layer + ".weight"] = base + (pair["B"] @ pair["A"]) * 1.0  # peft: weight += B @ A * (alpha / r), alpha = r
    return merged


def sovits_v3_state(file: SoVITSFile, base: SoVITSFile | None = None) -> tuple[dict[str, torch.Tensor], list[str]]:
    """A read file's tensors as koe's `SoVITSV3` holds them (float32, weight norm folded, a LoRA merged
    over `base`), and the names left out as training state."""
    if file.version.lora:
        if base is None:
            raise WeightsError(f"a SoVITS {file.version.model} LoRA needs its pretrained model (upstream's s2G{file.version.model}.pth): pass base=")
        if base.version.lora:
            raise WeightsError(f"a SoVITS {file.version.model} LoRA goes over a pretrained model, not over another LoRA")
        up = {k: (v.float() if v.is_floating_point() else v) for k, v in base.weight.items()}
        weight = merge_lora(up, {k: (v.float() if v.is_floating_point() else v) for k, v in file.weight.items()})
    else:
        weight = file.weight
    state, ignored = sovits_state(weight)
    ignored += sorted(k for k in state if k.startswith(TRAINING_ONLY))
    return {k: v for k, v in state.items() if not k.startswith(TRAINING_ONLY)}, sorted(ignored)


def load_sovits_v3(path: str | Path, base: str | Path | None = None, dit: DiTConfig | None = None, version: str | None = None) -> SoVITSV3:
    """A SoVITS v3/v4 `.pth` (or a LoRA over `base`, the pretrained file of its version) -> koe's model
    in float32, eval mode, with `ignored` and `info`. Strict: a missing, unexpected or misshapen
    tensor is a `WeightsError` naming it. `dit`: the DiT's sizes (upstream's fixed ones by default).

    `version` overrides the sniffed one for a file upstream would misread: v4's pretrained model
    carries no header and is known by the md5 of the released file's head, so any other v4 model
    without a header (a re-saved or random one) sniffs as v2/v3 by its size. Upstream, like koe,
    reads the base of a LoRA without sniffing it."""
    file = read_sovits(path)
    version = version or file.version.model
    if version not in V3_VERSIONS:
        raise WeightsError(f"{path}: a SoVITS {version} file, not v3/v4 (read it with sovits_weights.load_sovits)")
    state, ignored = sovits_v3_state(file, read_sovits(base) if base is not None else None)
    model = build_on_meta(lambda: SoVITSV3(sovits_v3_config(file.hps), version, dit))
    check_state_fits(state, model, f"{path}: does not match SoVITS {version}")
    model.load_state_dict(state, strict=True, assign=True)
    model.ignored, model.info = tuple(ignored), file.info
    return model.eval()


def released_shapes_v3(config: SoVITSConfig, version: str, dit: DiTConfig | None = None) -> dict[str, tuple[int, ...]]:
    """Every tensor a released v3/v4 `.pth` stores, with its shape: koe's module order, `wns1`'s
    WaveNet as `weight_g` / `weight_v`, the codebook's training buffers and `linear_mel` beside them."""
    model = build_on_meta(lambda: SoVITSV3(config, version, dit))
    shapes: dict[str, tuple[int, ...]] = {}
    for name, t in model.state_dict().items():
        layer = name.removesuffix(".weight")
        if name.endswith(".weight") and re.fullmatch(WEIGHT_NORMED, layer):
            shapes[layer + ".weight_g"] = (t.shape[0],) + (1,) * (t.dim() - 1)
            shapes[layer + ".weight_v"] = tuple(t.shape)
        else:
            shapes[name] = tuple(t.shape)
        if name == "quantizer." + CODEBOOK:
            for buffer, shape in _TRAINING_BUFFERS.items():
                shapes[f"quantizer.vq.layers.0._codebook.{buffer}"] = shape
        if name == "wns1.proj.bias":
            shapes["linear_mel.weight"], shapes["linear_mel.bias"] = (100, BRIDGE, 1), (100,)
    return shapes
