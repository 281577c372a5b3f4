"""`chinese-hubert-base`: the HuBERT whose features of the reference clip SoVITS quantizes into the
prompt's semantic tokens (upstream's `feature_extractor/cnhubert.py`, transformers' `HubertModel`).

The release (`lj1995/GPT-SoVITS/chinese-hubert-base`) is a transformers 4.30 save in float16:
`config.json`, `preprocessor_config.json` (a `Wav2Vec2FeatureExtractor`, `do_normalize: true`) and
`pytorch_model.bin` (a plain state dict; the positional conv's weight norm as `weight_g` /
`weight_v`; `masked_spec_embed`, used only to mask features in training, is not loaded).
koe runs it with `koe.nn.hubert.Hubert` in float32 (the weights widened, as transformers loads
them).

Two ways upstream feeds it:
* `TTS._set_prompt_semantic` (inference) calls the model directly on the 16 kHz samples: no
  normalisation. `features` does this.
* `CNHubert.forward` (dataset preparation) first runs the feature extractor, which with
  `do_normalize` scales the clip to zero mean and unit variance in numpy float32
  (`normalize_input`).

transformers 4.x draws `torch.rand([])` from the global generator once per encoder layer even in
eval mode (its LayerDrop check), so upstream's generator has moved 12 draws after each reference
it encodes; `features(..., layerdrop_draws=True)` makes the same draws so that what is sampled
afterwards (the AR model's tokens) follows the same random stream.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from koe.nn.hubert import Hubert, HubertConfig, rename_weight_norm
from koe.runtime.files import read_json_object
from koe.runtime.weights import WeightsError, build_from_weights

__all__ = ["HubertFolderError", "features", "hubert_config", "normalize_input", "read_hubert"]

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


def normalize_input(samples: np.ndarray | torch.Tensor, folder: str | Path | None = None) -> torch.Tensor:
    """The feature extractor's `input_values` for one clip (`CNHubert.forward`): with `do_normalize`
    (the release's, and the default without a folder) `(x - mean) / sqrt(var + 1e-7)` in numpy
    float32 as numpy 1.x computes it (the mean and variance float32 scalars, the denominator taken
    in float64 and rounded to float32 for the division); else the samples as float32. -> (1, N)."""
    do_normalize = True
    if folder is not None and (Path(folder) / "preprocessor_config.json").is_file():
        do_normalize = bool(read_json_object(Path(folder) / "preprocessor_config.json", HubertFolderError).get("do_normalize", True))
    x = samples.detach().cpu().numpy() if isinstance(samples, torch.Tensor) else np.asarray(samples)
    x = np.asarray(x, dtype=np.float32).reshape(-1)
    if do_normalize:
        denominator = np.float32(np.sqrt(np.float64(x.var()) + 1e-7))
        x = (x - x.mean()) / denominator
    return torch.from_numpy(np.ascontiguousarray(x, dtype=np.float32))[None]


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
