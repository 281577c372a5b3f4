"""GPT-SoVITS's "GPT" file (the AR text-to-semantic model, `s1*.ckpt`), read without running code.

The released file (and every fine-tune upstream's trainer writes) is a torch pickle of a plain dict:
`{"weight": {name: tensor}, "config": {...}, "info": "GPT-e<epoch>"}` (the pretrained files have no
`info`). `weight` is the Lightning module's state dict, every name under `model.`, stored as
float16; `config` is the training YAML as loaded (dicts, lists, strings, numbers), of which
inference reads `model.{vocab_size, phoneme_vocab_size, embedding_dim, hidden_dim, head, n_layer,
EOS, dropout}` and `data.max_sec`. Nothing in it needs more than `torch.load(weights_only=True)`
allows, so koe reads it that way (`koe.runtime.weights.read_pickled`); a file that would need more
is refused, never unpickled.

Upstream (`TTS.init_t2s_weights`) loads the float16 tensors into a float32 model
(`load_state_dict` casts them), sets `hz = 50` (whatever the model's real 25 Hz) and stops decoding
after `hz * max_sec` new tokens (`early_stop_num`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from koe.runtime.weights import WeightsError, read_pickled

__all__ = ["HZ", "PREFIX", "GPTConfig", "GPTFileError", "read_gpt"]

HZ = 50  # upstream's `configs.hz`: early_stop_num = HZ * max_sec
PREFIX = "model."  # the Lightning module's name for the decoder


class GPTFileError(WeightsError):
    """A GPT `.ckpt` that is not upstream's layout (no config, missing entries, inconsistent sizes)."""


@dataclass(frozen=True)
class GPTConfig:
    """The sizes inference reads from a GPT file's `config` (names as upstream's YAML has them in
    the comments). Upstream asserts `eos == vocab_size - 1`; the text and audio embeddings are added
    into the transformer's width, so `embedding_dim == hidden_dim`."""

    vocab_size: int  # model.vocab_size: semantic tokens + EOS (1025 in v2)
    phoneme_vocab_size: int  # model.phoneme_vocab_size (732 in v2)
    embedding_dim: int  # model.embedding_dim (512)
    hidden_dim: int  # model.hidden_dim (512)
    heads: int  # model.head (16)
    layers: int  # model.n_layer (24)
    eos: int  # model.EOS (1024)
    max_sec: float  # data.max_sec (54)

    def __post_init__(self) -> None:
        if self.eos != self.vocab_size - 1:
            raise GPTFileError(f"EOS ({self.eos}) must be vocab_size - 1 ({self.vocab_size - 1}), as upstream asserts")
        if self.embedding_dim != self.hidden_dim:
            raise GPTFileError(f"embedding_dim ({self.embedding_dim}) must equal hidden_dim ({self.hidden_dim}): the embeddings feed the transformer")
        if self.hidden_dim % self.heads:
            raise GPTFileError(f"hidden_dim ({self.hidden_dim}) is not a multiple of head ({self.heads})")

    @property
    def early_stop_num(self) -> int | float:
        """New tokens after which upstream stops decoding: `hz * max_sec` (hz = 50)."""
        return HZ * self.max_sec

    @classmethod
    def from_dict(cls, config: dict[str, Any]) -> GPTConfig:
        """From a GPT file's `config` (the training YAML as a dict)."""
        try:
            model, data = config["model"], config["data"]
            return cls(
                vocab_size=int(model["vocab_size"]),
                phoneme_vocab_size=int(model["phoneme_vocab_size"]),
                embedding_dim=int(model["embedding_dim"]),
                hidden_dim=int(model["hidden_dim"]),
                heads=int(model["head"]),
                layers=int(model["n_layer"]),
                eos=int(model["EOS"]),
                max_sec=data["max_sec"],
            )
        except (KeyError, TypeError, ValueError) as e:
            raise GPTFileError(f"a GPT file's config lacks model.* / data.max_sec entries upstream reads ({type(e).__name__}: {e})") from e


def read_gpt(path: str | Path) -> tuple[GPTConfig, dict[str, torch.Tensor]]:
    """(config, state) of a GPT `.ckpt`: the state's names without upstream's `model.` prefix, its
    tensors as stored (float16 in released files)."""
    path = Path(path)
    saved = read_pickled(path)
    if not isinstance(saved, dict) or not isinstance(saved.get("weight"), dict) or not isinstance(saved.get("config"), dict):
        raise GPTFileError(f"{path}: not a GPT-SoVITS GPT file (a dict with 'weight' and 'config')")
    config = GPTConfig.from_dict(saved["config"])
    state: dict[str, torch.Tensor] = {}
    for name, tensor in saved["weight"].items():
        if not (isinstance(name, str) and name.startswith(PREFIX) and isinstance(tensor, torch.Tensor)):
            raise GPTFileError(f"{path}: weight {name!r} is not a tensor under {PREFIX!r}")
        state[name.removeprefix(PREFIX)] = tensor
    return config, state
