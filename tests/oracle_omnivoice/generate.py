"""Upstream OmniVoice end to end: a job of synthesis cases -> waveforms (and what led to them).

Job: {"model": folder, "cases": [case, ...], "dtype": "float32" (default) or "bfloat16"}; each case has `text`, `seed` (this script's own:
`torch.manual_seed(seed)` right before the call) and any of upstream `generate`'s keyword
arguments (`language`, `instruct`, `ref_audio`, `ref_text`, `duration`, `speed`, `num_step`,
`guidance_scale`, `t_shift`, `layer_penalty_factor`, `position_temperature`,
`class_temperature`, `denoise`, `postprocess_output`, ...), passed through as given. A
`ref_audio` of the form {"path": ...} is passed as the path; {"path": ..., "tensor": true} as a
(waveform, rate) tuple read with soundfile.

Written per case i: `case{i}` (the float32 waveform upstream returns, per text when `text` is a
list: `case{i}.{j}`), `case{i}.tokens{k}` (each token tensor `_generate_iterative` returned, in
call order) and `case{i}.raw{k}` (each `audio_tokenizer.decode` output, before post-processing).
Info: {"keys", "sampling_rate", "cases": [{"samples": [...], "target_lens": [...]}]}.
"""

from __future__ import annotations

import soundfile as sf
import torch
from common import load, read_job, write_results

OWN_KEYS = ("seed",)

job, out = read_job()
model, report = load(job["model"], job.get("dtype", "float32"))

calls: dict[str, list] = {"tokens": [], "raw": [], "lens": []}
iterative = model._generate_iterative
decode = model.audio_tokenizer.decode


def _iterative(task, config):
    calls["lens"].append(list(task.target_lens))
    result = iterative(task, config)
    calls["tokens"].extend(result)
    return result


def _decode(codes, *args, **kwargs):
    result = decode(codes, *args, **kwargs)
    calls["raw"].append(result.audio_values.detach().clone())
    return result


model._generate_iterative = _iterative
model.audio_tokenizer.decode = _decode

tensors, cases = {}, []
for i, case in enumerate(job["cases"]):
    kwargs = {k: v for k, v in case.items() if k not in OWN_KEYS}
    ref = kwargs.get("ref_audio")
    if isinstance(ref, dict):
        if ref.get("tensor"):
            data, rate = sf.read(ref["path"], dtype="float32", always_2d=True)
            kwargs["ref_audio"] = (torch.from_numpy(data.T.copy()), rate)
        else:
            kwargs["ref_audio"] = ref["path"]
    for key in calls:
        calls[key] = []
    torch.manual_seed(case.get("seed", 0))
    audios = model.generate(**kwargs)
    for j, audio in enumerate(audios):
        tensors[f"case{i}.{j}"] = torch.from_numpy(audio.copy())
    for k, t in enumerate(calls["tokens"]):
        tensors[f"case{i}.tokens{k}"] = t.detach().clone()
    for k, t in enumerate(calls["raw"]):
        tensors[f"case{i}.raw{k}"] = t
    cases.append({"samples": [int(a.shape[-1]) for a in audios], "target_lens": calls["lens"]})

write_results(out, tensors, {"keys": report, "sampling_rate": model.sampling_rate, "cases": cases})
