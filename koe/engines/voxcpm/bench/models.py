"""VoxCPM's benchmark models: random weights, "tiny" or "real" (the released sizes, stored in bfloat16
with a bfloat16 config as the releases are; `koe.engines.voxcpm.fixtures`), and their parameter counts."""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import RandomModels, tensor_sizes

VARIANTS = ("VoxCPM2", "VoxCPM1.5")
SIZES = ("tiny", "real")
FIXTURE_VERSION = 1
MODELS = RandomModels("VoxCPM", "voxcpm", VARIANTS, SIZES, "koe.engines.voxcpm.fixtures:write_random_model")
model_name, write_model = MODELS.model_name, MODELS.write_model


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of a VoxCPM folder by part (model.safetensors' top-level names; the AudioVAE file), from the files' shapes."""
    counts: dict[str, int] = {}
    for name, prefix in (("model.safetensors", ""), ("audiovae.safetensors", "audio_vae")):
        for key, n in tensor_sizes(Path(folder) / name).items():
            part = prefix or key.split(".")[0]
            counts[part] = counts.get(part, 0) + n
    counts["total"] = sum(counts.values())
    return counts
