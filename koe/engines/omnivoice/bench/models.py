"""OmniVoice's benchmark models: random weights, "tiny" or "real" (the released sizes: a Qwen3-0.6B
backbone, the HiggsAudio-v2 tokenizer; float32 as released; `koe.engines.omnivoice.fixtures`), and
their parameter counts."""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import RandomModels, tensor_sizes

VARIANTS = ("OmniVoice",)
SIZES = ("tiny", "real")
FIXTURE_VERSION = 1
MODELS = RandomModels("OmniVoice", "omnivoice", VARIANTS, SIZES, "koe.engines.omnivoice.fixtures:write_random_model")
model_name, write_model = MODELS.model_name, MODELS.write_model


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of an OmniVoice folder: the LM and the audio tokenizer, from the files' shapes."""
    lm = sum(tensor_sizes(Path(folder) / "model.safetensors").values())
    tokenizer = sum(tensor_sizes(Path(folder) / "audio_tokenizer" / "model.safetensors").values())
    return {"lm": lm, "audio_tokenizer": tokenizer, "total": lm + tokenizer}
