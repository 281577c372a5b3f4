"""Random-weight model folders for the benchmark, built once and cached.

Speed does not depend on weight values, so the benchmark builds models at the released sizes
(`koe.engines.qwen3_tts.fixtures`) and keeps them under `$KOE_HOME/bench` (or
`~/.cache/koe/bench`). A folder counts as built only once its `.complete` marker exists, so an
interrupted build is redone rather than half used.
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

MODEL_KINDS = ("custom_voice", "voice_design", "base")
SIZES = ("tiny", "0.6b", "1.7b")
FIXTURE_VERSION = 1


def cache_root() -> Path:
    """`$KOE_HOME/bench` when KOE_HOME is set, else `~/.cache/koe/bench`."""
    home = os.environ.get("KOE_HOME")
    return Path(home) / "bench" if home else Path.home() / ".cache" / "koe" / "bench"


def bench_model(kind: str, size: str, root: Path | None = None, seed: int = 0) -> Path:
    """The folder of a random `kind` model at `size`, building it on first use."""
    if kind not in MODEL_KINDS or size not in SIZES:
        raise ValueError(f"unknown model {kind!r}/{size!r}: kinds {MODEL_KINDS}, sizes {SIZES}")
    folder = (root or cache_root()) / f"qwen3-tts-{size}-{kind}-seed{seed}"
    marker = folder / ".complete"
    if marker.exists() and json.loads(marker.read_text()).get("version") == FIXTURE_VERSION:
        return folder
    from koe.engines.qwen3_tts.fixtures import write_random_model

    if folder.exists():
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    write_random_model(tmp, kind, size, seed=seed)
    tmp.rename(folder)
    marker.write_text(json.dumps({"version": FIXTURE_VERSION, "kind": kind, "size": size, "seed": seed}))
    return folder


def weights_bytes(folder: Path) -> int:
    """Bytes of every safetensors file of a model folder (talker and codec)."""
    return sum(p.stat().st_size for p in Path(folder).rglob("*.safetensors"))


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
