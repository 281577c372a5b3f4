"""Golden `infer15`: upstream IndexTTS 1.5 end to end, `IndexTTS(cfg_path, model_dir, device="cpu")`
then, for each text, `torch.manual_seed(seed)` and `infer(prompt, text, output_path=None, ...)`.

    golden_infer15.py <folder> <out.npz>

`<folder>` (koe's side writes it, `tests/engines/indextts/golden_infer15.py`):
  model/            a release folder: config.yaml, gpt.pth, bigvgan_generator.pth, bpe.model
  prompt.wav        the speaker's clip (any rate: upstream resamples it to 24 kHz)
  job.json          {"seed": int, "texts": [str, ...], "max_text_tokens_per_segment": int (120),
                     "generation": {infer's keyword arguments: max_mel_tokens, num_beams, ...}}
  state_sha256.txt  `NAME HASH` lines (gpt, bigvgan): copied into the npz as `NAME.state_sha256`

The npz, per text i (`t{i}.`) and per segment j of it (`t{i}.s{j}.`), read from upstream's own
methods by wrapping them on the instance (upstream's files are not edited):
  cond_mel          [1, 100, frames]  the prompt's log-mel (gpt.inference_speech's input; kept once)
  s{j}.text_ids     [1, L] int32      the segment's BPE ids
  s{j}.cond_latent  [1, 32, D]        gpt.get_conditioning's output (perceiver latents)
  s{j}.codes_raw    [1, T] int64      inference_speech's codes (stop token included when reached)
  s{j}.codes        [1, T'] int64     the codes after remove_long_silence, as gpt(...) gets them
  s{j}.latent       [1, T', D]        gpt(..., return_latent=True)
  s{j}.wav          [1, samples]      bigvgan's float output (before the 32767 scale and clamp)
  wav_sha256        sha256 of infer's return value ([samples, 1] int16)
  fast_wav_sha256   the same of infer_fast's (on the CPU, same seed and segment limit)
  file_sha256       sha256 of the WAV file infer writes (output_path; same seed), whole
  file_pcm_sha256   sha256 of that file's samples (int16 [samples, 1], as soundfile reads them)
  draws             the calls to torch's global generator during infer, in order (`op shape n`)
  tokens            the normalised text's BPE pieces, space-joined (a str)
plus `sampling_rate`, `seed` and the weights' hashes.
"""

from __future__ import annotations

import hashlib
import json
import sys
import tempfile
from pathlib import Path

import numpy as np
import soundfile
import torch
from common import recorded_hashes

torch.set_num_threads(1)

folder, out = Path(sys.argv[1]), Path(sys.argv[2])
job = json.loads((folder / "job.json").read_text())
model = folder / "model"

from indextts.gpt.model import UnifiedVoice  # noqa: E402
from indextts.infer import IndexTTS  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

# upstream loads gpt.pth with strict=False: check the file against a fresh UnifiedVoice, strictly
cfg = OmegaConf.load(model / "config.yaml")
UnifiedVoice(**cfg.gpt).load_state_dict(torch.load(model / cfg.gpt_checkpoint, map_location="cpu"), strict=True)

tts = IndexTTS(cfg_path=str(model / "config.yaml"), model_dir=str(model), device="cpu")  # bigvgan: strict

record: dict[str, list] = {}


def keep(name: str, value: torch.Tensor) -> None:
    record.setdefault(name, []).append(value.detach().clone())


calling: list[str] = []  # the wrapped methods being run, outermost first


def wrap(obj, name: str, after) -> None:
    """Replace obj.name by a call of the original whose arguments and result `after` records."""
    original = getattr(obj, name)

    def wrapper(*args, **kwargs):
        calling.append(name)
        try:
            result = original(*args, **kwargs)
        finally:
            calling.pop()
        after(result, *args, **kwargs)
        return result

    setattr(obj, name, wrapper)


def on_conditioning(latent, *args, **kwargs):
    if calling == ["inference_speech"]:  # gpt(...) computes it again for the latent: the same op
        keep("cond_latent", latent)


