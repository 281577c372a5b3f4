"""Qwen3-TTS's benchmark models: random weights at the released sizes, stored as released.

The talker's `model.safetensors` in bfloat16 (so load time and memory are the release's), its
speech tokenizer in float32; `koe.bench.models.bench_model` caches them. Torch only when writing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

MODEL_KINDS = ("custom_voice", "voice_design", "base")
SIZES = ("tiny", "0.6b", "1.7b")
FIXTURE_VERSION = 2  # 2: the talker's weights in bfloat16, as released


def model_name(kind: str, size: str, seed: int) -> str:
    """The cached folder's name: a folder with a synthetic text vocabulary (the released one not
    installed) is kept apart from one with the released vocabulary."""
    from koe.engines.qwen3_tts.text.vocab import resolve_vocabulary

    if kind not in MODEL_KINDS or size not in SIZES:
        raise ValueError(f"unknown model {kind!r}/{size!r}: kinds {MODEL_KINDS}, sizes {SIZES}")
    vocabulary = resolve_vocabulary("auto")
    suffix = "" if vocabulary == "released" else f"-{vocabulary}-vocab"
    return f"qwen3-tts-{size}-{kind}-seed{seed}{suffix}"


def write_model(folder: Path, kind: str, size: str, seed: int) -> None:
    """A random `kind` model at `size`: the talker's weights in bfloat16 with `torch_dtype` "bfloat16"
    in config.json, as released (the exact float32 path converts them on load, as upstream does
    with dtype=float32)."""
    from koe.engines.qwen3_tts.fixtures import write_random_model
    from koe.engines.qwen3_tts.text.vocab import VOCAB_PACKAGE, resolve_vocabulary

    vocabulary = resolve_vocabulary("auto")  # the released vocabulary (dev extra) where installed
    if vocabulary == "synthetic":
        print(
            f"note: {VOCAB_PACKAGE} (the real Qwen text vocabulary) is not installed: the benchmark model gets a synthetic "
            "one, so prompts have other token counts than real text (speed per frame is the same)",
            file=sys.stderr,
        )
    write_random_model(folder, kind, size, seed=seed, vocabulary=vocabulary)
    store_as_released(folder)


def store_as_released(folder: Path, dtype: str = "bfloat16") -> None:
    """Rewrite a Qwen3-TTS folder's `model.safetensors` (not the speech tokenizer's) in `dtype`, one tensor
    at a time, and name it as config.json's `torch_dtype`, as the released folders do."""
    import torch
    from safetensors import safe_open
    from safetensors.torch import save_file

    folder = Path(folder)
    path, tmp = folder / "model.safetensors", folder / "model.safetensors.tmp"
    with safe_open(str(path), "pt") as f:
        metadata = f.metadata()
        state = {k: (t.to(getattr(torch, dtype)) if t.is_floating_point() else t) for k in f.keys() for t in [f.get_tensor(k)]}
    save_file(state, str(tmp), metadata=metadata)
    del state
    tmp.replace(path)
    cfg_path = folder / "config.json"
    cfg = json.loads(cfg_path.read_text())
    cfg["torch_dtype"] = dtype
    cfg_path.write_text(json.dumps(cfg, indent=2))


def bytes_per_frame(folder: Path, bytes_per_weight: float) -> float:
    """Weight bytes one decoded frame reads: every talker decoder weight and the codec head once,
    the code predictor's decoder (and input projection) 15 times plus one of its heads each time."""
    cfg = json.loads((Path(folder) / "config.json").read_text())["talker_config"]
    p = cfg["code_predictor_config"]

    def decoder(c: dict) -> int:
        h, d = c["hidden_size"], c["head_dim"]
        attn = h * c["num_attention_heads"] * d * 2 + h * c["num_key_value_heads"] * d * 2
        return c["num_hidden_layers"] * (attn + 3 * h * c["intermediate_size"])

    groups = cfg["num_code_groups"]
    proj = cfg["hidden_size"] * p["hidden_size"] if cfg["hidden_size"] != p["hidden_size"] else 0
    talker = decoder(cfg) + cfg["hidden_size"] * cfg["vocab_size"]
    predictor = (groups - 1) * (decoder(p) + proj + p["hidden_size"] * p["vocab_size"])
    return (talker + predictor) * bytes_per_weight
