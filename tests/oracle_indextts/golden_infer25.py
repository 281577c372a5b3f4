"""Golden `infer25`: upstream IndexTTS 2.5 end to end, `infer_v2_5.IndexTTS2(cfg_path, model_dir,
device="cpu", use_qwen_emo=False)` (its auxiliary models from the folder's `hf_cache/`; gpt.pth
loaded strictly, codec.pth's and s2mel.pth's keys checked: upstream's own loads are not strict), then
per job: its voice caches emptied, `torch.manual_seed(seed)` and `random.seed(seed)`, `infer(speaker, text,
None, lang, ...)` (the job's `speaker` clip, else speaker.wav).

    golden_infer25.py <folder> <out.npz>      (<folder> from tests/engines/indextts/golden_infer25.py)

The npz, per job i (`j{i}.`) and segment k (`j{i}.s{k}.`), read by wrapping upstream's methods on the
instance: emb{n} (each get_emb: the speaker clip's spk_cond_emb, its S_ref, the emotion clip's),
style (CAM++), ref_mel, prompt (the length regulator's first call: the prompt condition),
s{k}.text and s{k}.lang (what inference_speech is given), s{k}.emovec, s{k}.codes, s{k}.S_infer
(the codec's decode), s{k}.cond (the length regulator), s{k}.mel (flow matching's output before the
prompt cut), s{k}.wav (BigVGAN's float output), wav_sha256 (infer's int16 return value), draws (torch's),
random (the sha256 of `json.dumps(random.getstate())` after the job: the Japanese G2P's draws); an
array over 16 KB is kept as `NAME.sha256` (of its C-order bytes) and `NAME.shape`.
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

stand_in_missing(("modelscope",))  # 2.5 uses whisper's tokenizer and tiktoken (installed); modelscope only for a CAM++ it is not asked for
skip_dac_package_inits()

import indextts.infer_v2_5  # noqa: E402
from indextts.infer_v2_5 import IndexTTS2  # noqa: E402

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
spec = json.loads((folder / "job.json").read_text())
model = folder / "model"


def strict_gpt_load(module, path):
    """Upstream's `load_checkpoint` of gpt.pth, strictly: koe's fixture must hold every key, no other."""
    state = torch.load(path, map_location="cpu")
    module.load_state_dict(state.get("model", state), strict=True)
    return {}


indextts.infer_v2_5.load_checkpoint = strict_gpt_load
tts = IndexTTS2(cfg_path=str(model / "config.yaml"), model_dir=str(model), use_bf16=False, device="cpu", use_qwen_emo=False)
codec_keys = set(torch.load(model / "codec.pth", map_location="cpu")["model"])
assert codec_keys == set(tts.semantic_codec.state_dict()), "codec.pth's keys are not EnhancedCodec's"
s2mel_net = torch.load(model / "s2mel.pth", map_location="cpu")["net"]
assert set(s2mel_net) == set(tts.s2mel.models), "s2mel.pth's modules are not MyModel's"
for name, module in tts.s2mel.models.items():
    assert set(s2mel_net[name]) == set(module.state_dict()), f"s2mel.pth's {name} keys differ"

rec = Recorder(big=16 * 1024)
record, result, store = rec.record, rec.result, rec.store


def searched(result, *args, **kwargs) -> None:
    rec.keep("codes", result[0])
    rec.keep("text", args[1])
    rec.keep("lang", args[2])
    rec.keep("emovec", kwargs["emo_vec"])


rec.after(tts, "get_emb", "emb")
rec.after(tts.campplus_model, "forward", "style")
rec.after(tts.gpt, "inference_speech", searched)
rec.after(tts.semantic_codec, "decode", "S_infer")
rec.after(tts.s2mel.models["length_regulator"], "forward", lambda r, *a, **k: rec.keep("cond", r[0]))
rec.after(tts.s2mel.models["cfm"], "inference", "mel")
rec.after(tts.bigvgan, "forward", "wav")
rec.after(tts, "mel_fn", "ref_mel")
draws = log_draws()

result.update(recorded_hashes(folder))
for i, job in enumerate(spec["jobs"]):
    job = dict(job)
    seed, text, lang = job.pop("seed"), job.pop("text"), job.pop("lang")
    speaker = folder / job.pop("speaker", "speaker.wav")
    if "emo_audio_prompt" in job:
        job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
    forget_clips(tts)
    record.clear()
    draws.clear()
    torch.manual_seed(seed)
    random.seed(seed)
    sr, wav = tts.infer(str(speaker), text, None, lang, **job, **spec["generation"])
    result[f"j{i}.random"] = hashlib.sha256(json.dumps(random.getstate()).encode()).hexdigest()
    assert sr == 22050
    result[f"j{i}.wav_sha256"] = sha(wav)
    result[f"j{i}.draws"] = np.array(draws)
    for n, emb in enumerate(record["emb"]):
        store(f"j{i}.emb{n}", emb.numpy())
    store(f"j{i}.style", record["style"][0].numpy())
    store(f"j{i}.ref_mel", record["ref_mel"][0].numpy())
    store(f"j{i}.prompt", record["cond"][0].numpy())
    record["cond"] = record["cond"][1:]
    for name in ("text", "lang", "emovec", "codes", "S_infer", "cond", "mel", "wav"):
        for k, value in enumerate(record.get(name, [])):
            store(f"j{i}.s{k}.{name}", value.numpy())
np.savez_compressed(out, **result)
