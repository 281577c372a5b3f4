"""The `reference` golden, upstream's side: the reference clip as `TTS.set_ref_audio` reads it for
a v2 model, through upstream's own `TTS._set_prompt_semantic` and `TTS._get_ref_spec` run on a
stand-in `self` (CPU, float32, SoVITS at 32 kHz, n_fft 2048, hop 640, window 2048; its HuBERT
upstream's `CNHubert` of the tiny folder; its SoVITS a stand-in whose `extract_latent` keeps the
HuBERT features it is given).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_gpt_sovits/golden_reference.py <folder> <out.npz>
`folder` holds what tests/engines/gpt_sovits/golden_reference.py `write_inputs` wrote.

Recorded per clip: `wav16k.<clip>` (sha256 of `librosa.load(path, sr=16000)`, the call
`_set_prompt_semantic` makes) and `.shape`; `error.<clip>` (the error's type and message) for
clips outside the window, else `hubert_input.<clip>` (sha256 of what reaches HuBERT: the samples
and the zeros), `hubert.<clip>` (the features `extract_latent` gets) for a few clips; `raw.<clip>`
(sha256 and shape of `torchaudio.load`, here a soundfile stand-in for its torchcodec decoder), `spec.<clip>` (`_get_ref_spec`'s spectrogram: sha256,
shape, first 2 frames), `sv.<clip>` (its 16 kHz audio with `is_v2pro`) for a few clips.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import process_ckpt  # noqa: E402
import soundfile as sf  # noqa: E402
import torch  # noqa: E402
import torchaudio  # noqa: E402
from feature_extractor.cnhubert import CNHubert  # noqa: E402
from oracle_arrays import sha  # noqa: E402

# upstream's sv.py (imported by TTS.py) finds ERes2NetV2 under <cwd>/GPT_SoVITS/eres2net: the copy's
sys.path.append(str(Path(process_ckpt.__file__).resolve().parent / "eres2net"))

from TTS_infer_pack import TTS as tts_module  # noqa: E402

CLIPS = ("mono16k", "stereo24k", "mono44k", "stereo48k", "edge3s32k", "edge10s16k", "loud48k", "short22k", "long16k")
HUBERT_CLIPS = ("stereo24k", "mono44k")
SV_CLIPS = ("stereo48k", "loud48k")


def load_with_soundfile(path, *args, **kwargs) -> tuple[torch.Tensor, int]:
    """torchaudio 2.11's `load` decodes through torchcodec, whose wheel needs FFmpeg libraries and a
    CUDA torch the oracle lacks: the same samples through libsndfile (integer PCM scaled by
    1 / 2**(bits-1), float PCM as stored; float32 (channels, frames)), as FFmpeg gives them for WAV."""
    if args or kwargs:
        raise NotImplementedError("the stand-in loads whole files at their own rate")
    data, rate = sf.read(os.fspath(path), dtype="float32", always_2d=True)
    return torch.from_numpy(data.T.copy()), int(rate)


class _Configs:
    device = torch.device("cpu")
    is_half = False
    sampling_rate = 32000
    filter_length = 2048
    hop_length = 640
    win_length = 2048


class _SoVITS:
    """Keeps what `extract_latent` is given; returns codes of the shape upstream indexes."""

    def __init__(self) -> None:
        self.seen: list[torch.Tensor] = []

    def extract_latent(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.append(x.clone())
        return torch.zeros(1, 1, x.shape[-1], dtype=torch.long)


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    torchaudio.load = load_with_soundfile
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    tts = tts_module.TTS.__new__(tts_module.TTS)
    tts.configs = _Configs()
    tts.prompt_cache = {"prompt_semantic": None, "refer_spec": [], "raw_audio": None, "raw_sr": None}
    tts.cnhuhbert_model = CNHubert(str(folder / "hubert")).eval()
    tts.vits_model = _SoVITS()
    seen_cat: list[torch.Tensor] = []
    original_cat = torch.cat

    def cat(tensors, *args, **kwargs):  # what `_set_prompt_semantic` joins: the samples and the zeros
        joined = original_cat(tensors, *args, **kwargs)
        seen_cat.append(joined)
        return joined

    for name in CLIPS:
        path = str(folder / f"{name}.wav")
        wav16k, _ = tts_module.librosa.load(path, sr=16000)
        result[f"wav16k.{name}"] = sha(wav16k)
        result[f"wav16k.{name}.shape"] = np.array(wav16k.shape)
        tts.vits_model.seen.clear()
        seen_cat.clear()
        torch.cat = cat
        try:
            tts._set_prompt_semantic(path)
        except OSError as e:
            result[f"error.{name}"] = np.array(f"{type(e).__name__}: {e}")
            continue
        finally:
            torch.cat = original_cat
        result[f"hubert_input.{name}"] = sha(seen_cat[0])
        result[f"hubert_input.{name}.shape"] = np.array(seen_cat[0].shape)
        if name in HUBERT_CLIPS:
            result[f"hubert.{name}"] = sha(tts.vits_model.seen[0])
            result[f"hubert.{name}.shape"] = np.array(tts.vits_model.seen[0].shape)
        raw, _ = torchaudio.load(path)
        result[f"raw.{name}"] = sha(raw)
        result[f"raw.{name}.shape"] = np.array(raw.shape)
        for v2pro in (False, True) if name in SV_CLIPS else (False,):
            tts.is_v2pro = v2pro
            spec, audio = tts._get_ref_spec(path)
            if v2pro:
                result[f"sv.{name}"] = sha(audio)
                result[f"sv.{name}.shape"] = np.array(audio.shape)
            else:
                result[f"spec.{name}"] = sha(spec)
                result[f"spec.{name}.shape"] = np.array(spec.shape)
                result[f"spec.{name}.head"] = spec[0, :, :2].contiguous().numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
