"""Golden topic `gpt2` (oracle side): upstream's release-2 UnifiedVoice (`indextts.gpt.model_v2`) on
koe's tiny random LM, called as `IndexTTS2.infer` calls it: `merge_emovec`, the emotion-vector mix,
`inference_speech` (KV cache, as upstream sets it up on every device) after `torch.manual_seed`,
the codes cut at the stop code, and the latent pass.

Usage: python golden_gpt2.py FOLDER OUT.npz   (FOLDER from tests/engines/indextts/golden_gpt2.py)
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from common import recorded_hashes, stand_in_missing

stand_in_missing()  # imported by model_v2's tokenizer module, unused here

from indextts.gpt.model_v2 import UnifiedVoice  # noqa: E402

torch.set_num_threads(1)
folder, out = Path(sys.argv[1]), Path(sys.argv[2])
inputs = json.loads((folder / "inputs.json").read_text())
model = UnifiedVoice(**inputs["gpt"])
model.load_state_dict(torch.load(folder / "gpt.pth"), strict=True)
model.eval()
model.post_init_gpt2_config(use_deepspeed=False, kv_cache=True, half=False)
speaker = torch.from_numpy(np.load(folder / "speaker.npy"))
emotion_clip = torch.from_numpy(np.load(folder / "emotion.npy"))
matrix = torch.from_numpy(np.load(folder / "emotion_matrix.npy"))
stop = inputs["gpt"]["stop_mel_token"]

result = recorded_hashes(folder)
for seed, name, source, alpha, weights, settings in inputs["cases"]:
    emo = speaker if source == "speaker" else emotion_clip
    text = torch.tensor([inputs["texts"][name]], dtype=torch.int32)
    lens = torch.tensor([speaker.shape[1]])
    emo_lens = torch.tensor([emo.shape[1]])
    kwargs = dict(inputs["defaults"])
    kwargs.update(settings)
    max_mel = kwargs.pop("max_mel_tokens")
    with torch.no_grad():
        emovec = model.merge_emovec(speaker, emo, lens, emo_lens, alpha=alpha)
        if weights is not None:
            w = torch.tensor(weights)
            mix = torch.sum(w.unsqueeze(1) * matrix, 0).unsqueeze(0)
            emovec = mix + (1 - torch.sum(w)) * emovec
        torch.manual_seed(seed)
        codes, latent_cond = model.inference_speech(
            speaker, text, emo, cond_lengths=lens, emo_cond_lengths=emo_lens, emo_vec=emovec, num_return_sequences=1, max_generate_length=max_mel, **kwargs
        )
        code = codes[0]
        end = int((code == stop).nonzero()[0, 0]) if (code == stop).any() else len(code)
        kept = codes[:, :end]
        latent = model(
            latent_cond,
            text,
            torch.tensor([text.shape[-1]]),
            kept,
            torch.tensor([kept.shape[-1]]),
            emo,
            cond_mel_lengths=lens,
            emo_cond_mel_lengths=emo_lens,
            emo_vec=emovec,
            use_speed=torch.zeros(1).long(),
        )
    result[f"emovec_{seed}"] = emovec.numpy()
    result[f"latents_{seed}"] = latent_cond.numpy()
    result[f"codes_{seed}"] = codes[0].numpy()
    result[f"latent_{seed}"] = latent[0].numpy()
np.savez_compressed(out, **result)
