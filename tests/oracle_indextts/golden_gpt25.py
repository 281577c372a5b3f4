"""Golden topic `gpt25` (oracle side): upstream's UnifiedVoice in release 2.5's campplus mode
(`indextts.gpt.model_v2`, `spk_cond_mode="campplus"`, as `infer_v2_5.IndexTTS2` builds it) on koe's
tiny random LM, loaded strictly, called as `IndexTTS2.infer_generator` calls it: `merge_emovec`, the
emotion-vector mix, then `inference_speech` with the language (`lang_to_token`) and the CAM++
embedding (`campplus_embedding=style`), KV cache, after `torch.manual_seed`. Also upstream's
language table (`LANGUAGE_DICT`, in order), and the hashes of the mel logits of the prompt's last
position and of the first cached step (with that step's tokens): the search's codes alone would not
show a last-bit difference in the padded prompt's masked attention.

Usage: python golden_gpt25.py FOLDER OUT.npz   (FOLDER from tests/engines/indextts/golden_gpt25.py)
"""

import json
import sys
from pathlib import Path

import numpy as np
import torch
from common import recorded_hashes, sha, stand_in_missing

stand_in_missing()  # imported by model_v2's tokenizer module, unused here

from indextts.gpt.model_v2 import UnifiedVoice  # noqa: E402
from indextts.utils.tokenizer import LANGUAGE_DICT, lang_to_token  # noqa: E402

torch.set_num_threads(1)
folder, out = Path(sys.argv[1]), Path(sys.argv[2])
inputs = json.loads((folder / "inputs.json").read_text())
model = UnifiedVoice(**inputs["gpt"], spk_cond_mode="campplus")
model.load_state_dict(torch.load(folder / "gpt.pth"), strict=True)
model.eval()
model.post_init_gpt2_config(use_deepspeed=False, kv_cache=True, half=False)
calls = []  # (input_ids, logits) of every forward the search makes


def record(module, args, kwargs, out):
    calls.append((kwargs["input_ids"], out.logits if hasattr(out, "logits") else out[0]))


model.inference_model.register_forward_hook(record, with_kwargs=True)
speaker = torch.from_numpy(np.load(folder / "speaker.npy"))
emotion_clip = torch.from_numpy(np.load(folder / "emotion.npy"))
style = torch.from_numpy(np.load(folder / "style.npy"))
matrix = torch.from_numpy(np.load(folder / "emotion_matrix.npy"))

result = recorded_hashes(folder)
result["languages"] = np.array(list(LANGUAGE_DICT))
for seed, name, language, source, alpha, weights, settings in inputs["cases"]:
    emo = speaker if source == "speaker" else emotion_clip
    text = torch.tensor([inputs["texts"][name]], dtype=torch.int32)
    lang = torch.LongTensor([lang_to_token(language)])
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
        calls.clear()
        codes, latent_cond = model.inference_speech(
            speaker,
            text,
            lang,
            emo,
            cond_lengths=lens,
            emo_cond_lengths=emo_lens,
            emo_vec=emovec,
            campplus_embedding=style,
            num_return_sequences=1,
            max_generate_length=max_mel,
            **kwargs,
        )
    result[f"language_{seed}"] = np.array(int(lang[0]))
    result[f"emovec_{seed}"] = emovec.numpy()
    result[f"latent_{seed}"] = latent_cond.numpy()
    result[f"codes_{seed}"] = codes[0].numpy()
    result[f"prompt_logits_{seed}"] = sha(calls[0][1][0, -1])
    result[f"step_tokens_{seed}"] = calls[1][0][:, -1].numpy()
    result[f"step_logits_{seed}"] = sha(calls[1][1][:, -1])
np.savez_compressed(out, **result)
