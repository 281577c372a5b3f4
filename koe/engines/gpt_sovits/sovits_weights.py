"""Reading a released SoVITS file (`s2G*.pth`) and telling its version, as upstream's
`TTS.init_vits_weights` does, without running code from it.

The file is a `torch.save` zip of `{"weight": {name: fp16 tensor}, "config": hps, "info": str}`
(`enc_q`, the training-only posterior encoder, left out). Upstream marks newer files by
overwriting the zip's first two bytes ("PK") with a version: b"00" v1, b"01" v2, b"02" v3,
b"03"/b"04" v3/v4 LoRA, b"05" v2Pro, b"06" v2ProPlus. `read_sovits` loads a file with
`torch.load(weights_only=True)`: a plain zip memory-mapped, a marked one from a copy in memory
with "PK" put back (the file itself is never changed). `hps` is a plain dict in released files; files from upstream's training script hold its
`utils.HParams` (an attribute bag of dicts), which is read here as a `Hyperparameters` (data
only: the unpickler may set its attributes and nothing else) and turned into dicts.

Version (`sniff_version`, upstream's `get_sovits_version_from_path_fast`): the md5 of the first
8 KiB names upstream's pretrained files; else the header; else a plain zip is v1 below 82,978
KiB, v2 below 700 MiB, v3 above. Then the weights decide the symbol set: `enc_p.text_embedding`
with 322 rows is v1, else v2; a v1/v2 file's version is its symbol set's (upstream builds the
model from that), a Pro or v3/v4 file keeps its header's.

Loading (`sovits_state`): tensors upcast to float32 as upstream's `load_state_dict` copies the
fp16 weights into its float32 model, then each weight-normed pair folded into its `weight` with
`torch._weight_norm(v, g, 0)` (the op upstream's hook runs on every call: the same bits, once).
Upstream loads non-strictly; koe loads strictly what inference needs and returns the names it
ignores: `enc_q.*` (present in training checkpoints), the codebook's `inited`, `cluster_size`
and `embed_avg` (training state). Anything else missing or unexpected is an error naming it.
"""

from __future__ import annotations

import hashlib
import io
import pickle
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from koe.engines.gpt_sovits.quantizer import CODEBOOK
from koe.engines.gpt_sovits.sovits import SoVITS
from koe.engines.gpt_sovits.sovits_config import SYMBOLS, SoVITSConfig
from koe.runtime.weights import WeightsError, build_on_meta, check_state_fits, fold_weight_norm

__all__ = [
    "HEADERS",
    "IGNORED",
    "Hyperparameters",
    "SoVITSFile",
    "SoVITSVersion",
    "load_sovits",
    "read_sovits",
    "released_shapes",
    "sniff_version",
    "sovits_state",
    "weights_version",
]


@dataclass(frozen=True)
class SoVITSVersion:
    """What upstream makes of a file: its symbol set ("v1" / "v2"), its model ("v1", "v2", "v2Pro",
    "v2ProPlus", "v3", "v4") and whether it is a LoRA over a pretrained model (v3/v4)."""

    symbols: str
    model: str
    lora: bool = False


HEADERS = {
    b"00": SoVITSVersion("v1", "v1"),
    b"01": SoVITSVersion("v2", "v2"),
    b"02": SoVITSVersion("v2", "v3"),
    b"03": SoVITSVersion("v2", "v3", lora=True),
    b"04": SoVITSVersion("v2", "v4", lora=True),
    b"05": SoVITSVersion("v2", "v2Pro"),
    b"06": SoVITSVersion("v2", "v2ProPlus"),
}
PRETRAINED_MD5 = {  # md5 of the first 8 KiB of upstream's pretrained files
    "dc3c97e17592963677a4a1681f30c653": SoVITSVersion("v2", "v2"),  # s2G488k.pth (v1's pretrained)
    "43797be674a37c1c83ee81081941ed0f": SoVITSVersion("v2", "v3"),  # s2Gv3.pth
    "6642b37f3dbb1f76882b69937c95a5f3": SoVITSVersion("v2", "v2"),  # s2G2333k.pth
    "4f26b9476d0c5033e04162c486074374": SoVITSVersion("v2", "v4"),  # s2Gv4.pth
    "c7e9fce2223f3db685cdfa1e6368728a": SoVITSVersion("v2", "v2Pro"),  # s2Gv2Pro.pth
    "66b313e39455b57ab1b0bc0b239c9d0a": SoVITSVersion("v2", "v2ProPlus"),  # s2Gv2ProPlus.pth
}
V1_MAX_BYTES = 82978 * 1024  # a plain zip below this is v1, below V3_MIN_BYTES v2, else v3
V3_MIN_BYTES = 700 * 1024 * 1024
SUPPORTED = ("v1", "v2", "v2Pro", "v2ProPlus")
IGNORED = ("enc_q.", "quantizer.vq.layers.0._codebook.inited", "quantizer.vq.layers.0._codebook.cluster_size", "quantizer.vq.layers.0._codebook.embed_avg")
_HPARAMS = ("utils.HParams", "GPT_SoVITS.utils.HParams")  # upstream's training script pickles its hps as utils.HParams


