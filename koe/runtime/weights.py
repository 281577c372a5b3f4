"""Weight loading: strict by default, single file or sharded with an index.

Safetensors where released so. Pickled checkpoints (`.pt`, `.pth`, `.bin`, `.ckpt`, as some
families release them) are read with `torch.load(weights_only=True)`: tensors and plain
containers only, never code; anything else in the pickle is refused.
"""

from __future__ import annotations

import hashlib
import json
import mmap
import pickle
import sys
import threading
import warnings
import zipfile
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TypeVar

import torch
from safetensors import safe_open
from torch import nn

from koe.runtime.files import read_json_object

M = TypeVar("M", bound=nn.Module)


class WeightsError(ValueError):
    """A checkpoint does not fit the model (missing, unexpected or misshapen tensors), is damaged, or is not there."""


def state_sha256(state: dict[str, torch.Tensor]) -> str:
    """One hash of a state dict's names, shapes, dtypes and bytes, in its order (what a family's golden
    files record of the random weights they were made from)."""
    h = hashlib.sha256()
    for name, t in state.items():
        t = t.detach().contiguous().cpu()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype};".encode())
        h.update(t.reshape(-1).view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()


def files_sha256(paths: Iterable[str | Path]) -> str:
    """One hash of files' names (without their folder) and bytes, in the order given."""
    h = hashlib.sha256()
    for path in paths:
        path = Path(path)
        data = path.read_bytes()
        h.update(f"{path.name}:{len(data)};".encode())
        h.update(data)
    return h.hexdigest()


_WEIGHT_NORM = {  # suffix -> (half, the other half's suffix)
    ".weight_g": ("g", ".weight_v"),
    ".weight_v": ("v", ".weight_g"),
    ".parametrizations.weight.original0": ("g", ".parametrizations.weight.original1"),
    ".parametrizations.weight.original1": ("v", ".parametrizations.weight.original0"),
}


def _weight_norm_half(key: str) -> str | None:
    return next((s for s in _WEIGHT_NORM if key.endswith(s)), None)


def fold_weight_norm(state: dict[str, torch.Tensor], float64: tuple[str, ...] = ()) -> dict[str, torch.Tensor]:
    """A state dict with each weight-normed pair (`weight_g` / `weight_v` as `torch.nn.utils.weight_norm`
    saves it, or the parametrization's `original0` / `original1`) replaced, where its first half stood,
    by `<layer>.weight` = `torch._weight_norm(v, g, 0)`: the op weight norm's forward runs, so the
    folded weight has the bits the reference computes at each call. Under a prefix in `float64`
    everything is cast to float64 first (folded and kept so), as a reference's `.to(torch.float64)`
    runs it. A pair missing a half is a `WeightsError` naming the layer and the half."""
    out: dict[str, torch.Tensor] = {}
    for key, value in state.items():
        suffix = _weight_norm_half(key)
        if suffix is None:
            out[key] = value.double() if key.startswith(float64) else value
            continue
        layer = key[: -len(suffix)]
        half, other = _WEIGHT_NORM[suffix]
        if layer + other not in state:
            raise WeightsError(f"{layer}: a weight-normed layer needs both {suffix[1:]} and {other[1:]}; {other[1:]} is missing")
        if layer + ".weight" in out:
            continue
        g, v = (value, state[layer + other]) if half == "g" else (state[layer + other], value)
        if key.startswith(float64):
            g, v = g.double(), v.double()
        out[layer + ".weight"] = torch._weight_norm(v, g, 0)
    return out


def check_state_fits(state: dict[str, torch.Tensor], module: nn.Module, what: str) -> None:
    """A `WeightsError` "{what}: missing [...]; unexpected [...]; misshapen ['name (stored) (expected
    (shape))']" (the first 8 names of each kind found) unless `state` has exactly `module`'s tensors
    (its parameters and persistent buffers; the module may live on the meta device) in their shapes."""
    expected = module.state_dict()
    missing = sorted(set(expected) - set(state))
    unexpected = sorted(set(state) - set(expected))
    misshapen = [f"{k} {tuple(state[k].shape)} (expected {tuple(v.shape)})" for k, v in expected.items() if k in state and state[k].shape != v.shape]
    parts = [
        f"{kind} {names[:8]}{' ...' if len(names) > 8 else ''}"
        for kind, names in (("missing", missing), ("unexpected", unexpected), ("misshapen", misshapen))
        if names
    ]
    if parts:
        raise WeightsError(f"{what}: {'; '.join(parts)}")


def weight_files(folder: Path, stem: str = "model", index_first: bool = False) -> list[Path]:
    """The safetensors files of a folder: `model.safetensors`, or the shards listed by
    `model.safetensors.index.json` (`index_first`: the shards where both are there, as some
    upstreams prefer them)."""
    folder = Path(folder)
    single = folder / f"{stem}.safetensors"
    index = folder / f"{stem}.safetensors.index.json"
    if single.exists() and not (index_first and index.exists()):
        return [single]
    if index.exists():
        weight_map = read_json_object(index, WeightsError).get("weight_map")
        if not isinstance(weight_map, dict) or not all(isinstance(name, str) for name in weight_map.values()):
            raise WeightsError(f"{index}: not a valid safetensors index (no weight_map of tensor names to file names)")
        shards = sorted({folder / name for name in weight_map.values()})
        missing = [str(s) for s in shards if not s.exists()]
        if missing:
            raise WeightsError(f"{index} lists shards that are missing: {', '.join(missing)}")
        return shards
    raise WeightsError(f"no weights in {folder}: expected {single.name} or {index.name}")


PICKLE_SUFFIXES = (".pt", ".pth", ".bin", ".ckpt")


def checkpoint_tensors(path: Path) -> Iterator[tuple[str, torch.Tensor]]:
    """(name, tensor) pairs of a checkpoint file, read lazily where the format allows.

    Safetensors: memory-mapped, one tensor at a time. Pickles: `torch.load(weights_only=True)`
    (memory-mapped); nested dicts are flattened with "." (e.g. `ema_model_state_dict.<name>`), and
    non-tensor leaves (step counters, configs) are skipped.
    """
    path = Path(path)
    if path.suffix in PICKLE_SUFFIXES:
        yield from _flatten(read_pickled(path))
        return
    with open_safetensors(path) as f:
        for key in f.keys():
            yield key, f.get_tensor(key)


def open_safetensors(path: Path):
    """`safe_open(path)` on the CPU. A torn or damaged file (a header that does not parse, or that
    the file's size does not cover: an interrupted download or copy) is a `WeightsError` naming it;
    a missing or unreadable one stays an `OSError`."""
    try:
        return safe_open(str(path), framework="pt", device="cpu")
    except OSError:
        raise
    except Exception as e:  # noqa: BLE001 - safetensors' own SafetensorError (not importable by that name in every version)
        raise WeightsError(f"{path}: damaged or incomplete safetensors file ({type(e).__name__}: {e})") from e


def read_pickled(path: Path) -> object:
    """A pickled checkpoint, loaded with `weights_only=True`: a pickle that would run code is a
    `WeightsError`, never executed."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True, mmap=zipfile.is_zipfile(path))  # legacy pickles cannot be mapped
    except pickle.UnpicklingError as e:
        raise WeightsError(f"{path}: refused to load: it holds more than tensors (koe never runs code from a checkpoint): {e}") from e
    except (RuntimeError, EOFError, OSError) as e:
        raise WeightsError(f"{path}: not a readable checkpoint ({e})") from e


def generator_state(path: Path, what: str) -> dict[str, torch.Tensor]:
    """The `generator` state of a GAN vocoder's training checkpoint (`{"generator": state, ...}`:
    BigVGAN's, AP-BWE's), read with `weights_only=True`, its tensors in float32; `what` names the
    model in the errors (`WeightsError`: not readable, no generator state)."""
    try:
        checkpoint = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:  # torch's unpickler and zip reader raise several kinds
        raise WeightsError(f"{path}: not a readable {what} checkpoint ({e})") from e
    state = checkpoint.get("generator") if isinstance(checkpoint, dict) else None
    if not isinstance(state, dict):
        raise WeightsError(f"{path}: no 'generator' state in it")
    return {k: v.float() for k, v in state.items()}


def _flatten(obj: object, prefix: str = "") -> Iterator[tuple[str, torch.Tensor]]:
    if isinstance(obj, torch.Tensor):
        yield prefix, obj
    elif isinstance(obj, dict):
        for k, v in obj.items():
            yield from _flatten(v, f"{prefix}.{k}" if prefix else str(k))


FLOAT_DTYPES = {"F64": torch.float64, "F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16}  # converted chunk by chunk
CONVERT_CHUNK_BYTES = 16 << 20  # stored bytes converted per step: all that is ever resident beside the result


class _Safetensors:
    """One open safetensors file, read for `load_state`.

    A tensor already in the wanted dtype is `safe_open`'s zero-copy view of the mapped file. One
    that must change dtype (released bf16 weights for the exact float32 path) is converted into a
    freshly allocated tensor, `CONVERT_CHUNK_BYTES` at a time, from a second read-only mapping whose
    pages are handed back to the kernel (`MADV_DONTNEED`) as soon as they are converted: the stored
    copy never stays resident beside the result, and nothing but the result is allocated. The
    file's pages stay in the page cache (reclaimable, shared, not this process's memory), so the
    next load reads memory, not the disk. The conversion is elementwise, so the bits are those of
    `.to(dtype)` of the whole tensor (bf16 -> fp32 is exact), and the result is 64-byte aligned as
    any tensor torch allocates, as upstream's own `.to(dtype)` copies are.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self.file = open_safetensors(path).__enter__()
        self._layout: dict[str, dict] | None = None
        self._map: mmap.mmap | None = None
        self._base = 0

    def __enter__(self) -> _Safetensors:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._map is not None:
            self._map.close()
        self.file.__exit__(None, None, None)

    def keys(self) -> list[str]:
        return list(self.file.keys())

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self.file.get_slice(key).get_shape())

    def is_floating(self, key: str) -> bool:
        name = self.file.get_slice(key).get_dtype()  # "BF16", "F32", "F8_E4M3", "I64", "BOOL", ...
        return name.startswith("F") or name == "BF16"

    def tensor(self, key: str, dtype: torch.dtype | None, device: torch.device) -> torch.Tensor:
        """`key` as `dtype` (None: as stored) on `device`."""
        stored = FLOAT_DTYPES.get(self.file.get_slice(key).get_dtype())
        if dtype is None or dtype == stored:
            return self.file.get_tensor(key).to(device)
        if stored is None or not dtype.is_floating_point or device.type != "cpu" or sys.byteorder != "little":
            return self.file.get_tensor(key).to(dtype).to(device)
        return self._converted(key, stored, dtype)

    def _converted(self, key: str, stored: torch.dtype, dtype: torch.dtype) -> torch.Tensor:
        entry = self._entry(key)
        begin, end = entry["data_offsets"]
        out = torch.empty(entry["shape"], dtype=dtype)
        count = out.numel()
        if count == 0:
            return out
        if end - begin != count * torch.empty((), dtype=stored).element_size():
            raise WeightsError(f"{self.path.name}: tensor {key} holds {end - begin} bytes, its shape and dtype need {count} elements")
        start = self._base + begin
        mapped = self._mapping()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message="The given buffer is not writable")  # read only: never written
            source = torch.frombuffer(mapped, dtype=stored, count=count, offset=start)
        flat, size, step = out.view(-1), source.element_size(), max(1, CONVERT_CHUNK_BYTES // source.element_size())
        try:
            for i in range(0, count, step):
                j = min(i + step, count)
                flat[i:j].copy_(source[i:j])
                self._release(start + i * size, start + j * size)
        finally:
            del source  # the mapping is closed with the file: no view of it may outlive this
        return out

    def _entry(self, key: str) -> dict:
        if self._layout is None:
            with open(self.path, "rb") as f:
                n = int.from_bytes(f.read(8), "little")
                self._layout = json.loads(f.read(n))
            self._base = 8 + n
        return self._layout[key]

    def _mapping(self) -> mmap.mmap:
        if self._map is None:
            with open(self.path, "rb") as f:
                self._map = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
        return self._map

    def _release(self, begin: int, end: int) -> None:
        """Drop this mapping's pages of [begin, end) from the process (whole pages; the data stays in the page cache)."""
        if not hasattr(self._map, "madvise"):
            return
        page = mmap.PAGESIZE
        lo, hi = begin // page * page, min(-(-end // page) * page, len(self._map))
        if hi > lo:
            self._map.madvise(mmap.MADV_DONTNEED, lo, hi - lo)


class _Pickled:
    """A pickled checkpoint's flattened tensors (memory-mapped where the file allows), read for `load_state`."""

    def __init__(self, path: Path) -> None:
        self.tensors = dict(checkpoint_tensors(path))

    def __enter__(self) -> _Pickled:
        return self

    def __exit__(self, *exc: object) -> None:
        self.tensors.clear()

    def keys(self) -> list[str]:
        return list(self.tensors)

    def shape(self, key: str) -> tuple[int, ...]:
        return tuple(self.tensors[key].shape)

    def is_floating(self, key: str) -> bool:
        return self.tensors[key].is_floating_point()

    def tensor(self, key: str, dtype: torch.dtype | None, device: torch.device) -> torch.Tensor:
        t = self.tensors[key]
        return (t if dtype is None else t.to(dtype)).to(device)


def load_state(
    module: nn.Module,
    files: list[Path],
    *,
    rename: Callable[[str], str | None] = lambda name: name,
    dtype: torch.dtype | None = None,
    device: torch.device | str = "cpu",
    strict: bool = True,
    as_stored: bool = False,
) -> None:
    """Put tensors from `files` into `module`'s parameters and persistent buffers.

    The module may live on the meta device: tensors are assigned, not copied into existing storage.
    Tensors already in the wanted dtype on the CPU stay zero-copy views of the memory-mapped file,
    as transformers leaves them for upstream (CPU kernels can round differently with an operand's
    memory alignment, so a copy could change float bits). `rename` maps a checkpoint name to the
    module's name, or None to skip it. With `strict`, a missing or unexpected tensor or a wrong
    shape raises a `WeightsError` that names it. Floating tensors are cast to `dtype` when given
    (else to the module's dtype), or with `as_stored` kept as the file has them; safetensors that
    change dtype on the CPU (released bf16 weights for the float32 path) are converted without a
    second copy in memory (`_Safetensors`).
    """
    expected = module.state_dict(keep_vars=True)
    dev = torch.device(device)
    loaded: dict[str, torch.Tensor] = {}
    unexpected: list[str] = []
    for path in files:
        with _Pickled(path) if Path(path).suffix in PICKLE_SUFFIXES else _Safetensors(Path(path)) as checkpoint:
            for key in checkpoint.keys():
                name = rename(key)
                if name is None:
                    continue
                target = expected.get(name)
                if target is None:
                    unexpected.append(key)
                    continue
                shape = checkpoint.shape(key)
                if shape != tuple(target.shape):
                    raise WeightsError(f"{path.name}: tensor {key} has shape {shape}, the model expects {tuple(target.shape)}")
                wanted = None if as_stored or not checkpoint.is_floating(key) else dtype or target.dtype
                loaded[name] = checkpoint.tensor(key, wanted, dev)
    missing = sorted(set(expected) - set(loaded))
    if strict and (missing or unexpected):
        parts = []
        if missing:
            parts.append(f"missing tensors: {', '.join(missing[:10])}{' ...' if len(missing) > 10 else ''} ({len(missing)} in all)")
        if unexpected:
            parts.append(f"unexpected tensors: {', '.join(unexpected[:10])}{' ...' if len(unexpected) > 10 else ''} ({len(unexpected)} in all)")
        where = files[0].parent if files else "checkpoint"
        raise WeightsError(f"{where}: checkpoint does not match the model: {'; '.join(parts)}")
    module.load_state_dict(loaded, strict=False, assign=True)


_INIT_FUNCTIONS = (
    "uniform_",
    "normal_",
    "trunc_normal_",
    "constant_",
    "ones_",
    "zeros_",
    "eye_",
    "dirac_",
    "xavier_uniform_",
    "xavier_normal_",
    "kaiming_uniform_",
    "kaiming_normal_",
    "orthogonal_",
    "sparse_",
)
_init_lock = threading.Lock()
_init_depth = 0
_init_originals: dict[str, Callable] = {}


def _skip_on_meta(original: Callable) -> Callable:
    def init(tensor: torch.Tensor, *args, **kwargs):
        return tensor if tensor.is_meta else original(tensor, *args, **kwargs)

    return init


@contextmanager
def _no_init_on_meta() -> Iterator[None]:
    """`torch.nn.init`'s initialisers leave meta tensors alone while any build is on (other threads'
    real tensors are still initialised: only meta tensors, which hold no values, are skipped)."""
    global _init_depth
    with _init_lock:
        if _init_depth == 0:
            for name in _INIT_FUNCTIONS:
                _init_originals[name] = getattr(torch.nn.init, name)
                setattr(torch.nn.init, name, _skip_on_meta(_init_originals[name]))
        _init_depth += 1
    try:
        yield
    finally:
        with _init_lock:
            _init_depth -= 1
            if _init_depth == 0:
                for name, original in _init_originals.items():
                    setattr(torch.nn.init, name, original)
                _init_originals.clear()


def build_on_meta(build: Callable[[], M]) -> M:
    """`build()` on the meta device: shapes without memory or random init (`torch.nn.init` skips
    meta tensors, whose first `normal_` would otherwise import torch's compiler, about 1 s, for
    values that are thrown away)."""
    with torch.device("meta"), _no_init_on_meta():
        return build()


def build_from_weights(
    build: Callable[[], M],
    files: list[Path],
    *,
    dtype: torch.dtype | None = None,
    device: torch.device | str = "cpu",
    rename: Callable[[str], str | None] = lambda name: name,
    as_stored: bool = False,
) -> M:
    """`build()` on the meta device (`build_on_meta`), then every tensor from `files` (strict,
    zero-copy where `load_state` can, names mapped by `rename`; floating ones as `dtype`, or as
    stored with `as_stored`), on `device`.

    Non-persistent buffers are not in the weights: modules must build them on the CPU (as
    `koe.nn.rotary.inverse_frequencies` does); one left on meta is a `WeightsError` naming it.
    """
    module = build_on_meta(build)
    load_state(module, files, rename=rename, dtype=dtype, device=device, as_stored=as_stored)
    stray = [n for n, t in [*module.named_parameters(), *module.named_buffers()] if t.is_meta]
    if stray:
        raise WeightsError(f"tensors left unloaded after loading: {', '.join(stray[:5])}{' ...' if len(stray) > 5 else ''}")
    return module.to(device)