def on_inference_speech(codes, cond_mel, text_inputs, **kwargs):
    keep("cond_mel", cond_mel)
    keep("text_ids", text_inputs)
    keep("codes_raw", codes)


def on_forward(latent, cond_mel, text_inputs, text_lengths, codes, wav_lengths, **kwargs):
    keep("codes", codes)
    keep("latent", latent)


wrap(tts.gpt, "inference_speech", on_inference_speech)
wrap(tts.gpt, "get_conditioning", on_conditioning)
wrap(tts.gpt, "forward", on_forward)  # nn.Module.__call__ looks forward up on the instance
wrap(tts.bigvgan, "forward", lambda result, *a, **k: keep("wav", result[0].squeeze(1)))

draws: list[str] = []
for op in ("multinomial", "rand", "randn", "randint", "rand_like", "randn_like", "randint_like", "bernoulli", "normal", "randperm", "poisson"):
    fn = getattr(torch, op)

    def logged(*args, _fn=fn, _op=op, **kwargs):
        result = _fn(*args, **kwargs)
        shape = list(args[0].shape) if args and isinstance(args[0], torch.Tensor) else list(result.shape)
        draws.append(f"{_op} {shape} {kwargs.get('num_samples', args[1] if _op == 'multinomial' and len(args) > 1 else '')}".strip())
        return result

    setattr(torch, op, logged)

result: dict[str, np.ndarray] = {"seed": np.array(job["seed"]), "sampling_rate": np.array(24000), **recorded_hashes(folder)}
generation = dict(job.get("generation", {}))
segment_limit = job.get("max_text_tokens_per_segment", 120)
for i, text in enumerate(job["texts"]):
    record.clear()
    draws.clear()
    pieces = tts.tokenizer.tokenize(text)  # no draws: what infer tokenises again
    torch.manual_seed(job["seed"])
    sr, wav = tts.infer(str(folder / "prompt.wav"), text, output_path=None, max_text_tokens_per_segment=segment_limit, **dict(generation))
    assert sr == 24000
    result[f"t{i}.wav_sha256"] = np.array(hashlib.sha256(np.ascontiguousarray(wav).tobytes()).hexdigest())  # the segments' waves are kept whole
    result[f"t{i}.tokens"] = np.array(" ".join(pieces))
    result[f"t{i}.draws"] = np.array(draws)
    mel = record["cond_mel"][0].numpy()
    assert "cond_mel" not in result or np.array_equal(result["cond_mel"], mel)  # one prompt: kept once
    result["cond_mel"] = mel
    for name, values in record.items():
        if name != "cond_mel":
            for j, v in enumerate(values):
                result[f"t{i}.s{j}.{name}"] = v.numpy()
    # the same text through infer_fast (as it runs on the CPU) and through infer writing its WAV file
    torch.manual_seed(job["seed"])
    sr, fast = tts.infer_fast(str(folder / "prompt.wav"), text, output_path=None, max_text_tokens_per_segment=segment_limit, **dict(generation))
    result[f"t{i}.fast_wav_sha256"] = np.array(hashlib.sha256(np.ascontiguousarray(fast).tobytes()).hexdigest())
    wav_file = Path(tempfile.mkdtemp()) / f"t{i}.wav"
    torch.manual_seed(job["seed"])
    assert tts.infer(str(folder / "prompt.wav"), text, output_path=str(wav_file), max_text_tokens_per_segment=segment_limit, **dict(generation)) == str(
        wav_file
    )
    pcm, rate = soundfile.read(wav_file, dtype="int16", always_2d=True)
    info = soundfile.info(wav_file)
    assert rate == 24000 and info.subtype == "PCM_16" and info.format == "WAV", info
    result[f"t{i}.file_pcm_sha256"] = np.array(hashlib.sha256(np.ascontiguousarray(pcm).tobytes()).hexdigest())
    result[f"t{i}.file_sha256"] = np.array(hashlib.sha256(wav_file.read_bytes()).hexdigest())
np.savez_compressed(out, **result)
