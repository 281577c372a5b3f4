"""The `codec` golden, upstream's side: Fish Speech S2's codec (the modded DAC) as upstream's CLI
loads and runs it, in float32 and bfloat16.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_fish_speech/golden_codec.py <folder> <out.npz>
`folder` holds what tests/engines/fish_speech/golden_codec.py `write_inputs` wrote. The codec is
built by upstream's own `load_codec_model(folder/codec.pth, "cpu", dtype)`, which always reads the
packaged `configs/modded_dac_vq.yaml`: while it runs, `OmegaConf.load` of that file returns the
packaged YAML with `sizes.json`'s entries set (the tiny codec's sizes), instantiated as upstream
instantiates it. Its `load_state_dict` is not strict, so the script fails unless the checkpoint's
keys are exactly the codec's.

Recorded: `state_sha256` (from state_sha256.txt); per clip, `samples.<clip>` / `resampled.<clip>`
(sha256 and shape of `torchaudio.load`'s samples and of the mono 44.1 kHz waveform
`torchaudio.functional.resample` makes), `<dtype>.<clip>.codes` (`encode_audio`'s codes) and
`float32.<clip>.engine_codes` (the server engine's path: `ReferenceLoader.load_audio`, with
`torchaudio.transforms.Resample`, its waveform's sha256 as `resampled_engine.<clip>`, then `DAC.encode` in float32 as `VQManager.encode_reference`
calls it); per codes file, `<dtype>.<codes>.audio` (`decode_to_audio`, as float32) for the short
one, and the long one's `audio_sha256`, `audio_shape`, `audio_head` and `audio_tail` (256 samples).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import fish_speech.models.text2semantic.inference as inference  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchaudio  # noqa: E402
from fish_speech.inference_engine.reference_loader import ReferenceLoader  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402

CLIPS = ("voice44k", "voice24k_stereo", "blip16k")
CODES = ("codes_short", "codes_long")
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
EDGE = 256


def sha(a: torch.Tensor | np.ndarray) -> np.ndarray:
    a = a.detach().contiguous().numpy() if isinstance(a, torch.Tensor) else np.ascontiguousarray(a)
    return np.array(hashlib.sha256(a.tobytes()).hexdigest())


def load_codec(folder: Path, dtype: torch.dtype):
    """upstream's `load_codec_model`, its packaged YAML given the tiny sizes."""
    sizes = json.loads((folder / "sizes.json").read_text())
    original = OmegaConf.load

    def redirected(path, *args, **kwargs):
        cfg = original(path, *args, **kwargs)
        if str(path).endswith("configs/modded_dac_vq.yaml"):
            cfg = OmegaConf.merge(cfg, OmegaConf.create(sizes))
        return cfg

    OmegaConf.load = redirected
    try:
        codec = inference.load_codec_model(folder / "codec.pth", "cpu", dtype)
    finally:
        OmegaConf.load = original
    saved = set(torch.load(folder / "codec.pth", map_location="cpu", weights_only=True))
    held = set(codec.state_dict())
    if saved != held:
        raise SystemExit(f"codec.pth does not fit upstream's codec: missing {sorted(held - saved)[:8]}, unexpected {sorted(saved - held)[:8]}")
    return codec


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    for clip in CLIPS:
        wav, sr = torchaudio.load(str(folder / f"{clip}.wav"))
        result[f"samples.{clip}"] = sha(wav)
        result[f"samples.{clip}.shape"] = np.array(wav.shape)
        mono = wav.mean(dim=0, keepdim=True) if wav.shape[0] > 1 else wav
        resampled = torchaudio.functional.resample(mono, sr, 44100)[0]
        result[f"resampled.{clip}"] = sha(resampled)
        result[f"resampled.{clip}.shape"] = np.array(resampled.shape)
    for name, dtype in DTYPES.items():
        codec = load_codec(folder, dtype)
        with torch.inference_mode():
            for clip in CLIPS:
                result[f"{name}.{clip}.codes"] = inference.encode_audio(folder / f"{clip}.wav", codec, "cpu").numpy()
                if dtype == torch.float32:
                    loader = ReferenceLoader.__new__(ReferenceLoader)
                    loader.backend = "soundfile"
                    samples = loader.load_audio(str(folder / f"{clip}.wav"), codec.sample_rate)
                    result[f"resampled_engine.{clip}"] = sha(samples)
                    audio = torch.from_numpy(samples)[None, None, :]
                    lengths = torch.tensor([audio.shape[2]], dtype=torch.long)
                    result[f"{name}.{clip}.engine_codes"] = codec.encode(audio, lengths)[0][0].numpy()
            for codes_name in CODES:
                codes = torch.from_numpy(np.load(folder / f"{codes_name}.npy"))
                audio = inference.decode_to_audio(codes, codec).float()
                if codes_name == "codes_short":
                    result[f"{name}.{codes_name}.audio"] = audio.numpy()
                else:
                    result[f"{name}.{codes_name}.audio_sha256"] = sha(audio)
                    result[f"{name}.{codes_name}.audio_shape"] = np.array(audio.shape)
                    result[f"{name}.{codes_name}.audio_head"] = audio[:EDGE].numpy()
                    result[f"{name}.{codes_name}.audio_tail"] = audio[-EDGE:].numpy()
        del codec
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
