"""VoxCPM's LoRA adapters, as upstream lays them out (`voxcpm.modules.layers.lora` and the models'
`LoRAConfig`): for training (`finetune/lora.py`) and for speaking with a LoRA checkpoint.

A targeted linear layer computes `W x + b + dropout(B (A x)) * (alpha / r)`, A (r x in) and B
(out x r), the two tensors named `<layer>.lora_A` / `<layer>.lora_B` beside the layer's own
(`lora_weights.safetensors`). Targets, in upstream's order: with `enable_lm`, the layers named in
`target_modules_lm` (q, k, v, o projections) of the base LM then the residual LM; with
`enable_dit`, those named in `target_modules_dit` of the DiT; with `enable_proj`, the model's
projections named in `target_proj_modules`. A new adapter's A is drawn as `nn.Linear` draws a
weight (kaiming-uniform, a = sqrt(5)) from torch's generator, B is zero. The base layer runs as it
would without the adapter (koe's kernels included), so a checkpoint's adapters speak as
upstream's unmerged sum does.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from koe.runtime.files import read_json_object

__all__ = ["CONFIG_FILE", "WEIGHTS_FILE", "LoRAConfig", "LoRALinear", "add_lora", "adapters", "as_config", "load_adapters", "read_adapters", "read_lora_config"]

CONFIG_FILE, WEIGHTS_FILE = "lora_config.json", "lora_weights.safetensors"
_PROJECTIONS = {
    "voxcpm": ["enc_to_lm_proj", "lm_to_dit_proj", "res_to_dit_proj"],
    "voxcpm2": ["enc_to_lm_proj", "lm_to_dit_proj", "res_to_dit_proj", "fusion_concat_proj"],
}
_ATTENTION = ["q_proj", "v_proj", "k_proj", "o_proj"]


@dataclass(frozen=True)
class LoRAConfig:
    """Upstream's `LoRAConfig` (its fields and defaults; `target_proj_modules` follows the architecture)."""

    enable_lm: bool = False
    enable_dit: bool = False
    enable_proj: bool = False
    r: int = 8
    alpha: int = 16
    dropout: float = 0.0
    target_modules_lm: list[str] = field(default_factory=lambda: list(_ATTENTION))
    target_modules_dit: list[str] = field(default_factory=lambda: list(_ATTENTION))
    target_proj_modules: list[str] | None = None  # None: the architecture's projections

    def projections(self, architecture: str) -> list[str]:
        return list(self.target_proj_modules) if self.target_proj_modules is not None else list(_PROJECTIONS.get(architecture, _PROJECTIONS["voxcpm"]))

    def as_upstream(self, architecture: str) -> dict:
        """What upstream's `lora_config.json` holds (`model_dump()` of its config)."""
        return {**asdict(self), "target_proj_modules": self.projections(architecture)}


class LoRALinear(nn.Module):
    """A linear layer (`base`, left as it is) plus a low-rank update (see the module doc)."""

    def __init__(self, base: nn.Module, in_features: int, out_features: int, r: int, alpha: float, dropout: float) -> None:
        super().__init__()
        self.base = base
        a = torch.zeros(r, in_features)
        nn.init.kaiming_uniform_(a, a=math.sqrt(5))  # as upstream draws it, from torch's generator
        weight = next(base.parameters(), None)
        like = {"device": weight.device, "dtype": weight.dtype} if weight is not None else {}
        self.lora_A = nn.Parameter(a.to(**like))
        self.lora_B = nn.Parameter(torch.zeros(out_features, r, **like))
        self.register_buffer("scaling", torch.tensor(alpha / r, **like), persistent=False)
        self.dropout = dropout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        result = self.base(x)  # first, as upstream: the order autograd sums x's gradients in follows it
        update = F.linear(F.linear(x, self.lora_A), self.lora_B)
        if self.dropout > 0:
            update = F.dropout(update, self.dropout, self.training)
        return result + update * self.scaling


def _targets(model: nn.Module, cfg: LoRAConfig, architecture: str) -> list[tuple[nn.Module, str, nn.Linear]]:
    """(parent, name, layer) of every targeted linear layer, in upstream's order."""
    found = []

    def within(root: nn.Module, names: list[str]) -> None:
        for full, module in list(root.named_modules()):
            short = full.rsplit(".", 1)[-1]
            if isinstance(module, nn.Linear) and short in names:
                found.append((root.get_submodule(full.rsplit(".", 1)[0]) if "." in full else root, short, module))

    if cfg.enable_lm:
        within(model.base_lm, cfg.target_modules_lm)
        within(model.residual_lm, cfg.target_modules_lm)
    if cfg.enable_dit:
        within(model.feat_decoder.estimator, cfg.target_modules_dit)
    if cfg.enable_proj:
        for name in cfg.projections(architecture):
            layer = getattr(model, name, None)
            if isinstance(layer, nn.Linear):
                found.append((model, name, layer))
    return found


