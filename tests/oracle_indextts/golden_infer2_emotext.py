"""Golden `infer2_emotext`: upstream IndexTTS 2 end to end with the emotion read from a text,
`IndexTTS2(cfg_path, model_dir, device="cpu", use_qwen_emo=True, aux_paths=...)` (its `QwenEmotion`
from `model_dir/qwen_emo_path`; modelscope's `AutoModelForCausalLM` hands a local folder to
transformers' own, which stands in for it), then per job: its voice caches emptied,
`torch.manual_seed(seed)`, `infer(speaker.wav, text, output_path=None, use_emo_text=True, ...)`.

    golden_infer2_emotext.py <folder> <out.npz>      (<folder> from tests/engines/indextts/golden_infer2_emotext.py)

The npz, per job i (`j{i}.`): emotion (the weights `QwenEmotion.inference` gave, in upstream's order),
generated (the emotion LM's new ids), s{k}.codes per segment, wav_sha256 (infer's int16 return value),
draws (torch's draws, in order: the emotion LM's multinomials first); or `error`, the name of what
upstream raised, with the draws and ids made before it.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
from common import Recorder, forget_clips, log_draws, recorded_hashes, sha, skip_dac_package_inits, stand_in_missing  # noqa: E402

stand_in_missing()
skip_dac_package_inits()

import indextts.infer_v2 as v2  # noqa: E402
import transformers  # noqa: E402

v2.AutoModelForCausalLM = transformers.AutoModelForCausalLM  # modelscope's wrapper, for a local folder

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
spec = json.loads((folder / "job.json").read_text())
model = folder / "model"
aux = {
    "w2v_bert": str(model / "hf_cache/w2v-bert-2.0"),
    "semantic_codec": str(model / "hf_cache/semantic_codec_model.safetensors"),
    "campplus": str(model / "hf_cache/campplus_cn_common.bin"),
    "bigvgan": str(model / "hf_cache/bigvgan"),
}
tts = v2.IndexTTS2(cfg_path=str(model / "config.yaml"), model_dir=str(model), use_fp16=False, device="cpu", use_qwen_emo=True, aux_paths=aux)
assert tts.qwen_emo is not None and tts.qwen_emo.model.dtype == torch.float16

rec = Recorder(big=0)
record = rec.record
rec.after(tts.gpt, "inference_speech", lambda r, *a, **k: rec.keep("codes", r[0]))
rec.after(tts.qwen_emo, "inference", lambda r, *a, **k: record.setdefault("emotion", []).append(list(r.values())))
rec.after(tts.qwen_emo.model, "generate", lambda r, *a, **k: record.setdefault("generated", []).append(r[0, k["input_ids"].shape[1] :].tolist()))
draws = log_draws()

result: dict[str, np.ndarray] = dict(recorded_hashes(folder))
for i, job in enumerate(spec["jobs"]):
    job = dict(job)
    seed, text = job.pop("seed"), job.pop("text")
    if "emo_audio_prompt" in job:
        job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
    forget_clips(tts)
    record.clear()
    draws.clear()
    torch.manual_seed(seed)
    try:
        sr, wav = tts.infer(
            str(folder / "speaker.wav"), text, output_path=None, max_text_tokens_per_segment=spec["max_text_tokens_per_segment"], **job, **spec["generation"]
        )
    except Exception as e:  # noqa: BLE001 - what upstream raises is the golden's answer
        result[f"j{i}.error"] = np.array(type(e).__name__)
    else:
        assert sr == 22050
        result[f"j{i}.wav_sha256"] = sha(wav)
        result[f"j{i}.emotion"] = np.array(record["emotion"][0], dtype=np.float64)
        for k, codes in enumerate(record["codes"]):
            result[f"j{i}.s{k}.codes"] = codes.numpy()
    result[f"j{i}.generated"] = np.array(record["generated"][0], dtype=np.int64)
    result[f"j{i}.draws"] = np.array(draws)
np.savez_compressed(out, **result)
