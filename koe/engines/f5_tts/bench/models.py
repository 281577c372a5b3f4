"""F5-TTS's benchmark models (random weights: "tiny", or "real": DiT dim 1024 x 22, Vocos dim 512 x
8, as released; `koe.engines.f5_tts.fixtures`), their parameter counts and the DiT's arithmetic."""

from __future__ import annotations

from pathlib import Path

from koe.engines.benchmark import RandomModels, tensor_sizes

VARIANTS = ("F5TTS_v1_Base", "F5TTS_Base")
SIZES = ("tiny", "real")
FIXTURE_VERSION = 1
MODELS = RandomModels("F5-TTS", "f5-tts", VARIANTS, SIZES, "koe.engines.f5_tts.fixtures:write_random_model")
model_name, write_model = MODELS.model_name, MODELS.write_model


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of an F5-TTS folder's DiT (the checkpoint's `ema_model.transformer.*`) and Vocos (less the
    release's mel front-end buffers), counted from the files' shapes."""
    import torch

    folder = Path(folder)
    dit = sum(n for ckpt in sorted(folder.glob("model_*.safetensors")) for k, n in tensor_sizes(ckpt).items() if k.startswith("ema_model.transformer."))
    vocos = torch.load(folder / "vocos" / "pytorch_model.bin", map_location="cpu", weights_only=True)
    skip = ("feature_extractor.",)  # the release's mel buffers, not parameters of the decoder
    return {"dit": dit, "vocos": sum(t.numel() for k, t in vocos.items() if not k.startswith(skip))}


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
