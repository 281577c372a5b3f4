"""Drop-in for `f5_tts.api.F5TTS`: code written for upstream `f5-tts` runs unchanged on koe.

Same constructor (`model`, `ckpt_file`, `vocab_file`, `ode_method`, `use_ema`,
`vocoder_local_path`, `device`, `hf_cache_dir`), same `infer(...)` arguments and return value
`(wav, sample_rate, spectrogram)`, the same samples: `seed=N` gives upstream's after
`seed_everything(N)`, and like upstream a multi-batch `wav` is float64 (its cross-fade), a single
batch float32. Released architectures only (`F5TTS_v1_Base`, `F5TTS_Base`). The checkpoint, its
vocab and the Vocos vocoder come from local paths, or, for what is not given, from the release
`SWivid/F5-TTS/<model>` through koe's resolver (`koe.service.store.resolve`): the store, the Hugging
Face cache (`hf_cache_dir`; the checkpoint repo and `charactr/vocos-mel-24khz` assembled into a
store folder), a download on first use. An empty `ref_text` is an error (upstream would run Whisper).
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

import numpy as np
import torch

from koe.engines.f5_tts.config import ARCHS, parse_config
from koe.engines.f5_tts.engine import CrossFade, F5TTSEngine
from koe.engines.f5_tts.spec import VOCODER_FILES, VOCODER_REPO, checkpoint_files

__all__ = ["F5TTS"]

_RELEASES = ("F5TTS_v1_Base", "F5TTS_Base")  # upstream's `model` names koe runs: SWivid/F5-TTS/<name>
_CHECKPOINT_REPO = "SWivid/F5-TTS"


def _release_folder(model: str, cache_dir: str | None) -> Path:
    """The koe folder of release `SWivid/F5-TTS/<model>` (checkpoint, vocab.txt, config.yaml, vocos/)."""
    from koe.service.store.resolve import model_folder

    return model_folder(f"{_CHECKPOINT_REPO}/{model}", cache_dir=cache_dir)


def _cached_vocoder(cache_dir: str | None) -> Path:
    """The Vocos vocoder's folder in the Hugging Face cache (for a checkpoint given by path)."""
    from koe.service.store.resolve import cached_repo, hub_cache_dir

    hit = cached_repo(VOCODER_REPO, cache_dir, list(VOCODER_FILES))
    if hit is None or not all((hit.folder / f).is_file() for f in VOCODER_FILES):
        raise FileNotFoundError(
            f"{VOCODER_REPO} is not in the Hugging Face cache ({hub_cache_dir(cache_dir)}); download it first "
            f"(`huggingface-cli download {VOCODER_REPO}`), or pass vocoder_local_path="
        )
    return hit.folder


class F5TTS:
    """A koe F5-TTS engine behind upstream's `F5TTS` class."""

    def __init__(
        self,
        model: str = "F5TTS_v1_Base",
        ckpt_file: str = "",
        vocab_file: str = "",
        ode_method: str = "euler",
        use_ema: bool = True,
        vocoder_local_path: str | None = None,
        device: str | None = None,
        hf_cache_dir: str | None = None,
    ) -> None:
        if model not in _RELEASES:
            known = ", ".join(_RELEASES)
            hint = " (E2-TTS's UNetT backbone is not supported yet)" if model.startswith("E2TTS") else ""
            raise ValueError(f"unknown or unsupported model {model!r}{hint}; koe's F5TTS runs: {known}")
        if ode_method != "euler":
            raise ValueError(f"ode_method={ode_method!r}: koe runs upstream's default Euler solver only")
        if not use_ema:
            raise ValueError("use_ema=False (the training weights) is not supported: released checkpoints are EMA weights")
        release = None if ckpt_file else _release_folder(model, hf_cache_dir)
        ckpt = Path(ckpt_file) if ckpt_file else checkpoint_files(release)[0]
        vocab = Path(vocab_file) if vocab_file else ckpt.parent / "vocab.txt"
        if not vocab.is_file():
            raise FileNotFoundError(f"no vocab file: pass vocab_file= (the release's vocab.txt; {vocab} does not exist)")
        if vocoder_local_path is not None:
            vocoder = Path(vocoder_local_path)
        else:
            vocoder = release / "vocos" if release is not None else _cached_vocoder(hf_cache_dir)
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

    def infer(
        self,
        ref_file,
        ref_text,
        gen_text,
        show_info=print,
        progress=None,
        target_rms=0.1,
        cross_fade_duration=0.15,
        sway_sampling_coef=-1,
        cfg_strength=2,
        nfe_step=32,
        speed=1.0,
        fix_duration=None,
        remove_silence=False,
        file_wave=None,
        file_spec=None,
        seed=None,
    ):
        """Upstream's `infer`: returns (wav, sample_rate, spectrogram (mels, frames))."""
        if seed is None:
            seed = random.randint(0, sys.maxsize)
        random.seed(seed)
        torch.manual_seed(seed)
        self.seed = seed
        if not str(ref_text or "").strip():
            raise ValueError("ref_text is empty: koe needs the reference's transcript (upstream would transcribe it with Whisper)")
        voice = self.engine.prepare_voice(ref_file, ref_text=ref_text)
        options = {
            "nfe_step": nfe_step,
            "cfg_strength": cfg_strength,
            "sway_sampling_coef": sway_sampling_coef,
            "speed": speed,
            "fix_duration": fix_duration,
            "target_rms": target_rms,
            "cross_fade_duration": cross_fade_duration,
        }
        settings = self.engine.settings(options)  # sway_sampling_coef=None: no sway, as upstream
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
