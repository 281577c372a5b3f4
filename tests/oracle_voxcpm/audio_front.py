"""VoxCPM's prompt-audio reading, run by upstream's own calls (voxcpm 2.0.3's librosa / torchaudio).

Job (JSON): `cases`, each {name, path, method, target_rate, patch_len, left}:
  method "librosa":    `librosa.load(path, sr=target_rate, mono=True)` (VoxCPM2Model._encode_wav)
  method "torchaudio": `torchaudio.load(path)`, `audio.mean(dim=0, keepdim=True)` if more than one
                       channel, `torchaudio.functional.resample(audio, sr, target_rate)` if the rate
                       differs (VoxCPMModel.build_prompt_cache)
  then upstream's padding to a multiple of `patch_len` (`patch_size * chunk_size`): zeros on the
  left (prompt audio) or on the right (VoxCPM2's reference), nothing when already a multiple.
Writes tensors `<name>/audio` (float32 (n,), before padding) and `<name>/padded` ((1, n')), and
info `{name: {"source_rate": sr}}` (torchaudio only).
"""

from __future__ import annotations

import torch
from common import read_job, write_results


def _load_librosa(path: str, target_rate: int) -> tuple[torch.Tensor, dict]:
    import librosa

    audio, _ = librosa.load(path, sr=target_rate, mono=True)  # as VoxCPM2Model._encode_wav calls it
    return torch.from_numpy(audio).unsqueeze(0), {}


def _load_torchaudio(path: str, target_rate: int) -> tuple[torch.Tensor, dict]:
    import torchaudio

    # VoxCPMModel.build_prompt_cache, line for line
    audio, sr = torchaudio.load(path)
    if audio.size(0) > 1:
        audio = audio.mean(dim=0, keepdim=True)
    if sr != target_rate:
        audio = torchaudio.functional.resample(audio, sr, target_rate)
    return audio, {"source_rate": sr}


def _padded(audio: torch.Tensor, patch_len: int, left: bool) -> torch.Tensor:
    if audio.size(1) % patch_len != 0:
        padding_size = patch_len - audio.size(1) % patch_len
        pad = (padding_size, 0) if left else (0, padding_size)
        audio = torch.nn.functional.pad(audio, pad)
    return audio


def main() -> None:
    job, out = read_job()
    loaders = {"librosa": _load_librosa, "torchaudio": _load_torchaudio}
    tensors: dict[str, torch.Tensor] = {}
    info: dict = {}
    for case in job["cases"]:
        audio, extra = loaders[case["method"]](case["path"], case["target_rate"])
        name = case["name"]
        tensors[f"{name}/audio"] = audio[0].clone()
        tensors[f"{name}/padded"] = _padded(audio, case["patch_len"], case["left"])
        info[name] = extra
    write_results(out, tensors, info)


if __name__ == "__main__":
    main()
