"""F5-TTS audio front end, run by upstream (f5-tts 1.1.22, torchaudio, pydub) in the oracle venv.

Job (JSON): `inputs` (a safetensors file of input tensors) and lists of cases:
  resample:  {name, input, orig, new}     -> torchaudio.transforms.Resample(orig, new)(inputs[input])
  fbank:     {name, n_freqs, n_mels, sample_rate}  -> torchaudio.functional.melscale_fbanks(..., htk, norm None)
  mel:       {name, input}                -> f5_tts.model.modules.get_vocos_mel_spectrogram(inputs[input])
  vocos_mel: {name, input}                -> vocos.feature_extractors.MelSpectrogramFeatures()(inputs[input])
  reference: {name, path, text, target_rms} -> preprocess_ref_audio_text, then the reference-audio lines
             of infer_process / infer_batch_process (load, channel mean, rms, level, resample to 24 kHz)
Writes tensors `<kind>/<name>` (reference: `reference/<name>/loaded`, `/mono` (its channel mean, (1, frames)),
`/audio`, `/rms`) and info
`reference: {name: {text, sample_rate}}`.
"""

from __future__ import annotations

import contextlib
import io

import torch
from common import read_job, use_soundfile_loader, write_results
from safetensors.torch import load_file


def main() -> None:
    job, out = read_job()
    use_soundfile_loader()
    import torchaudio

    inputs = load_file(job["inputs"]) if job.get("inputs") else {}
    tensors: dict[str, torch.Tensor] = {}
    info: dict = {"reference": {}}

    for case in job.get("resample", []):
        resampler = torchaudio.transforms.Resample(case["orig"], case["new"])
        tensors[f"resample/{case['name']}"] = resampler(inputs[case["input"]])

    for case in job.get("fbank", []):
        sr = case["sample_rate"]
        tensors[f"fbank/{case['name']}"] = torchaudio.functional.melscale_fbanks(case["n_freqs"], 0.0, float(sr // 2), case["n_mels"], sr, None, "htk")

    if job.get("mel"):
        from f5_tts.model.modules import get_vocos_mel_spectrogram

        for case in job["mel"]:
            tensors[f"mel/{case['name']}"] = get_vocos_mel_spectrogram(inputs[case["input"]])

    if job.get("vocos_mel"):
        from vocos.feature_extractors import MelSpectrogramFeatures

        features = MelSpectrogramFeatures(padding="center")
        for case in job["vocos_mel"]:
            tensors[f"vocos_mel/{case['name']}"] = features(inputs[case["input"]])

    if job.get("reference"):
        from f5_tts.infer import utils_infer

        for case in job["reference"]:
            with contextlib.redirect_stdout(io.StringIO()):
                ref_file, ref_text = utils_infer.preprocess_ref_audio_text(case["path"], case["text"], show_info=lambda *a: None)
            # infer_process: torchaudio.load; infer_batch_process: these lines, as upstream has them
            audio, sr = torchaudio.load(ref_file)
            loaded = audio.clone()
            if audio.shape[0] > 1:
                audio = torch.mean(audio, dim=0, keepdim=True)
            mono = audio.clone()
            rms = torch.sqrt(torch.mean(torch.square(audio)))
            target_rms = case["target_rms"]
            if rms < target_rms:
                audio = audio * target_rms / rms
            if sr != utils_infer.target_sample_rate:
                resampler = torchaudio.transforms.Resample(sr, utils_infer.target_sample_rate)
                audio = resampler(audio)
            name = case["name"]
            tensors[f"reference/{name}/loaded"] = loaded
            tensors[f"reference/{name}/mono"] = mono
            tensors[f"reference/{name}/audio"] = audio
            tensors[f"reference/{name}/rms"] = rms.reshape(1)
            info["reference"][name] = {"text": ref_text, "sample_rate": sr}

    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