class Hyperparameters:
    """Stands in for upstream's `utils.HParams` while a `.pth` is unpickled: a bag of attributes
    (the unpickler sets its `__dict__`, nothing runs)."""

    def as_dict(self) -> dict[str, Any]:
        return {k: v.as_dict() if isinstance(v, Hyperparameters) else v for k, v in vars(self).items()}


@dataclass
class SoVITSFile:
    """A read `.pth`: its tensors as stored (`weight`), its config as plain dicts, its `info`, version."""

    weight: dict[str, torch.Tensor]
    hps: dict[str, Any]
    info: str
    version: SoVITSVersion


def sniff_version(path: str | Path) -> SoVITSVersion:
    """The version upstream reads off the file before loading it (md5, header, size)."""
    path = Path(path)
    with open(path, "rb") as f:
        head = f.read(8192)
    md5 = hashlib.md5(head).hexdigest()
    if md5 in PRETRAINED_MD5:
        return PRETRAINED_MD5[md5]
    if head[:2] != b"PK":
        if head[:2] not in HEADERS:
            raise WeightsError(f"{path}: not a SoVITS checkpoint (it starts with {head[:2]!r}, neither a zip nor one of upstream's version headers)")
        return HEADERS[head[:2]]
    size = path.stat().st_size
    if size < V1_MAX_BYTES:
        return SoVITSVersion("v1", "v1")
    return SoVITSVersion("v2", "v2") if size < V3_MIN_BYTES else SoVITSVersion("v2", "v3")


def weights_version(weight: dict[str, torch.Tensor], sniffed: SoVITSVersion) -> SoVITSVersion:
    """The version upstream builds: the symbol set from `enc_p.text_embedding`'s rows; a v1/v2
    file's model is that symbol set, a Pro or v3/v4 file's stays its header's."""
    table = weight.get("enc_p.text_embedding.weight")
    symbols = "v1" if table is not None and table.shape[0] == SYMBOLS["v1"] else "v2"
    model = sniffed.model if sniffed.model in ("v3", "v4") or "Pro" in sniffed.model else symbols
    return SoVITSVersion(symbols, model, sniffed.lora)


def _load(path: Path) -> Any:
    """`torch.load(weights_only=True)` of the file, or of a copy in memory with "PK" put back over a
    version header (a plain zip is memory-mapped)."""
    safe = [(Hyperparameters, name) for name in _HPARAMS]
    with open(path, "rb") as f:
        plain = f.read(2) == b"PK"
    try:
        with torch.serialization.safe_globals(safe):
            if plain:
                return torch.load(path, map_location="cpu", weights_only=True, mmap=True)
            data = path.read_bytes()
            return torch.load(io.BytesIO(b"PK" + data[2:]), map_location="cpu", weights_only=True)
    except pickle.UnpicklingError as e:
        raise WeightsError(f"{path}: refused to load: it holds more than tensors and configs (koe never runs code from a checkpoint): {e}") from e
    except (RuntimeError, EOFError, OSError, ValueError) as e:  # torch's zip reader: RuntimeError, or ValueError on a torn file
        raise WeightsError(f"{path}: not a readable checkpoint ({e})") from e


