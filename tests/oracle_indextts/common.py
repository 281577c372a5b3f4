"""Shared by the golden scripts in this folder, which run in the IndexTTS oracle's venv with
upstream's source importable (`scripts/goldens.py` puts this folder on their PYTHONPATH).

- `stand_in_missing()`: release 2's modules import openai-whisper's tokenizer, tiktoken and
  modelscope at the top, and none of them is used on the paths the goldens take; where the venv
  lacks one, an empty module (with a spec, a `Tokenizer` and an `AutoModelForCausalLM`) lets the
  import through. transformers is imported first: it looks tiktoken up by its spec.
- `skip_dac_package_inits()`: the length regulator imports `VectorQuantize` from upstream's vendored
  DAC package, whose `__init__`s import descript-audiotools (the DAC codec and its losses, unused
  here): bare packages over the same two folders stand in for them, so only `nn/quantize.py` and
  `nn/layers.py` are read, as they are.
- `recorded_hashes(folder)`: the hashes the inputs recorded in `state_sha256.txt`, as the npz
  entries a golden carries (`state_sha256`, or `NAME.state_sha256` per `NAME HASH` line).
- `sha(array)`: the sha256 of an array's (or tensor's) bytes, as a 0-d string array.
- `mel_fn_args(cfg)`: the arguments `IndexTTS2.__init__` reads from `s2mel.preprocess_params` for
  its `mel_fn`.
- `Recorder`: what upstream's methods returned, by name (`after(obj, method, name)` wraps one on the
  instance; `keep`), and the arrays a golden stores (`store`: one over `big` bytes as its hash and
  shape).
- `log_draws()`: every draw from torch's global generator, as "op [shape]", into the list returned.
- `forget_clips(tts)`: release 2's and 2.5's per-clip caches emptied, as upstream's first call with a clip.
"""

from __future__ import annotations

import hashlib
import importlib.machinery
import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import torch

UNUSED_IMPORTS = ("whisper", "whisper.tokenizer", "tiktoken", "modelscope")


def stand_in_missing(names: tuple[str, ...] = UNUSED_IMPORTS) -> None:
    import transformers  # noqa: F401

    for name in names:
        try:
            __import__(name)
        except ModuleNotFoundError:
            stub = types.ModuleType(name)
            stub.__spec__ = importlib.machinery.ModuleSpec(name, None)
            stub.Tokenizer = type("Tokenizer", (), {})
            stub.AutoModelForCausalLM = type("AutoModelForCausalLM", (), {})
            sys.modules[name] = stub


def skip_dac_package_inits() -> None:
    import indextts.s2mel

    root = Path(list(indextts.s2mel.__path__)[0]) / "dac"
    for name, folder in (("indextts.s2mel.dac", root), ("indextts.s2mel.dac.nn", root / "nn")):
        if name not in sys.modules and importlib.util.find_spec("audiotools") is None:
            package = types.ModuleType(name)
            package.__path__ = [str(folder)]
            package.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=True)
            sys.modules[name] = package


def recorded_hashes(folder: Path) -> dict[str, np.ndarray]:
    out = {}
    for line in (folder / "state_sha256.txt").read_text().splitlines():
        words = line.split()
        if words:
            out["state_sha256" if len(words) == 1 else f"{words[0]}.state_sha256"] = np.array(words[-1])
    return out


def sha(t) -> np.ndarray:
    a = t.detach().contiguous().numpy() if isinstance(t, torch.Tensor) else np.ascontiguousarray(t)
    return np.array(hashlib.sha256(a.tobytes()).hexdigest())


def mel_fn_args(cfg) -> dict:
    spect = cfg.s2mel["preprocess_params"]["spect_params"]
    return {
        "n_fft": spect["n_fft"],
        "win_size": spect["win_length"],
        "hop_size": spect["hop_length"],
        "num_mels": spect["n_mels"],
        "sampling_rate": cfg.s2mel["preprocess_params"]["sr"],
        "fmin": spect.get("fmin", 0),
        "fmax": None if spect.get("fmax", "None") == "None" else 8000,
        "center": False,
    }


class Recorder:
    """What wrapped methods returned (`record[name]`, in call order) and the npz's arrays (`result`)."""

    def __init__(self, big: int) -> None:
        self.record: dict[str, list] = {}
        self.result: dict[str, np.ndarray] = {}
        self.big = big

    def keep(self, name: str, value: torch.Tensor) -> None:
        self.record.setdefault(name, []).append(value.detach().clone())

    def after(self, obj, method: str, then) -> None:
        """`then(result, *args, **kwargs)` after each call of `obj.method` (on the instance); `then`
        a name keeps the result under that name."""
        original = getattr(obj, method)
        if isinstance(then, str):
            name = then
            then = lambda result, *a, **k: self.keep(name, result)  # noqa: E731

        def wrapper(*args, **kwargs):
            result = original(*args, **kwargs)
            then(result, *args, **kwargs)
            return result

        setattr(obj, method, wrapper)

    def store(self, name: str, array: np.ndarray) -> None:
        """`name`, or over `big` bytes `name.sha256` (of its C-order bytes) and `name.shape`."""
        array = np.ascontiguousarray(array)
        if array.nbytes > self.big:
            self.result[f"{name}.sha256"] = np.array(hashlib.sha256(array.tobytes()).hexdigest())
            self.result[f"{name}.shape"] = np.array(array.shape)
        else:
            self.result[name] = array


DRAWS = ("multinomial", "rand", "randn", "randint", "rand_like", "randn_like", "bernoulli", "normal", "randperm")


def log_draws(ops: tuple[str, ...] = DRAWS) -> list[str]:
    draws: list[str] = []
    for op in ops:
        fn = getattr(torch, op)

        def logged(*args, _fn=fn, _op=op, **kwargs):
            result = _fn(*args, **kwargs)
            draws.append(f"{_op} {list(result.shape)}")
            return result

        setattr(torch, op, logged)
    return draws


CLIP_CACHES = ("cache_spk_cond", "cache_s2mel_style", "cache_s2mel_prompt", "cache_spk_audio_prompt", "cache_emo_cond", "cache_emo_audio_prompt", "cache_mel")


def forget_clips(tts) -> None:
    for cache in CLIP_CACHES:
        setattr(tts, cache, None)
