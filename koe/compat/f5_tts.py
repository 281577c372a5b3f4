"""Drop-in for `f5_tts.api.F5TTS`: code written for upstream `f5-tts` runs unchanged on koe.

Same constructor (`model`, `ckpt_file`, `vocab_file`, `ode_method`, `use_ema`,
`vocoder_local_path`, `device`, `hf_cache_dir`), same `infer(...)` arguments and return value
`(wav, sample_rate, spectrogram)`, the same samples: `seed=N` gives upstream's after
`seed_everything(N)`, and like upstream a multi-batch `wav` is float64 (its cross-fade), a single
batch float32. Released architectures only (`F5TTS_v1_Base`, `F5TTS_Base`); the checkpoint, its
vocab and the Vocos vocoder come from local paths or the Hugging Face cache (koe never downloads
here: `koe models pull` does). An empty `ref_text` is an error (upstream would run Whisper).
"""

from __future__ import annotations

import random
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from koe.engines.f5_tts.config import ARCHS, parse_config
from koe.engines.f5_tts.engine import CrossFade, F5TTSEngine
from koe.engines.f5_tts.spec import VOCODER_REPO

__all__ = ["F5TTS"]

_RELEASE_FILES = {"F5TTS_v1_Base": ("F5-TTS", "F5TTS_v1_Base/model_1250000.safetensors"),
                  "F5TTS_Base": ("F5-TTS", "F5TTS_Base/model_1200000.safetensors")}  # fmt: skip


def _cached(repo: str, filename: str, cache_dir: str | None) -> str:
    from huggingface_hub import hf_hub_download

    try:
        return hf_hub_download(repo, filename, cache_dir=cache_dir, local_files_only=True)
    except Exception as e:  # noqa: BLE001 - any miss is the same advice
        raise FileNotFoundError(f"{repo}/{filename} is not in the Hugging Face cache; download it first "
                                f"(`koe models pull`, or `huggingface-cli download {repo} {filename}`) or pass a local path") from e


class F5TTS:
    """A koe F5-TTS engine behind upstream's `F5TTS` class."""

    def __init__(self, model: str = "F5TTS_v1_Base", ckpt_file: str = "", vocab_file: str = "", ode_method: str = "euler",
                 use_ema: bool = True, vocoder_local_path: str | None = None, device: str | None = None, hf_cache_dir: str | None = None) -> None:
        if model not in _RELEASE_FILES:
            known = ", ".join(_RELEASE_FILES)
            hint = " (E2-TTS's UNetT backbone is not supported yet)" if model.startswith("E2TTS") else ""
            raise ValueError(f"unknown or unsupported model {model!r}{hint}; koe's F5TTS runs: {known}")
        if ode_method != "euler":
            raise ValueError(f"ode_method={ode_method!r}: koe runs upstream's default Euler solver only")
        if not use_ema:
            raise ValueError("use_ema=False (the training weights) is not supported: released checkpoints are EMA weights")
        repo, filename = _RELEASE_FILES[model]
        ckpt = Path(ckpt_file or _cached(f"SWivid/{repo}", filename, hf_cache_dir))
        vocab = Path(vocab_file) if vocab_file else ckpt.parent / "vocab.txt"
        if not vocab.is_file():
            raise FileNotFoundError(f"no vocab file: pass vocab_file= (the release's vocab.txt; {vocab} does not exist)")
        vocoder = Path(vocoder_local_path) if vocoder_local_path is not None else Path(_cached(VOCODER_REPO, "config.yaml", hf_cache_dir)).parent
        self.engine = F5TTSEngine.from_files(parse_config(ARCHS[model]), [ckpt], vocab, vocoder, device=device)
        self.mel_spec_type = "vocos"
        self.target_sample_rate = self.engine.sample_rate
        self.ode_method, self.use_ema, self.device = ode_method, use_ema, str(self.engine.device)
        self.seed: int | None = None

    def transcribe(self, ref_audio, language=None):
        raise NotImplementedError("koe does not transcribe references (upstream uses Whisper): pass ref_text")

    def export_wav(self, wav, file_wave, remove_silence=False):
        import soundfile as sf

        if remove_silence:
            raise NotImplementedError("remove_silence is not supported by koe's F5TTS yet")
        sf.write(file_wave, wav, self.target_sample_rate)

    def export_spectrogram(self, spec, file_spec):
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt
        except ImportError as e:
            raise ImportError("export_spectrogram draws with matplotlib: pip install matplotlib") from e
        plt.figure(figsize=(12, 4))
        plt.imshow(spec, origin="lower", aspect="auto")
        plt.colorbar()
        plt.savefig(file_spec)
        plt.close()

    def infer(self, ref_file, ref_text, gen_text, show_info=print, progress=None, target_rms=0.1, cross_fade_duration=0.15,
              sway_sampling_coef=-1, cfg_strength=2, nfe_step=32, speed=1.0, fix_duration=None, remove_silence=False,
              file_wave=None, file_spec=None, seed=None):
        """Upstream's `infer`: returns (wav, sample_rate, spectrogram (mels, frames))."""
        if seed is None:
            seed = random.randint(0, sys.maxsize)
        random.seed(seed)
        torch.manual_seed(seed)
        self.seed = seed
        if not str(ref_text or "").strip():
            raise ValueError("ref_text is empty: koe needs the reference's transcript (upstream would transcribe it with Whisper)")
        voice = self.engine.prepare_voice(ref_file, ref_text=ref_text)
        options = {"nfe_step": nfe_step, "cfg_strength": cfg_strength, "sway_sampling_coef": sway_sampling_coef, "speed": speed,
                   "fix_duration": fix_duration, "target_rms": target_rms, "cross_fade_duration": cross_fade_duration}  # fmt: skip
        settings = self.engine.settings(options)
        settings = replace(settings, sway_sampling_coef=sway_sampling_coef)  # None (no sway) passes, as upstream
        generator = torch.Generator(device=self.engine.device).manual_seed(seed % (1 << 64))
        waves, mels = [], []
        for batch in self.engine.batches(gen_text, voice, settings, generator=generator):
            waves.append(batch.wave)
            mels.append(batch.mel)
        wav = CrossFade.join64(waves, int(cross_fade_duration * self.target_sample_rate))
        spec = np.concatenate(mels, axis=1)
        if file_wave is not None:
            self.export_wav(wav, file_wave, remove_silence)
        if file_spec is not None:
            self.export_spectrogram(spec, file_spec)
        return wav, self.target_sample_rate, spec

