"""Oracle: run upstream's Qwen3TTSModel wrapper calls; record codes and waveforms of each call.

Job: {"model_dir": str, "calls": [{"method": "generate_custom_voice", "seed": 0, "kwargs": {...}}]}
Outputs per call i: codes_{i}_{j} (T, 16) and wav_{i}_{j} for each item j; info has the loading report.
"""

import numpy as np
import torch
from common import load_upstream_model, read_job, write_results

job, out = read_job()
tts, loading = load_upstream_model(job["model_dir"])
tensors, info = {}, {"loading": loading, "attn": {}}
info["attn"]["talker"] = tts.model.talker.config._attn_implementation
info["attn"]["code_predictor"] = tts.model.talker.code_predictor.config._attn_implementation

captured = []
original_generate = tts.model.generate


def spy(*args, **kwargs):
    codes, hiddens = original_generate(*args, **kwargs)
    captured.append(codes)
    return codes, hiddens


tts.model.generate = spy


def audio_arg(value):
    """A reference given as {"npy": path, "sr": rate} becomes upstream's (array, sr) tuple."""
    if isinstance(value, dict) and "npy" in value:
        return (np.load(value["npy"]), int(value["sr"]))
    if isinstance(value, list):
        return [audio_arg(v) for v in value]
    return value


for i, call in enumerate(job["calls"]):
    captured.clear()
    kwargs = dict(call["kwargs"])
    if "ref_audio" in kwargs:
        kwargs["ref_audio"] = audio_arg(kwargs["ref_audio"])
    if call["method"] == "create_voice_clone_prompt":
        items = tts.create_voice_clone_prompt(**kwargs)
        for j, item in enumerate(items):
            tensors[f"spk_{i}_{j}"] = item.ref_spk_embedding
            if item.ref_code is not None:
                tensors[f"refcode_{i}_{j}"] = item.ref_code
        info[f"count_{i}"] = len(items)
        continue
    if call.get("seed") is not None:
        torch.manual_seed(call["seed"])
    wavs, sr = getattr(tts, call["method"])(**kwargs)
    info.setdefault("sample_rate", sr)
    for j, wav in enumerate(wavs):
        tensors[f"wav_{i}_{j}"] = torch.from_numpy(np.ascontiguousarray(wav))
    for j, codes in enumerate(captured[0]):
        tensors[f"codes_{i}_{j}"] = codes
    info[f"count_{i}"] = len(wavs)
write_results(out, tensors, info)
