"""VoxCPM's benchmark models: random weights, "tiny" or "real" (the released sizes, stored in bfloat16
with a bfloat16 config as the releases are; `koe.engines.voxcpm.fixtures`), and their parameter counts."""

from __future__ import annotations

from pathlib import Path

VARIANTS = ("VoxCPM2", "VoxCPM1.5")
SIZES = ("tiny", "real")
FIXTURE_VERSION = 1


def model_name(variant: str, size: str, seed: int) -> str:
    if variant not in VARIANTS or size not in SIZES:
        raise ValueError(f"unknown VoxCPM model {variant!r}/{size!r}: variants {VARIANTS}, sizes {SIZES}")
    return f"voxcpm-{size}-{variant}-seed{seed}"


def write_model(folder: Path, variant: str, size: str, seed: int) -> None:
    from koe.engines.voxcpm.fixtures import write_random_model

    write_random_model(folder, variant, size, seed=seed)


def parameter_counts(folder: Path) -> dict[str, int]:
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