def add_lora(model: nn.Module, cfg: LoRAConfig, architecture: str) -> int:
    """Wrap every targeted layer of `model` (a `VoxCPMModel`) in an adapter, drawing each A as upstream
    does; returns how many layers. Their parameters train; nothing else is frozen here."""
    if cfg.r < 1:
        raise ValueError(f"LoRA rank must be at least 1 (got {cfg.r})")
    targets = _targets(model, cfg, architecture)
    for parent, name, layer in targets:
        setattr(parent, name, LoRALinear(layer, layer.in_features, layer.out_features, cfg.r, cfg.alpha, cfg.dropout))
    return len(targets)


def adapters(model: nn.Module) -> dict[str, torch.Tensor]:
    """Every adapter's tensors in upstream's names (`<layer>.lora_A`, `<layer>.lora_B`)."""
    return {f"{name}.{part}": getattr(m, part) for name, m in model.named_modules() if isinstance(m, LoRALinear) for part in ("lora_A", "lora_B")}


def load_adapters(model: nn.Module, state: dict[str, torch.Tensor], where: str | Path) -> None:
    """Copy a checkpoint's adapters into `model`'s (every one, and nothing else, or a ValueError)."""
    mine = adapters(model)
    missing, unexpected = sorted(set(mine) - set(state)), sorted(set(state) - set(mine))
    if missing or unexpected:
        raise ValueError(f"{where}: the LoRA weights do not fit the model's adapters (missing: {missing[:3]}, unexpected: {unexpected[:3]})")
    with torch.no_grad():
        for key, value in state.items():
            if value.shape != mine[key].shape:
                raise ValueError(f"{where}: {key} is {tuple(value.shape)}, the adapter {tuple(mine[key].shape)}")
            mine[key].copy_(value)


def as_config(given) -> LoRAConfig:
    """A `LoRAConfig` from None (upstream's default for loading weights: the LMs and the DiT), a
    dict of its fields, or an object with them (upstream's pydantic `LoRAConfig`)."""
    if given is None:
        return LoRAConfig(enable_lm=True, enable_dit=True)
    if isinstance(given, LoRAConfig):
        return given
    fields = dict(given) if isinstance(given, dict) else {f: getattr(given, f) for f in LoRAConfig.__dataclass_fields__ if hasattr(given, f)}
    unknown = sorted(set(fields) - set(LoRAConfig.__dataclass_fields__))
    if unknown:
        raise ValueError(f"unknown LoRA settings {unknown}")
    cfg = LoRAConfig(**fields)
    names = (cfg.target_modules_lm, cfg.target_modules_dit, cfg.target_proj_modules or [])
    number = (int, float)
    problems = [
        what
        for what, bad in (
            ("r must be a whole number, at least 1", not isinstance(cfg.r, int) or isinstance(cfg.r, bool) or cfg.r < 1),
            ("alpha must be a number", not isinstance(cfg.alpha, number) or isinstance(cfg.alpha, bool)),
            ("dropout must be a number from 0 to below 1", not isinstance(cfg.dropout, number) or not 0 <= cfg.dropout < 1),
            (
                "enable_lm, enable_dit and enable_proj must be true or false",
                not all(isinstance(v, bool) for v in (cfg.enable_lm, cfg.enable_dit, cfg.enable_proj)),
            ),
            ("the target lists must be lists of layer names", not all(isinstance(v, list) and all(isinstance(n, str) for n in v) for v in names)),
        )
        if bad
    ]
    if problems:
        raise ValueError("LoRA settings: " + "; ".join(problems))
    return cfg


def read_adapters(path: Path) -> dict[str, torch.Tensor]:
    """A LoRA weights file: safetensors, or a torch pickle (`.ckpt`, `.pth`, read with
    `weights_only`) holding the tensors or `{"state_dict": ...}`, as upstream reads both."""
    if path.suffix == ".safetensors":
        from safetensors.torch import load_file

        return load_file(str(path))
    found = torch.load(path, map_location="cpu", weights_only=True)
    found = found.get("state_dict", found) if isinstance(found, dict) else found
    if not isinstance(found, dict) or not all(isinstance(k, str) and torch.is_tensor(v) for k, v in found.items()):
        raise ValueError(f"{path}: not a file of LoRA tensors")
    return found


def read_lora_config(folder: Path) -> LoRAConfig:
    """The adapters' config in a LoRA checkpoint folder's `lora_config.json` (its `lora_config`)."""
    found = read_json_object(folder / CONFIG_FILE).get("lora_config")
    if not isinstance(found, dict):
        raise ValueError(f"{folder / CONFIG_FILE}: no lora_config object")
    try:
        return as_config(found)
    except (TypeError, ValueError) as e:
        raise ValueError(f"{folder / CONFIG_FILE}: {e}") from e
