"""IndexTTS's benchmark models: random weights in the released 1.5 layout, "tiny" or "real" (the
released sizes: GPT 24 x 1280, conformer conditioning 6 x 512, BigVGAN 1536 channels; float32 as
released; `koe_indextts.fixtures.write_random_model`), and their parameter counts."""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import RandomModels

VARIANTS = ("IndexTTS-1.5",)
SIZES = ("tiny", "real")
FIXTURE_VERSION = 1
MODELS = RandomModels("IndexTTS", "indextts", VARIANTS, SIZES, "koe_indextts.fixtures:write_random_model")
model_name, write_model = MODELS.model_name, MODELS.write_model
WEIGHTS = ("*.pth",)
CONDITIONING = ("conditioning_encoder.", "perceiver_encoder.")
NOT_PARAMETERS = (".attn.bias", ".attn.masked_bias", "pos_enc.pe")  # GPT-2's causal masks, the conformer's positional table


def _state(path: Path) -> dict:
    import torch

    return torch.load(path, map_location="meta", weights_only=True, mmap=True)


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of a 1.5 folder by part, from the files' shapes: the GPT (embeddings, stack, heads),
    its speech conditioning, BigVGAN (weight-normed as released: its g and v counted) and BigVGAN's speaker encoder."""
    folder = Path(folder)
    counts = {"gpt": 0, "conditioning": 0, "bigvgan": 0, "speaker_encoder": 0}
    for name, t in _state(folder / "gpt.pth").items():
        if name.startswith("inference_model.") or name.endswith(NOT_PARAMETERS):  # a release's tied copies and buffers
            continue
        counts["conditioning" if name.startswith(CONDITIONING) else "gpt"] += t.numel()
    vocoder = _state(folder / "bigvgan_generator.pth")
    for name, t in vocoder.get("generator", vocoder).items():
        if not name.endswith((".filter", "num_batches_tracked", "running_mean", "running_var")):
            counts["speaker_encoder" if name.startswith("speaker_encoder.") else "bigvgan"] += t.numel()
    counts["total"] = sum(counts.values())
    return counts
