"""Fish Speech's benchmark models: random weights in the released layout (`koe_fish_speech.fixtures.
write_random_model`), "tiny" (2 + 2 layers, 128 wide, for the quick run) or "real" (the released
sizes and dtype: bfloat16 weights, the 391 M codec), and their parameter counts.

S2 Pro's slow transformer has 36 layers (4.4 B parameters in all: ~17.6 GB in float32, koe's exact
mode), and `--compare upstream` holds koe's model and upstream's at once: the real folder is
written with fewer slow layers (`--layers`, default 8: ~1.7 B parameters, ~7 GB each side in
float32), everything else at the released sizes. The folder's name says its depth
(`fish_speech-real-s2-pro-L8-seed0`); the tiny folder carries `sizes.json`, the entries of
upstream's packaged codec YAML its codec changes (the oracle's `golden_codec.load_codec` reads it).
<|im_end|> is made unlikely (`never_stop`): random weights then never end a request before `--frames`.
"""

from __future__ import annotations

import json
from pathlib import Path

VARIANTS = ("s2-pro",)
SIZES = ("tiny", "real")
RELEASED_LAYERS = 36
DEFAULT_LAYERS = 8  # the real size's slow layers by default (of the released 36)
FIXTURE_VERSION = 2  # 2: <|im_end|>'s row zeroed (the real model drew it at its second frame)
WEIGHTS = ("*.safetensors", "*.pth")
STOP_ROW = "text_model.model.embeddings.weight"


def layers_of(size: str, layers: int | None) -> int | None:
    """The slow stack's depth a folder of `size` is written with (None: the size's own; the tiny size ignores `layers`)."""
    return (layers or DEFAULT_LAYERS) if size == "real" else None


def model_name(variant: str, size: str, seed: int, layers: int | None = None) -> str:
    if variant not in VARIANTS or size not in SIZES:
        raise ValueError(f"unknown Fish Speech model {variant!r}/{size!r}: variants {VARIANTS}, sizes {SIZES}")
    depth = layers_of(size, layers)
    return f"fish_speech-{size}-{variant}" + (f"-L{depth}" if depth else "") + f"-seed{seed}"


def write_model(folder, variant: str, size: str, seed: int, layers: int | None = None) -> None:
    from koe_fish_speech.fixtures import write_random_model
    from koe_fish_speech.fixtures_codec import codec_config

    folder = write_random_model(folder, variant, size, seed=seed, layers=layers_of(size, layers))
    never_stop(Path(folder) / "model.safetensors")
    if size == "tiny":
        (Path(folder) / "sizes.json").write_text(json.dumps(codec_config("tiny").yaml_overrides(), indent=1))


def never_stop(weights: Path) -> None:
    """Zero <|im_end|>'s row of the token embeddings (the tied head): its logit is then 0 where the
    semantic tokens' spread a few units, never among the 30 likeliest, so a request makes the
    `--frames` it is allowed on both sides (the fixture's row, made likelier for tests that need an
    end, stopped the real model after one frame)."""
    from safetensors.torch import load_file, save_file

    from koe_fish_speech.fixtures_lm import IM_END_ID

    state = load_file(str(weights))
    state[STOP_ROW][IM_END_ID] = 0
    save_file(state, str(weights), metadata={"format": "pt"})


def model_folder(kit, opts, size: str) -> Path:
    """The cached random-weight folder of `size` at `opts.layers` slow layers (built on first use)."""
    variant, layers = VARIANTS[0], layers_of(size, opts.layers)
    folder = (opts.models_root or kit.cache_root()) / model_name(variant, size, opts.seed, layers)
    info = {"version": FIXTURE_VERSION, "family": "fish_speech", "variant": variant, "size": size, "seed": opts.seed, "layers": layers}
    return kit.cached_folder(folder, lambda tmp: write_model(tmp, variant, size, opts.seed, layers), info)


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of a folder by part, from the files' shapes: the slow transformer (its embeddings,
    which are also its tied head, and layers), the fast one (codebook embeddings, layers, head) and the codec."""
    import torch

    from koe.engines.benchmark import tensor_sizes

    folder = Path(folder)
    counts = {"slow": 0, "fast": 0}
    for name, n in tensor_sizes(folder / "model.safetensors").items():
        counts["slow" if name.startswith("text_model.") else "fast"] += n
    codec = torch.load(folder / "codec.pth", map_location="meta", weights_only=True, mmap=True)
    counts["codec"] = sum(t.numel() for t in codec.values())
    counts["total"] = sum(counts.values())
    return counts
