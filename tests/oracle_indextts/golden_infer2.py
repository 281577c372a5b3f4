"""Golden `infer2`: upstream IndexTTS 2 end to end, `IndexTTS2(cfg_path, model_dir, device="cpu",
use_qwen_emo=False, aux_paths=...)`, then per job: its voice caches emptied, `torch.manual_seed(seed)`,
`infer(speaker.wav, text, output_path=None, ...)`.

    golden_infer2.py <folder> <out.npz>      (<folder> from tests/engines/indextts/golden_infer2.py)

The npz, per job i (`j{i}.`) and segment k (`j{i}.s{k}.`), read by wrapping upstream's methods on the
instance: spk_cond (get_emb of the speaker clip), emo_cond, style, ref_mel, s{k}.codes (inference_speech),
s{k}.latent (the GPT's latent pass), s{k}.mel (flow matching's output before the prompt cut),
s{k}.wav (BigVGAN's float output), wav_sha256 (infer's int16 return value), draws; an array over
64 KB is kept as `NAME.sha256` (of its C-order bytes) and `NAME.shape`.

Then the `again` jobs (`a{k}.`) on the same instance, its caches kept, `random.seed(random_seed)`
where one is given: s{k}.codes, draws, wav_sha256 (of the int16 return value, or of the wave infer
saves cast as it would return it), and where the job writes a file: file_sha256 (the whole file)
and file_pcm_sha256 (its int16 samples as soundfile reads them).
"""

from __future__ import annotations

import hashlib
import json
import random
import sys
from pathlib import Path

import numpy as np
import torch

torch.set_num_threads(1)
from common import Recorder, forget_clips, log_draws, recorded_hashes, sha, skip_dac_package_inits, stand_in_missing  # noqa: E402

stand_in_missing()
skip_dac_package_inits()

from indextts.infer_v2 import IndexTTS2  # noqa: E402

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
spec = json.loads((folder / "job.json").read_text())
model = folder / "model"
aux = {
    "w2v_bert": str(model / "hf_cache/w2v-bert-2.0"),
    "semantic_codec": str(model / "hf_cache/semantic_codec_model.safetensors"),
    "campplus": str(model / "hf_cache/campplus_cn_common.bin"),
    "bigvgan": str(model / "hf_cache/bigvgan"),
}
tts = IndexTTS2(cfg_path=str(model / "config.yaml"), model_dir=str(model), use_fp16=False, device="cpu", use_qwen_emo=False, aux_paths=aux)

rec = Recorder(big=64 * 1024)
record, result, store = rec.record, rec.result, rec.store
rec.after(tts, "get_emb", "emb")
rec.after(tts.campplus_model, "forward", "style")
rec.after(tts.gpt, "inference_speech", lambda r, *a, **k: rec.keep("codes", r[0]))
rec.after(tts.gpt, "forward", "latent")
rec.after(tts.s2mel.models["cfm"], "inference", "mel")
rec.after(tts.bigvgan, "forward", "wav")
rec.after(tts, "mel_fn", "ref_mel")
draws = log_draws()

result.update(recorded_hashes(folder))
for i, job in enumerate(spec["jobs"]):
    job = dict(job)
    seed, text = job.pop("seed"), job.pop("text")
    if "emo_audio_prompt" in job:
        job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
    forget_clips(tts)
    record.clear()
    draws.clear()
    torch.manual_seed(seed)
    sr, wav = tts.infer(
        str(folder / "speaker.wav"), text, output_path=None, max_text_tokens_per_segment=spec["max_text_tokens_per_segment"], **job, **spec["generation"]
    )
    assert sr == 22050
    result[f"j{i}.wav_sha256"] = sha(wav)
    result[f"j{i}.draws"] = np.array(draws)
    spk_cond, emo_cond = (e.numpy() for e in record["emb"])
    store(f"j{i}.spk_cond", spk_cond)
    store(f"j{i}.emo_cond", emo_cond)
    store(f"j{i}.style", record["style"][0].numpy())
    store(f"j{i}.ref_mel", record["ref_mel"][0].numpy())
    for name in ("codes", "latent", "mel", "wav"):
        for k, value in enumerate(record.get(name, [])):
            store(f"j{i}.s{k}.{name}", value.numpy())
import indextts.infer_v2  # noqa: E402
import soundfile  # noqa: E402

save_pcm_wav = indextts.infer_v2.save_pcm_wav
saved: list[torch.Tensor] = []


def recorded_save(path, wav, sampling_rate):
    saved.append(wav.detach().clone())
    return save_pcm_wav(path, wav, sampling_rate)


indextts.infer_v2.save_pcm_wav = recorded_save


for k, job in enumerate(spec["again"]):
    job = dict(job)
    seed, text, output, random_seed = job.pop("seed"), job.pop("text"), job.pop("output", None), job.pop("random_seed", None)
    if "emo_audio_prompt" in job:
        job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
    record.clear()
    draws.clear()
    saved.clear()
    torch.manual_seed(seed)
    if random_seed is not None:
        random.seed(random_seed)
    path = str(out.parent / f"{out.stem}-{output}") if output else None
    returned = tts.infer(
        str(folder / "speaker.wav"), text, output_path=path, max_text_tokens_per_segment=spec["max_text_tokens_per_segment"], **job, **spec["generation"]
    )
    if output:
        assert returned == path and len(saved) == 1
        wav = saved[0].type(torch.int16).numpy().T
        pcm, rate = soundfile.read(path, dtype="int16", always_2d=True)
        assert rate == 22050
        result[f"a{k}.file_sha256"] = np.array(hashlib.sha256(Path(path).read_bytes()).hexdigest())
        result[f"a{k}.file_pcm_sha256"] = sha(pcm)
        Path(path).unlink()
    else:
        sr, wav = returned
    result[f"a{k}.wav_sha256"] = sha(wav)
    result[f"a{k}.draws"] = np.array(draws)
    for s, value in enumerate(record.get("codes", [])):
        store(f"a{k}.s{s}.codes", value.numpy())
np.savez_compressed(out, **result)
