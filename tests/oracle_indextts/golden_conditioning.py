"""The `conditioning` golden, upstream's side: IndexTTS's Conformer + Perceiver conditioning.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_conditioning.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_conditioning.py `write_inputs` wrote. Each case's
pair is built as upstream's `UnifiedVoice.__init__` builds it (1.5's `model.py` for the speaker
case; release 2's `model_v2.py` emotion pair for the emotion case), loaded strictly, and run through
upstream's own `get_conditioning` / `get_emo_conditioning` on a holder that carries just those
modules. Writes, per case and input: the Conformer's frames and mask, and the latents.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import stand_in_missing  # noqa: E402
from indextts.gpt.conformer_encoder import ConformerEncoder  # noqa: E402
from indextts.gpt.model import UnifiedVoice  # noqa: E402
from indextts.gpt.perceiver import PerceiverResampler  # noqa: E402
from torch import nn  # noqa: E402


def release2_model():
    """Release 2's `UnifiedVoice` (for `get_emo_conditioning`); its module imports the tokenizer
    module, whose unused imports are stood in where missing (the conditioning never touches a tokenizer)."""
    stand_in_missing()
    from indextts.gpt.model_v2 import UnifiedVoice as UnifiedVoiceV2

    return UnifiedVoiceV2


def build(config: dict, prefixes: list[str]) -> nn.Module:
    encoder_name, perceiver_name = prefixes
    holder = nn.Module()
    holder.condition_type = "conformer_perceiver"
    encoder = ConformerEncoder(
        input_size=config["input_size"],
        output_size=config["output_size"],
        linear_units=config["linear_units"],
        attention_heads=config["attention_heads"],
        num_blocks=config["num_blocks"],
        input_layer=config["input_layer"],
    )
    perceiver = PerceiverResampler(
        config["model_dim"],
        dim_context=config["output_size"],
        ff_mult=config["perceiver_mult"],
        heads=config["attention_heads"],
        num_latents=config["num_latents"],
    )
    setattr(holder, encoder_name, encoder)
    setattr(holder, perceiver_name, perceiver)
    holder.cond_mask_pad = nn.ConstantPad1d((config["num_latents"], 0), True)
    holder.emo_cond_mask_pad = nn.ConstantPad1d((1, 0), True)
    return holder


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    cases = json.loads((folder / "cases.json").read_text())
    result: dict[str, np.ndarray] = {}
    for case, spec in cases.items():
        holder = build(spec["config"], spec["prefixes"])
        encoder = getattr(holder, spec["prefixes"][0])
        fresh_pe = encoder.embed.pos_enc.pe.detach().contiguous()
        result[f"{case}.pe_sha256"] = np.array(hashlib.sha256(fresh_pe.numpy().tobytes()).hexdigest())
        state = torch.load(folder / f"{case}.pth", map_location="cpu", weights_only=True)
        holder.load_state_dict(state, strict=True)
        holder.eval()
        result[f"{case}.state_sha256"] = np.array(spec["state_sha256"])
        emotion = spec["prefixes"][0].startswith("emo_")
        for name in spec["inputs"]:
            features = torch.from_numpy(np.load(folder / f"{case}.{name}.features.npy"))
            lengths = torch.from_numpy(np.load(folder / f"{case}.{name}.lengths.npy"))
            with torch.no_grad():
                hidden, mask = encoder(features.transpose(1, 2), lengths)
                if emotion:
                    latents = release2_model().get_emo_conditioning(holder, features, lengths)
                else:
                    latents = UnifiedVoice.get_conditioning(holder, features, lengths)
            result[f"{case}.{name}.hidden"] = hidden.numpy()
            result[f"{case}.{name}.mask"] = mask.numpy()
            result[f"{case}.{name}.latents"] = latents.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
