"""Random-weight SoVITS files (`s2G*.pth`) in the released format, deterministic from a seed.

The file is what upstream's saver writes: `torch.save` of `{"weight": fp16 tensors, "config": the
hps mapping, "info": "<epoch>epoch_<step>iteration"}` with the version header over the zip's first
two bytes (b"01" v2, b"00" v1, b"05" v2Pro, b"06" v2ProPlus; `header=None` keeps "PK", as
upstream's older saver leaves v1/v2 files), no `enc_q`, and the codebook's `inited` buffer set to 1 (else upstream's
first encode would run its distributed k-means initialisation).

Sizes: "tiny" (tests: 2 text-encoder layers, a 96-wide feed-forward, a 64-channel generator with
two residual kernels; the widths upstream's code fixes stay: 192 hidden, 512 reference embedding,
768 HuBERT, the flow's 4 x 4 WaveNet layers; v2Pro/ProPlus's reference embedding, which upstream
projects to the timbre encoder's 512 and so leaves free, 128 wide: its `sv_emb` reads 20,480
numbers per channel) and "real" (the released architecture: v2 ~42 M parameters; v2Pro/ProPlus
with a 1024-wide reference embedding). Tensors are filled in `released_shapes` order from one generator seeded with `seed`,
scaled so the random model's waveform stays well inside (-1, 1).
"""

from __future__ import annotations

import functools
import io
import math
from pathlib import Path

import torch

from koe.engines.gpt_sovits.sovits_config import SoVITSConfig
from koe.engines.gpt_sovits.sovits_weights import released_shapes

__all__ = ["SIZES", "random_sovits_state", "sovits_config", "sovits_file_bytes", "write_sovits"]

SIZES = ("tiny", "real")
HEADER = {"v1": b"00", "v2": b"01", "v2Pro": b"05", "v2ProPlus": b"06"}
PRO_GIN = {"real": 1024, "tiny": 128}  # v2Pro/ProPlus's timbre embedding width (free for them, 1024 released)


def sovits_config(size: str = "tiny", version: str = "v2") -> SoVITSConfig:
    """The architecture of a fixture size (v2Pro/ProPlus: a timbre embedding 1024 wide as released,
    128 tiny; v2ProPlus with its first upsampling kernel of 20, and "real" its 768-channel generator)."""
    pro = {"gin_channels": PRO_GIN.get(size, 0)} if version in ("v2Pro", "v2ProPlus") else {}
    plus = {"upsample_kernel_sizes": (20, 16, 8, 2, 2)} if version == "v2ProPlus" else {}
    if size == "real":
        wide = {"upsample_initial_channel": 768} if version == "v2ProPlus" else {}
        return SoVITSConfig(version=version, **pro, **plus, **wide)
    if size == "tiny":
        return SoVITSConfig(
            version=version,
            filter_channels=96,
            n_layers=2,
            upsample_initial_channel=64,
            resblock_kernel_sizes=(3, 5),
            resblock_dilation_sizes=((1, 3, 5), (1, 3, 5)),
            **pro,
            **plus,
        )
    raise ValueError(f"no SoVITS fixture size {size!r} (sizes: {', '.join(SIZES)})")


def _value(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """One tensor of the random model, by what the name says it is."""
    if name == "prelu.weight":  # v2Pro's slopes (PReLU's own initial 0.25, spread)
        return 0.25 + 0.05 * torch.randn(shape, generator=g)
    if name.endswith("._codebook.inited"):
        return torch.ones(shape)
    if name.endswith("._codebook.cluster_size"):
        return torch.rand(shape, generator=g) * 10
    if name.endswith(".weight_g"):  # the generator's upsampling gains its signal, its residual blocks keep it
        scale = {"dec.ups": 1.8, "dec.resblocks": 0.4}.get(name[: name.find(".", 4)], 1.0)
        return scale * (0.5 + 0.5 * torch.rand(shape, generator=g))
    if name.endswith(".gamma"):
        return 1 + 0.1 * torch.randn(shape, generator=g)
    if name.endswith((".beta", ".bias")):  # small in the generator, whose biases would otherwise outweigh its input
        return (0.01 if name.startswith("dec.") else 0.05) * torch.randn(shape, generator=g)
    if name.endswith(("emb_rel_k", "emb_rel_v")):
        return torch.randn(shape, generator=g) * shape[-1] ** -0.5
    if name.endswith(("text_embedding.weight", "._codebook.embed", "._codebook.embed_avg")):
        return torch.randn(shape, generator=g)
    fan_in = math.prod(shape[1:]) if len(shape) > 1 else 1
    scale = 0.3 if name.startswith("flow.") and name.endswith(".post.weight") else 1.0
    return scale * torch.randn(shape, generator=g) / math.sqrt(fan_in)


@functools.lru_cache(maxsize=4)
def _state(size: str, seed: int, version: str) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: _value(name, shape, g).half() for name, shape in released_shapes(sovits_config(size, version)).items()}


def random_sovits_state(size: str = "tiny", seed: int = 0, version: str = "v2") -> dict[str, torch.Tensor]:
    """The `weight` mapping of a random file: every released tensor, float16 as released (a new
    mapping each call; the tensors of recent calls are shared, never written to)."""
    return dict(_state(size, seed, version))


@functools.lru_cache(maxsize=4)
def _zip(size: str, seed: int, version: str) -> bytes:
    checkpoint = {"weight": random_sovits_state(size, seed, version), "config": sovits_config(size, version).hps(), "info": "8epoch_2333iteration"}
    buffer = io.BytesIO()
    torch.save(checkpoint, buffer)
    return buffer.getvalue()


def sovits_file_bytes(size: str = "tiny", seed: int = 0, version: str = "v2", header: bytes | None = b"") -> bytes:
    """The bytes of a random `.pth`; `header`: b"" for the version's own, None for a plain zip, or given."""
    data = _zip(size, seed, version)
    mark = HEADER[version] if header == b"" else header
    return data if mark is None else mark + data[2:]


def write_sovits(path: str | Path, size: str = "tiny", seed: int = 0, version: str = "v2", header: bytes | None = b"") -> Path:
    """Writes a random SoVITS `.pth` at `path` (a folder: `s2G_<size>_<version>.pth` in it)."""
    path = Path(path)
    if path.is_dir():
        path = path / f"s2G_{size}_{version}.pth"
    path.write_bytes(sovits_file_bytes(size, seed, version, header))
    return path