def _plain(obj: Any) -> Any:
    if isinstance(obj, Hyperparameters):
        return obj.as_dict()
    if isinstance(obj, dict):
        return {k: _plain(v) for k, v in obj.items()}
    return obj


def read_sovits(path: str | Path) -> SoVITSFile:
    """A SoVITS `.pth`: its header handled (restored to "PK" in memory), loaded with weights_only."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no SoVITS checkpoint at {path}")
    sniffed = sniff_version(path)
    ckpt = _load(path)
    if not isinstance(ckpt, dict) or not isinstance(ckpt.get("weight"), dict) or "config" not in ckpt:
        keys = sorted(ckpt) if isinstance(ckpt, dict) else type(ckpt).__name__
        raise WeightsError(f"{path}: not a SoVITS checkpoint (expected 'weight' and 'config', found {keys})")
    hps = _plain(ckpt["config"])
    if not isinstance(hps, dict):
        raise WeightsError(f"{path}: its config is a {type(hps).__name__}, not a mapping")
    weight = dict(ckpt["weight"])
    return SoVITSFile(weight, hps, str(ckpt.get("info", "")), weights_version(weight, sniffed))


_G, _V = ".weight_g", ".weight_v"


def sovits_state(weight: dict[str, torch.Tensor], dtype: torch.dtype = torch.float32) -> tuple[dict[str, torch.Tensor], list[str]]:
    """The stored tensors as koe's `SoVITS` holds them (floats as `dtype`, weight norm folded), and
    the names left out as training state (`IGNORED`)."""
    ignored = sorted(k for k in weight if k.startswith(IGNORED))
    kept = {k: (v.to(dtype) if v.is_floating_point() else v) for k, v in weight.items() if not k.startswith(IGNORED)}
    return fold_weight_norm(kept), ignored


def load_sovits(path: str | Path) -> SoVITS:
    """A SoVITS v1/v2/v2Pro/v2ProPlus `.pth` -> koe's model in float32, eval mode, with `ignored` (the stored names
    left out as training state) and `info` (the file's). Strict: a missing, unexpected or
    misshapen tensor is a `WeightsError` naming it."""
    file = read_sovits(path)
    if file.version.model not in SUPPORTED:
        raise WeightsError(f"{path}: SoVITS {file.version.model} is not supported yet (koe runs {', '.join(SUPPORTED)})")
    config = SoVITSConfig.from_hps(file.hps, file.version.model)
    state, ignored = sovits_state(file.weight)
    model = build_on_meta(lambda: SoVITS(config))
    check_state_fits(state, model, f"{path}: does not match SoVITS {config.version}")
    model.load_state_dict(state, strict=True, assign=True)
    model.ignored, model.info = tuple(ignored), file.info
    return model.eval()


WEIGHT_NORMED = (  # the layers upstream wraps in torch.nn.utils.weight_norm (stored as weight_g, weight_v)
    r"flow\.flows\.\d+\.enc\.(cond_layer|in_layers\.\d+|res_skip_layers\.\d+)",
    r"dec\.(ups\.\d+|resblocks\.\d+\.convs[12]?\.\d+)",
)
_TRAINING_BUFFERS = {"inited": (1,), "cluster_size": (1024,), "embed_avg": (1024, 768)}


def released_shapes(config: SoVITSConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor a released `.pth` of this architecture stores, with its shape, in koe's module
    order: weight-normed layers as `weight_g` (out, 1, 1) and `weight_v`, the codebook's training
    buffers beside it; no `enc_q` (upstream's saver leaves it out)."""
    model = build_on_meta(lambda: SoVITS(config))
    shapes: dict[str, tuple[int, ...]] = {}
    for name, t in model.state_dict().items():
        layer = name.removesuffix(".weight")
        if name.endswith(".weight") and any(re.fullmatch(p, layer) for p in WEIGHT_NORMED):
            shapes[layer + _G] = (t.shape[0],) + (1,) * (t.dim() - 1)
            shapes[layer + _V] = tuple(t.shape)
        else:
            shapes[name] = tuple(t.shape)
        if name == "quantizer." + CODEBOOK:
            for buffer, shape in _TRAINING_BUFFERS.items():
                shapes[f"quantizer.vq.layers.0._codebook.{buffer}"] = shape
    return shapes
