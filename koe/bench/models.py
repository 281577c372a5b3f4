"""Random-weight model folders for the benchmark, built once and cached.

Speed does not depend on weight values, so the benchmark builds models at the released sizes
(`koe.engines.qwen3_tts.fixtures`, `koe.engines.f5_tts.fixtures`), stored as the releases store
them (Qwen3-TTS: the talker's `model.safetensors` in bfloat16, so load time and memory are the
release's; its speech tokenizer in float32), and keeps them under
`$KOE_HOME/bench` (or `~/.cache/koe/bench`). A folder counts as built only once its `.complete` marker exists, so an
interrupted build is redone rather than half used.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

MODEL_KINDS = ("custom_voice", "voice_design", "base")
SIZES = ("tiny", "0.6b", "1.7b")
FIXTURE_VERSION = 2  # 2: the talker's weights in bfloat16, as released
F5_VARIANTS = ("F5TTS_v1_Base", "F5TTS_Base")
F5_SIZES = ("tiny", "real")
F5_FIXTURE_VERSION = 1
VOX_VARIANTS = ("VoxCPM2", "VoxCPM1.5")
VOX_SIZES = ("tiny", "real")
VOX_FIXTURE_VERSION = 1


def cache_root() -> Path:
    """`$KOE_HOME/bench` when KOE_HOME is set, else `~/.cache/koe/bench`."""
    home = os.environ.get("KOE_HOME")
    return Path(home) / "bench" if home else Path.home() / ".cache" / "koe" / "bench"


def bench_model(kind: str, size: str, root: Path | None = None, seed: int = 0) -> Path:
    """The folder of a random `kind` model at `size`, building it on first use: the talker's
    weights in bfloat16 with `torch_dtype` "bfloat16" in config.json, as released (the exact
    float32 path converts them on load, as upstream does with dtype=float32)."""
    if kind not in MODEL_KINDS or size not in SIZES:
        raise ValueError(f"unknown model {kind!r}/{size!r}: kinds {MODEL_KINDS}, sizes {SIZES}")

    from koe.text.qwen_vocab import VOCAB_PACKAGE, resolve_vocabulary

    vocabulary = resolve_vocabulary("auto")  # the released vocabulary (dev extra) where installed

    def write(tmp: Path) -> None:
        from koe.engines.qwen3_tts.fixtures import write_random_model

        if vocabulary == "synthetic":
            print(f"note: {VOCAB_PACKAGE} (the real Qwen text vocabulary) is not installed: the benchmark model gets a synthetic "
                  "one, so prompts have other token counts than real text (speed per frame is the same)", file=sys.stderr)  # fmt: skip
        write_random_model(tmp, kind, size, seed=seed, vocabulary=vocabulary)
        store_as_released(tmp)

    suffix = "" if vocabulary == "released" else f"-{vocabulary}-vocab"
    folder = (root or cache_root()) / f"qwen3-tts-{size}-{kind}-seed{seed}{suffix}"
    return _cached(folder, write, {"version": FIXTURE_VERSION, "kind": kind, "size": size, "seed": seed, "vocabulary": vocabulary})


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


def f5_bench_model(variant: str = "F5TTS_v1_Base", size: str = "real", root: Path | None = None, seed: int = 0) -> Path:
    """The folder of a random F5-TTS `variant` at `size` ("tiny" or "real": DiT dim 1024, depth 22,
    Vocos dim 512 x 8), building it on first use."""
    if variant not in F5_VARIANTS or size not in F5_SIZES:
        raise ValueError(f"unknown F5-TTS model {variant!r}/{size!r}: variants {F5_VARIANTS}, sizes {F5_SIZES}")
    return _fixture_model("f5_tts", "f5-tts", variant, size, root, seed, F5_FIXTURE_VERSION)


def voxcpm_bench_model(variant: str = "VoxCPM2", size: str = "real", root: Path | None = None, seed: int = 0) -> Path:
    """The folder of a random VoxCPM `variant` at `size` ("tiny", or "real": the released sizes, stored in
    bfloat16 with a bfloat16 config as the releases are; `koe.engines.voxcpm.fixtures`), built on first use."""
    if variant not in VOX_VARIANTS or size not in VOX_SIZES:
        raise ValueError(f"unknown VoxCPM model {variant!r}/{size!r}: variants {VOX_VARIANTS}, sizes {VOX_SIZES}")
    return _fixture_model("voxcpm", "voxcpm", variant, size, root, seed, VOX_FIXTURE_VERSION)


def _fixture_model(family: str, prefix: str, variant: str, size: str, root: Path | None, seed: int, version: int) -> Path:
    """A family's `fixtures.write_random_model(folder, variant, size, seed=)` folder, cached as `<prefix>-<size>-<variant>-seed<seed>`."""

    def write(tmp: Path) -> None:
        from importlib import import_module

        import_module(f"koe.engines.{family}.fixtures").write_random_model(tmp, variant, size, seed=seed)

    folder = (root or cache_root()) / f"{prefix}-{size}-{variant}-seed{seed}"
    return _cached(folder, write, {"version": version, "variant": variant, "size": size, "seed": seed})


