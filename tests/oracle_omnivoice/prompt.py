"""Upstream's voice prompts and its audio tokenizer alone.

Job: {"model": folder, "prompts": [{"path", "text", "tensor": bool, "preprocess": bool}, ...],
"encode": [{"path"}], "decode": [{"codes": [[...], ...]}]}.

- prompts: `create_voice_clone_prompt(ref_audio=path, or (waveform, rate) read with soundfile
  when "tensor", ref_text=text, preprocess_prompt=preprocess)` -> tensors `prompt{i}` (the codes);
  info "prompts": [{"text", "rms"}]. A ValueError is recorded as {"error": message}.
- encode: the float32 mono file as is (1, 1, N) through `audio_tokenizer.encode` -> `encode{i}`.
- decode: codes (8, T) through `audio_tokenizer.decode` -> `decode{i}`.
"""

from __future__ import annotations

import soundfile as sf
import torch
from common import load, read_job, write_results

job, out = read_job()
model, report = load(job["model"])
tensors, prompts = {}, []
for i, p in enumerate(job.get("prompts", [])):
    if p.get("tensor"):
        data, rate = sf.read(p["path"], dtype="float32", always_2d=True)
        ref = (torch.from_numpy(data.T.copy()), rate)
    else:
        ref = p["path"]
    try:
        prompt = model.create_voice_clone_prompt(ref_audio=ref, ref_text=p["text"], preprocess_prompt=p.get("preprocess", True))
    except ValueError as e:
        prompts.append({"error": str(e)})
        continue
    tensors[f"prompt{i}"] = prompt.ref_audio_tokens
    prompts.append({"text": prompt.ref_text, "rms": prompt.ref_rms})
with torch.inference_mode():
    for i, e in enumerate(job.get("encode", [])):
        data, _ = sf.read(e["path"], dtype="float32")
        tensors[f"encode{i}"] = model.audio_tokenizer.encode(torch.from_numpy(data)[None, None]).audio_codes[0]
    for i, d in enumerate(job.get("decode", [])):
        tensors[f"decode{i}"] = model.audio_tokenizer.decode(torch.tensor(d["codes"])[None]).audio_values[0]
write_results(out, tensors, {"keys": report, "prompts": prompts})
