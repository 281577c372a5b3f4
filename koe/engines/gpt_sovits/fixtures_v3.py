"""Random-weight GPT-SoVITS v3/v4 models in the released layouts, deterministic from a seed.

- `write_sovits_v3`: a `s2Gv3.pth` / `s2Gv4.pth` as upstream's saver writes it (`{"weight": fp16,
  "config": hps, "info"}`, header b"02" for v3; v4 has no header of its own, so b"04" (v4 LoRA)
  is written only for a LoRA file and a plain v4 file must be named by upstream's md5 or size: the
  fixture marks it b"02"-style only where asked). The DiT is upstream's fixed size (1024 wide, 22
  blocks: ~310 M parameters, 620 MB in fp16) unless `dit` says otherwise (koe's own tests only:
  upstream's `SynthesizerTrnV3` cannot build another).
- `write_sovits_v3_lora`: a LoRA file over such a model (rank `rank`), in peft's names.
- `write_bigvgan`: a BigVGAN folder (`config.json`, `bigvgan_generator.pt` with weight-normed convs
  stored as `weight_g` / `weight_v`, as NVIDIA's release is).
- `write_vocoder_v4`: v4's `vocoder.pth` (a plain state dict of folded weights).
- `random_cfm_state`: a CFM's state (`estimator.*`) at any DiT size, float32, for module goldens.

Values are drawn in each state's name order from one generator: weights ~ N(0, 1 / fan_in), biases
and the Snake parameters small, norm gains near 1; buffers that are not weights (`inv_freq`, the
alias-free filters, the codebook's `inited`) hold what upstream computes or needs.
"""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import torch

from koe.engines.gpt_sovits.bigvgan import BigVGAN, BigVGANConfig
from koe.engines.gpt_sovits.cfm import CFM
from koe.engines.gpt_sovits.dit import DiTConfig
from koe.engines.gpt_sovits.sovits_config import SoVITSConfig
from koe.engines.gpt_sovits.sovits_v3_weights import LORA_PREFIX, LORA_TARGETS, released_shapes_v3
from koe.engines.gpt_sovits.vocoder_v4 import VocoderConfig, VocoderV4
from koe.runtime.weights import build_on_meta

__all__ = [
    "random_bigvgan_state",
    "random_cfm_state",
    "random_sovits_v3_state",
    "random_vocoder_state",
    "sovits_v3_hps",
    "write_bigvgan",
    "write_sovits_v3",
    "write_sovits_v3_lora",
    "write_vocoder_v4",
]

HEADER = {"v3": b"02", "v4": None}  # v4's pretrained file is told by its md5 (or, unmarked, would read as v3)
LORA_HEADER = {"v3": b"03", "v4": b"04"}


def _value(name: str, shape: tuple[int, ...], g: torch.Generator, computed: dict[str, torch.Tensor]) -> torch.Tensor:
    if name in computed:  # buffers upstream computes (rotary frequencies, filters)
        return computed[name].clone()
    if name.endswith("._codebook.inited"):
        return torch.ones(shape)
    if name.endswith("._codebook.cluster_size"):
        return torch.rand(shape, generator=g) * 10
    if name.endswith(".weight_g"):
        return 0.5 + 0.5 * torch.rand(shape, generator=g)
    if ".act." in name:  # BigVGAN's Snake / SnakeBeta parameters (log scale)
        return 0.1 * torch.randn(shape, generator=g)
    if name.endswith((".gamma", "norm.weight")) and ".grn." not in name:  # LayerNorm gains
        return 1 + 0.1 * torch.randn(shape, generator=g)
    if name.endswith((".bias", ".beta", ".grn.gamma", "norm.bias")):
        return 0.02 * torch.randn(shape, generator=g)
    if name.endswith(("emb_rel_k", "emb_rel_v")):
        return torch.randn(shape, generator=g) * shape[-1] ** -0.5
    if name.endswith(("text_embedding.weight", "._codebook.embed", "._codebook.embed_avg")):
        return torch.randn(shape, generator=g)
    fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
    return torch.randn(shape, generator=g) / math.sqrt(fan_in)


def _fill(shapes: dict[str, tuple[int, ...]], seed: int, computed: dict[str, torch.Tensor] | None = None) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: _value(name, shape, g, computed or {}) for name, shape in shapes.items()}


def _computed(module: torch.nn.Module, suffixes: tuple[str, ...]) -> dict[str, torch.Tensor]:
    """The module's own (CPU-built) buffers whose names end with `suffixes`."""
    return {n: b for n, b in module.named_buffers() if n.endswith(suffixes) and not b.is_meta}


