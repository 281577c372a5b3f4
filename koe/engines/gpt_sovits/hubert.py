"""`chinese-hubert-base`: the HuBERT whose features of the reference clip SoVITS quantizes into the
prompt's semantic tokens (upstream's `feature_extractor/cnhubert.py`, transformers' `HubertModel`).

The release (`lj1995/GPT-SoVITS/chinese-hubert-base`) is a transformers 4.30 save in float16:
`config.json`, `preprocessor_config.json` (a `Wav2Vec2FeatureExtractor`) and
`pytorch_model.bin` (a plain state dict; the positional conv's weight norm as `weight_g` /
`weight_v`; `masked_spec_embed`, used only to mask features in training, is not loaded).
koe runs it with `koe.nn.hubert.Hubert` in float32 (the weights widened, as transformers loads
them).

Every upstream path (`TTS._set_prompt_semantic`, the web UI, dataset preparation) calls the
model directly on the 16 kHz samples (`cnhubert_model.model(wav)`), so the feature extractor's
zero-mean unit-variance normalisation (`preprocessor_config.json`'s `do_normalize`, applied only
by `CNHubert.forward`, which nothing calls) never runs; koe does not implement it (its numpy
float32 mean and variance also differ in the last bit between numpy 1.26 and 2.x: measured).
`features` is what upstream runs.

transformers 4.x draws `torch.rand([])` from the global generator once per encoder layer even in
eval mode (its LayerDrop check), so upstream's generator has moved 12 draws after each reference
it encodes; `features(..., layerdrop_draws=True)` makes the same draws so that what is sampled
afterwards (the AR model's tokens) follows the same random stream.
"""

from __future__ import annotations

from pathlib import Path

import torch

from koe.nn.hubert import Hubert, HubertConfig, rename_weight_norm
from koe.runtime.files import read_json_object
from koe.runtime.weights import WeightsError, build_from_weights

__all__ = ["HubertFolderError", "features", "hubert_config", "read_hubert"]

SAMPLE_RATE = 16000


class HubertFolderError(ValueError):
    """A `chinese-hubert-base` folder koe cannot read or does not run."""


def hubert_config(folder: str | Path) -> HubertConfig:
    """The folder's `config.json` as a `HubertConfig` (transformers' defaults for missing keys)."""
    raw = read_json_object(Path(folder) / "config.json", HubertFolderError)
    if raw.get("model_type", "hubert") != "hubert":
        raise HubertFolderError(f"{folder}: model_type {raw.get('model_type')!r} is not HuBERT")
    fields = {k: tuple(v) if isinstance(v, list) else v for k, v in raw.items() if k in HubertConfig.__dataclass_fields__}
    if raw.get("feat_extract_activation", "gelu") != "gelu" or raw.get("hidden_act", "gelu") != "gelu":
        raise HubertFolderError(f"{folder}: koe's HuBERT runs GELU activations only")
    try:
        return HubertConfig(**fields)
    except TypeError as e:
        raise HubertFolderError(f"{folder}/config.json: {e}") from e


def _rename(key: str) -> str | None:
    if key.startswith("hubert."):
        key = key[len("hubert.") :]
    if key == "masked_spec_embed":
        return None
    return rename_weight_norm(key)


def read_hubert(folder: str | Path, dtype: torch.dtype = torch.float32, device: torch.device | str = "cpu") -> Hubert:
    """The folder's HuBERT in `dtype`, in eval mode (`model.safetensors` or `pytorch_model.bin`)."""
    folder = Path(folder)
    config = hubert_config(folder)
    files = [folder / n for n in ("model.safetensors", "pytorch_model.bin") if (folder / n).is_file()][:1]
    if not files:
        raise WeightsError(f"no HuBERT weights in {folder}: expected model.safetensors or pytorch_model.bin")
    return build_from_weights(lambda: Hubert(config), files, dtype=dtype, device=device, rename=_rename).eval()


@torch.inference_mode()
def features(model: Hubert, samples: torch.Tensor, layerdrop_draws: bool = True) -> torch.Tensor:
    """`last_hidden_state.transpose(1, 2)` of 16 kHz samples (N,) or (B, N): (B, 768, frames).
    `layerdrop_draws`: draw from torch's global generator as transformers 4.x does (see above)."""
    if samples.dim() == 1:
        samples = samples[None]
    hidden = model(samples)[-1]  # (B, frames, C)
    if layerdrop_draws:
        for _ in range(len(model.encoder.layers)):
            torch.rand([])
    return hidden.transpose(1, 2)
