"""koe (声): a native PyTorch runtime for open text-to-speech models."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

__version__ = "0.1.0"

from koe.runtime.process import reproducible_blas as _reproducible_blas

_reproducible_blas()  # MKL's products in one fixed order, the one koe's exact kernel reproduces (koe.runtime.process)

if TYPE_CHECKING:
    import torch

    from koe.engines.native import TTS


def load(
    path: str | Path,
    device: str | torch.device | None = None,
    dtype: str | torch.dtype | None = None,
    *,
    precision: str | None = None,
    accept_license: bool = False,
) -> TTS:
    """Load a model and return its native API (`koe.engines.native.TTS`, or its family's subclass).

    `path`: a model folder (the released layout), or a name the resolver knows
    (`koe.service.store.resolve`): a store name (`koe models list`), or a hub id (`OWNER/NAME`, e.g.
    "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice", or a release id such as "SWivid/F5-TTS/F5TTS_v1_Base")
    found in the store, in the Hugging Face cache (used in place), or downloaded into the store on
    first use unless `models.download` is off or HF_HUB_OFFLINE is set. The store is KOE_HOME's
    (its settings, as the CLI reads them). A folder path loads as it is, without opening KOE_HOME.
    A release whose licence must be accepted (`koe models info` shows it) is downloaded only once
    it is accepted in the store: earlier (`koe models pull` asks), or now with `accept_license=True`;
    else `koe.service.errors.LicenseNotAccepted` names the licence, before any download.

    The family is found from the folder's own files (`koe.engines.registry.detect`). The result
    speaks with `generate` and `stream`, makes voices with `prepare_voice`, says what the model
    offers in `capabilities` (Qwen3-TTS's also takes batches of texts); it holds the family's engine
    as `.engine`, which meets `koe.engines.base.Engine` (`synthesize`, `prepare_voice`,
    `capabilities`, `close`), the contract the CLI and the server use.

    `device`: "cpu", "cuda", "cuda:1", or None for the best available. `dtype`: None gives float32
    on the CPU (bit-exact with upstream) and bfloat16 on CUDA. `precision`: "fp32" (exact), or an
    opt-in mode that trades bits for speed, "bf16", "int8" or "int4" (CPU), as the model offers
    (`capabilities.precisions`; another is a `koe.runtime.precision.UnsupportedPrecision` naming
    them); None keeps `dtype`. Results name the mode in `metadata["precision"]`, int8 and int4 also
    their kernel in `metadata["kernel"]` (docs/precision.md has each mode's measured error).
    """
    from koe.engines.registry import load_native
    from koe.service.store.resolve import model_folder

    return load_native(model_folder(path, accept_license=accept_license), device=device, dtype=dtype, precision=precision)


def __getattr__(name: str):
    """Lazy exports, so `import koe` stays light (no torch until a model is used)."""
    if name == "train":  # koe.train: fine-tuning (imports torch only when a run starts)
        import importlib

        return importlib.import_module("koe.train")
    if name in ("SynthesisRequest", "VoiceReference", "VoicePrompt", "CancelToken"):  # the engine contract's, every family's
        from koe.engines import base

        return getattr(base, name)
    raise AttributeError(f"module 'koe' has no attribute {name!r}")


__all__ = ["CancelToken", "SynthesisRequest", "VoicePrompt", "VoiceReference", "__version__", "load"]
