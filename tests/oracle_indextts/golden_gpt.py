"""Golden topic `gpt` (oracle side): upstream's UnifiedVoice (release 1.5's `indextts.gpt.model`) on
koe's tiny random LM: `inference_speech` after `torch.manual_seed(seed)` as `IndexTTS.infer` calls
it on the CPU (no KV cache), its long-silence removal, and the latent pass the vocoder reads.

Usage: python golden_gpt.py FOLDER OUT.npz   (FOLDER from tests/engines/indextts/golden_gpt.py)
"""

import json
import sys
import types
from pathlib import Path

import numpy as np
import torch
from common import recorded_hashes
from indextts.gpt.model import UnifiedVoice
from indextts.infer import IndexTTS

torch.set_num_threads(1)
folder, out = Path(sys.argv[1]), Path(sys.argv[2])
inputs = json.loads((folder / "inputs.json").read_text())
section = dict(inputs["gpt"])
tiny_conformer = {"output_size": 32, "linear_units": 64, "attention_heads": 2, "num_blocks": 1, "input_layer": "conv2d2", "perceiver_mult": 2}
model = UnifiedVoice(**section, condition_type="conformer_perceiver", condition_module=tiny_conformer)
missing, unexpected = model.load_state_dict(torch.load(folder / "gpt.pth"), strict=False)
assert not unexpected, unexpected
assert all(k.startswith(("conditioning_encoder.", "perceiver_encoder.")) for k in missing), missing
model.eval()
model.post_init_gpt2_config(use_deepspeed=False, kv_cache=False, half=False)  # what IndexTTS does on the CPU
conds = torch.from_numpy(np.load(folder / "conds.npy"))
model.get_conditioning = lambda mel, lengths=None: conds
cond_mel = torch.zeros(1, 100, 40)  # ignored: the conditioning comes from conds
shrink = types.SimpleNamespace(stop_mel_token=section["stop_mel_token"])

result = recorded_hashes(folder)
for seed, name, settings in inputs["cases"]:
    text = torch.tensor([inputs["texts"][name]], dtype=torch.int32)
    kwargs = {"do_sample": True, "top_p": 0.8, "top_k": 30, "temperature": 1.0, "length_penalty": 0.0, "num_beams": 3, "repetition_penalty": 10.0}
    kwargs.update(settings)
    max_mel = kwargs.pop("max_mel_tokens")
    torch.manual_seed(seed)
    with torch.no_grad():
        codes = model.inference_speech(cond_mel, text, cond_mel_lengths=torch.tensor([40]), num_return_sequences=1, max_generate_length=max_mel, **kwargs)
        kept, lens = IndexTTS.remove_long_silence(shrink, codes, silent_token=52, max_consecutive=30)
        latent = model(
            cond_mel,
            text,
            torch.tensor([text.shape[-1]]),
            kept,
            lens * model.mel_length_compression,
            cond_mel_lengths=torch.tensor([40]),
            return_latent=True,
            clip_inputs=False,
        )
    result[f"codes_{seed}"] = codes[0].numpy()
    result[f"kept_{seed}"] = kept[0].numpy()
    result[f"latent_{seed}"] = latent[0].numpy()
for i, codes in enumerate(inputs["silences"]):
    kept, lens = IndexTTS.remove_long_silence(shrink, torch.tensor([codes]), silent_token=52, max_consecutive=30)
    result[f"silence_{i}"] = kept[0].numpy()
np.savez_compressed(out, **result)