def voxcpm_parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of a VoxCPM folder by part (model.safetensors' top-level names; the AudioVAE file), from the files' shapes."""
    from safetensors import safe_open

    counts: dict[str, int] = {}
    for name, prefix in (("model.safetensors", ""), ("audiovae.safetensors", "audio_vae")):
        with safe_open(str(Path(folder) / name), "pt") as f:
            for key in f.keys():
                n = 1
                for d in f.get_slice(key).get_shape():
                    n *= d
                part = prefix or key.split(".")[0]
                counts[part] = counts.get(part, 0) + n
    counts["total"] = sum(counts.values())
    return counts


def _cached(folder: Path, write, marker_info: dict) -> Path:
    """`folder` if its `.complete` marker says `marker_info["version"]`, else built by `write(tmp)` and renamed."""
    marker = folder / ".complete"
    if marker.exists() and json.loads(marker.read_text()).get("version") == marker_info["version"]:
        return folder
    if folder.exists():
        shutil.rmtree(folder)
    tmp = folder.with_name(folder.name + ".partial")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.parent.mkdir(parents=True, exist_ok=True)
    write(tmp)
    tmp.rename(folder)
    marker.write_text(json.dumps(marker_info))
    return folder


def weights_bytes(folder: Path, patterns: tuple[str, ...] = ("*.safetensors",)) -> int:
    """Bytes of every weight file of a model folder (Qwen: the talker's and codec's safetensors;
    F5-TTS: pass ("*.safetensors", "*.pt", "*.bin") for the DiT checkpoint and Vocos)."""
    return sum(p.stat().st_size for pattern in patterns for p in Path(folder).rglob(pattern))


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of an F5-TTS folder's DiT (the checkpoint's `ema_model.transformer.*`) and Vocos (less the
    release's mel front-end buffers), counted from the files' shapes."""
    import torch
    from safetensors import safe_open

    folder = Path(folder)
    dit = 0
    for ckpt in sorted(folder.glob("model_*.safetensors")):
        with safe_open(str(ckpt), "pt") as f:
            dit += sum(_numel(f.get_slice(k).get_shape()) for k in f.keys() if k.startswith("ema_model.transformer."))
    vocos = torch.load(folder / "vocos" / "pytorch_model.bin", map_location="cpu", weights_only=True)
    skip = ("feature_extractor.",)  # the release's mel buffers, not parameters of the decoder
    return {"dit": dit, "vocos": sum(t.numel() for k, t in vocos.items() if not k.startswith(skip))}


def _numel(shape) -> int:
    n = 1
    for d in shape:
        n *= int(d)
    return n


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


def dit_forward_flops(folder: Path, frames: int, batch: int = 2) -> float:
    """Floating-point operations (2 per multiply-add) of one DiT evaluation on `batch` rows of
    `frames` mel frames (batch 2: classifier-free guidance's conditional and unconditional rows):
    the matrix products and convolutions, which are nearly all of it. Per frame: the input
    projection (2 mels + text width -> dim), the convolutional position embedding (2 grouped
    convolutions, kernel 31, 16 groups), per block q/k/v/out (4 dim^2), the feed-forward
    (2 ff_mult dim^2) and attention (2 frames dim), and the output projection."""
    import yaml

    arch = yaml.safe_load((Path(folder) / "config.yaml").read_text())["model"]["arch"]
    d, mels = arch["dim"], 100
    text = arch.get("text_dim") or mels
    per_frame = (2 * mels + text) * d + 2 * d * (d // 16) * 31 + d * mels
    per_frame += arch["depth"] * ((4 + 2 * arch.get("ff_mult", 4)) * d * d + 2 * frames * d)
    return 2.0 * per_frame * frames * batch
