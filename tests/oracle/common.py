"""Shared by the scripts in this folder, which run inside the oracle virtualenv (upstream qwen-tts).

A script reads a job (JSON) and writes its results as one safetensors file plus a JSON of
scalars. It runs single-threaded, as koe's side of a parity test does, so float bits compare.
"""

from __future__ import annotations

import torch
from oracle_io import read_job, write_results  # noqa: F401 - the scripts import them from here


def load_upstream_model(model_dir: str):
    """Upstream's wrapper on the CPU in float32, failing loudly on missing or unexpected keys."""
    from qwen_tts import Qwen3TTSModel

    tts, loading_info = _from_pretrained_with_info(Qwen3TTSModel, model_dir)
    return tts, loading_info


def _from_pretrained_with_info(cls, model_dir: str):
    import transformers

    captured: dict = {"missing_keys": [], "unexpected_keys": [], "mismatched_keys": [], "error_msgs": []}
    original = transformers.PreTrainedModel.from_pretrained.__func__

    def spy(klass, *args, **kwargs):
        kwargs["output_loading_info"] = True
        model, info = original(klass, *args, **kwargs)
        for key, values in info.items():
            captured.setdefault(key, []).extend(f"{klass.__name__}:{v}" for v in values)
        return model

    transformers.PreTrainedModel.from_pretrained = classmethod(spy)
    try:
        tts = cls.from_pretrained(model_dir, device_map="cpu", dtype=torch.float32)
    finally:
        transformers.PreTrainedModel.from_pretrained = classmethod(original)
    return tts, captured
