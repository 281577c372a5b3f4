"""Shared by the scripts in this folder, which run inside the OmniVoice oracle virtualenv
(omnivoice==0.2.1, transformers 5.x).

`load(folder)` is upstream's own `OmniVoice.from_pretrained(folder)` on the CPU in float32 (or
bfloat16), after a strict check of the folder: upstream's loaders (transformers' `from_pretrained`)
only warn about missing or unexpected tensors, so the keys of `model.safetensors` and
`audio_tokenizer/model.safetensors` are compared here with the state dicts of the modules upstream
builds (parameters and persistent buffers). Any difference fails the script (exit 3), naming them.
"""

from __future__ import annotations

import os
import sys
import warnings

from oracle_io import read_job, write_results  # noqa: F401 - the scripts import them from here

warnings.filterwarnings("ignore")

import torch  # noqa: E402
from safetensors import safe_open  # noqa: E402


def _file_keys(path: str) -> set[str]:
    with safe_open(path, framework="pt") as f:
        return set(f.keys())


def key_report(model) -> dict:
    """{"checked": n, "missing": [...], "unexpected": [...]} over both checkpoints of the folder."""
    folder = model.config._name_or_path
    pairs = [
        (model, os.path.join(folder, "model.safetensors"), ""),
        (model.audio_tokenizer, os.path.join(folder, "audio_tokenizer", "model.safetensors"), "audio_tokenizer."),
    ]
    missing, unexpected, checked = [], [], 0
    for module, path, prefix in pairs:
        if module is model:
            wanted = {k for k in module.state_dict() if not k.startswith("audio_tokenizer.")}
        else:
            wanted = set(module.state_dict())
        stored = _file_keys(path)
        checked += len(stored)
        missing += [prefix + k for k in sorted(wanted - stored)]
        unexpected += [prefix + k for k in sorted(stored - wanted)]
    return {"checked": checked, "missing": missing, "unexpected": unexpected}


def load(folder: str, dtype: str = "float32"):
    """Upstream's model from `folder` (CPU, `dtype`: float32, or bfloat16 for upstream's own bf16
    run; its audio tokenizer stays as its config says), its keys checked strictly."""
    from omnivoice import OmniVoice

    model = OmniVoice.from_pretrained(folder, dtype=getattr(torch, dtype), device_map="cpu")
    report = key_report(model)
    if report["missing"] or report["unexpected"]:
        print(f"fixture keys do not match upstream's modules: {report}", file=sys.stderr)
        sys.exit(3)
    return model, report