def random_cfm_state(config: DiTConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """A CFM's float32 state (`estimator.*`), for module goldens at small sizes."""
    model = build_on_meta(lambda: CFM(config))
    shapes = {n: tuple(t.shape) for n, t in model.state_dict().items()}
    return _fill(shapes, seed, _computed(model, ("inv_freq",)))


def sovits_v3_hps() -> dict:
    """The `config` of upstream's v3/v4 training (v2's sizes; v3/v4 read the text encoder's)."""
    return SoVITSConfig().hps() | {"save_weight_dir": "SoVITS_weights_v3", "name": "fixture"}


def random_sovits_v3_state(version: str = "v3", seed: int = 0, dit: DiTConfig | None = None) -> dict[str, torch.Tensor]:
    """The `weight` mapping of a random v3/v4 file: every released tensor, float16 as released."""
    shapes = released_shapes_v3(SoVITSConfig(), version, dit)
    head = (dit or DiTConfig()).dim_head
    computed = {"cfm.estimator.rotary_embed.inv_freq": 1.0 / (10000 ** (torch.arange(0, head, 2).float() / head))}
    return {k: v.half() for k, v in _fill(shapes, seed, computed).items()}


def _save(checkpoint: dict, path: Path, header: bytes | None) -> Path:
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    data = buffer.getvalue()
    path.write_bytes(data if header is None else header + data[2:])
    return path


def write_sovits_v3(path: str | Path, version: str = "v3", seed: int = 0, dit: DiTConfig | None = None, header: bytes | None = b"") -> Path:
    """A random v3/v4 `.pth` at `path`; `header`: b"" for the version's own (v3 b"02", v4 none), None
    for a plain zip, or given."""
    mark = HEADER[version] if header == b"" else header
    checkpoint = {"weight": random_sovits_v3_state(version, seed, dit), "config": sovits_v3_hps(), "info": "pretrained_s2G_" + version}
    return _save(checkpoint, Path(path), mark)


def write_sovits_v3_lora(path: str | Path, version: str = "v3", seed: int = 0, rank: int = 8, dit: DiTConfig | None = None) -> Path:
    """A random LoRA file over a v3/v4 model, as upstream's LoRA training saves one (header b"03"/b"04"):
    the LoRA pairs of every attention projection under peft's names, the parts trained whole
    (`ref_enc`, `bridge`, `wns1`, `linear_mel`) and the buffers, fp16; `lora_rank` beside them."""
    full = random_sovits_v3_state(version, seed, dit)
    g = torch.Generator().manual_seed(seed + 1)
    weight: dict[str, torch.Tensor] = {}
    for name, value in full.items():
        if name.startswith(("ref_enc.", "bridge.", "wns1.", "linear_mel.", "quantizer.")):
            weight[name] = (
                (value.float() * (1 + 0.1 * torch.randn(value.shape, generator=g))).half() if value.is_floating_point() and "_codebook" not in name else value
            )
        elif name == "cfm.estimator.rotary_embed.inv_freq":
            weight[LORA_PREFIX + name[len("cfm.") :]] = value
    c = dit or DiTConfig()
    blocks, width, inner = c.depth, c.dim, c.heads * c.dim_head
    for i in range(blocks):
        for target in LORA_TARGETS:
            layer = f"{LORA_PREFIX}estimator.transformer_blocks.{i}.attn.{target}"
            n_in, n_out = (inner, width) if target == "to_out.0" else (width, inner)
            weight[f"{layer}.lora_A.default.weight"] = (torch.randn(rank, n_in, generator=g) / math.sqrt(n_in)).half()
            weight[f"{layer}.lora_B.default.weight"] = (0.05 * torch.randn(n_out, rank, generator=g)).half()
    checkpoint = {"weight": weight, "config": sovits_v3_hps(), "info": "1epoch_10iteration", "lora_rank": rank}
    return _save(checkpoint, Path(path), LORA_HEADER[version])


def random_bigvgan_state(config: BigVGANConfig, seed: int = 0) -> dict[str, torch.Tensor]:
    """BigVGAN's float32 state as the release stores it (weight-normed convs as weight_g / weight_v)."""
    model = BigVGAN(config)
    shapes: dict[str, tuple[int, ...]] = {}
    for name, t in model.state_dict().items():
        if name.endswith(".weight") and t.dim() == 3 and ".filter" not in name:
            shapes[name[:-7] + ".weight_g"] = (t.shape[0],) + (1,) * (t.dim() - 1)
            shapes[name[:-7] + ".weight_v"] = tuple(t.shape)
        else:
            shapes[name] = tuple(t.shape)
    return _fill(shapes, seed, _computed(model, ("filter",)))


def write_bigvgan(folder: str | Path, config: BigVGANConfig | None = None, seed: int = 0) -> Path:
    """A random BigVGAN release folder (`config.json`, `bigvgan_generator.pt`)."""
    config = config or BigVGANConfig()
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(config.to_json(), indent=4))
    torch.save({"generator": random_bigvgan_state(config, seed)}, folder / "bigvgan_generator.pt")
    return folder


def random_vocoder_state(config: VocoderConfig | None = None, seed: int = 0) -> dict[str, torch.Tensor]:
    """v4's vocoder state (folded weights), float32; the upsampling convs' weights doubled so the
    random model's output follows its input."""
    model = build_on_meta(lambda: VocoderV4(config))
    state = _fill({n: tuple(t.shape) for n, t in model.state_dict().items()}, seed)
    return {k: v * 2 if k.startswith("ups.") and k.endswith(".weight") else v for k, v in state.items()}


def write_vocoder_v4(path: str | Path, config: VocoderConfig | None = None, seed: int = 0) -> Path:
    path = Path(path)
    torch.save(random_vocoder_state(config, seed), path)
    return path
