"""Oracle for koe's voice-clone audio front end: upstream loading, resampling, mels, speaker encoder.

Job: {"tasks": [ {"kind": ..., "name": ..., ...}, ... ]}; each task writes tensors prefixed "<name>.":
  mel_filterbank {sr, n_fft, n_mels, fmin, fmax}     -> fb (librosa.filters.mel, float32)
  resample {npy, orig_sr, target_sr}                  -> y (librosa.resample default)
  load {path}                                         -> wav, info sr (Qwen3TTSModel._normalize_audio_inputs)
  mel {npy}                                           -> mel (upstream mel_spectrogram, speaker settings)
  encoder {config, weights, npy | path}               -> emb; builds Qwen3TTSSpeakerEncoder, loads
      `weights` (a safetensors state dict the test wrote) strictly, then embeds the audio: a 24 kHz .npy via extract_speaker_embedding, or a file path through upstream's whole
      create_voice_clone_prompt front end (load, mono, librosa.resample to 24 kHz, extract).
"""

from __future__ import annotations

import types

import librosa
import numpy as np
import torch
from common import read_job, write_results
from safetensors.torch import load_file


def _upstream():
    from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSSpeakerEncoderConfig
    from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration, Qwen3TTSSpeakerEncoder, mel_spectrogram
    from qwen_tts.inference.qwen3_tts_model import Qwen3TTSModel

    return Qwen3TTSSpeakerEncoderConfig, Qwen3TTSSpeakerEncoder, Qwen3TTSForConditionalGeneration, mel_spectrogram, Qwen3TTSModel


def _normalize(path: str) -> tuple[np.ndarray, int]:
    *_, Qwen3TTSModel = _upstream()
    wrapper = object.__new__(Qwen3TTSModel)  # only its audio helpers are used; they need no model
    [(wav, sr)] = Qwen3TTSModel._normalize_audio_inputs(wrapper, [path])
    return wav, sr


def main() -> None:
    job, out = read_job()
    SpkConfig, SpkEncoder, ForGen, mel_spectrogram, _ = _upstream()
    tensors: dict[str, torch.Tensor] = {}
    info: dict = {}
    for task in job["tasks"]:
        kind, name = task["kind"], task["name"]
        if kind == "mel_filterbank":
            fb = librosa.filters.mel(sr=task["sr"], n_fft=task["n_fft"], n_mels=task["n_mels"], fmin=task["fmin"], fmax=task["fmax"])
            tensors[f"{name}.fb"] = torch.from_numpy(np.ascontiguousarray(fb))
        elif kind == "resample":
            x = np.load(task["npy"])
            y = librosa.resample(x, orig_sr=task["orig_sr"], target_sr=task["target_sr"])
            tensors[f"{name}.y"] = torch.from_numpy(np.ascontiguousarray(y))
            info[f"{name}.dtype"] = str(y.dtype)
        elif kind == "load":
            wav, sr = _normalize(task["path"])
            tensors[f"{name}.wav"] = torch.from_numpy(np.ascontiguousarray(wav))
            info[f"{name}.sr"] = sr
            info[f"{name}.dtype"] = str(wav.dtype)
        elif kind == "mel":
            x = np.load(task["npy"])
            mel = mel_spectrogram(
                torch.from_numpy(x).unsqueeze(0), n_fft=1024, num_mels=128, sampling_rate=24000, hop_size=256, win_size=1024, fmin=0, fmax=12000
            )
            tensors[f"{name}.mel"] = mel
        elif kind == "encoder":
            encoder = SpkEncoder(SpkConfig(**task["config"])).eval()
            encoder.load_state_dict(load_file(task["weights"]), strict=True)
            owner = types.SimpleNamespace(speaker_encoder=encoder, device=torch.device("cpu"), dtype=torch.float32)
            if "npy" in task:
                audio = np.load(task["npy"])
            else:
                wav, sr = _normalize(task["path"])
                audio = wav
                if sr != 24000:  # as create_voice_clone_prompt does
                    audio = librosa.resample(y=wav.astype(np.float32), orig_sr=int(sr), target_sr=24000)
                tensors[f"{name}.audio24k"] = torch.from_numpy(np.ascontiguousarray(audio))
            emb = ForGen.extract_speaker_embedding(owner, audio=audio, sr=24000)
            tensors[f"{name}.emb"] = emb
        else:
            raise ValueError(f"unknown task kind {kind}")
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
