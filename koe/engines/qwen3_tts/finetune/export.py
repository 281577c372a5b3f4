"""Export a fine-tuned network as a CustomVoice model folder in the released layout, as upstream's recipe.

The folder is a copy of the Base model's (text tokenizer, `speech_tokenizer/`, generation config)
with two files replaced:

- `config.json`: `tts_model_type` "custom_voice" and the new speaker as the only preset, at codec
  id 3000 (`talker_config.spk_id`), not a dialect (`spk_is_dialect`);
- `model.safetensors`: the trained talker (no `speaker_encoder.*`: CustomVoice models have none),
  with row 3000 of the codec embedding set to the speaker's x-vector.

One difference from upstream, on purpose: the speaker's name is written in lower case. Upstream
looks presets up as `speaker.lower()`, so a name with capitals exported as it is could never be
selected (`koe` tells the user when it lowers a name).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch
from safetensors.torch import save

from koe.runtime.files import atomic_file

SPEAKER_ID = 3000
SKIP = ("model.safetensors.index.json", "config.json", "training")  # and every *.safetensors: the base's weights


def export_speaker(
    base: Path, out: Path, talker_state: dict[str, torch.Tensor], speaker: str, embedding: torch.Tensor, dtype: torch.dtype | None = None
) -> Path:
    """Write the CustomVoice folder `out` (made or updated in place; the `training/` folder a run
    keeps in it is left alone). `talker_state`: the trained talker's state dict (names without
    the `talker.` prefix); `embedding`: the speaker's x-vector (C,); `dtype`: of the saved weights
    (default: as trained)."""
    base, out = Path(base), Path(out)
    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    vocab = int(config["talker_config"].get("vocab_size", 3072))
    if SPEAKER_ID >= vocab:
        raise ValueError(f"the codec vocabulary has {vocab} ids; the new speaker's id {SPEAKER_ID} does not fit")
    out.mkdir(parents=True, exist_ok=True)
    for item in base.iterdir():
        if item.name in SKIP or item.name.endswith(".safetensors"):
            continue
        target = out / item.name
        if item.is_dir():
            shutil.copytree(item, target, dirs_exist_ok=True)
        else:
            shutil.copy2(item, target)
    name = speaker.lower()
    config["tts_model_type"] = "custom_voice"
    config["talker_config"]["spk_id"] = {name: SPEAKER_ID}
    config["talker_config"]["spk_is_dialect"] = {name: False}
    state = {}
    for key, value in talker_state.items():
        value = value.detach().to("cpu")
        state[f"talker.{key}"] = value if dtype is None else value.to(dtype)
    table = state["talker.model.codec_embedding.weight"] = state["talker.model.codec_embedding.weight"].clone()
    table[SPEAKER_ID] = embedding.detach().to("cpu").to(table.dtype)
    if dtype is not None:
        config["torch_dtype"] = str(dtype).removeprefix("torch.")
    with atomic_file(out / "model.safetensors") as f:
        f.write(save({k: v.contiguous() for k, v in state.items()}, metadata={"format": "pt"}))
    with atomic_file(out / "config.json", "w", encoding="utf-8") as f:
        f.write(json.dumps(config, indent=2, ensure_ascii=False))
    return out
