"""The `mel` golden, upstream's side: IndexTTS 1.5's reference log-mel of each clip.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_mel.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_mel.py `write_inputs` wrote. Each clip goes the
way `IndexTTS.infer` / `infer_fast` take their `audio_prompt` (indextts/infer.py): `torchaudio.load`,
the channel mean, `torchaudio.transforms.Resample(sr, 24000)`, the first 50 s, then upstream's
`MelSpectrogramFeatures()`. Writes each mel, and sha256 hashes of the decoded, mixed and resampled
audio (so a failing test says which step differs); for the long clip its shape, last frames and hash.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
import torchaudio  # noqa: E402
from common import recorded_hashes, sha  # noqa: E402
from indextts.utils.feature_extractors import MelSpectrogramFeatures  # noqa: E402


def reference_path(path: Path) -> dict[str, torch.Tensor]:
    """infer.py's steps from the prompt's path to its `cond_mel`, each kept."""
    decoded, sr = torchaudio.load(str(path))
    mixed = torch.mean(decoded, dim=0, keepdim=True)
    if mixed.shape[0] > 1:
        mixed = mixed[0].unsqueeze(0)
    resampled = torchaudio.transforms.Resample(sr, 24000)(mixed)
    max_audio_samples = int(50 * 24000)
    if resampled.shape[1] > max_audio_samples:
        resampled = resampled[:, :max_audio_samples]
    mel = MelSpectrogramFeatures()(resampled)
    return {"decoded": decoded, "mixed": mixed, "resampled": resampled, "mel": mel}


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    spec = json.loads((folder / "clips.json").read_text())
    result = recorded_hashes(folder)
    for name in [*spec["clips"], spec["long"]]:
        with torch.no_grad():
            steps = reference_path(folder / f"{name}.wav")
        for step in ("decoded", "mixed", "resampled", "mel"):
            result[f"{name}.{step}_sha256"] = sha(steps[step])
        mel = steps["mel"].numpy()
        if name == spec["long"]:
            result[f"{name}.mel_shape"] = np.array(mel.shape, dtype=np.int64)
            result[f"{name}.mel_tail"] = mel[..., -spec["tail_frames"] :].copy()
        else:
            result[f"{name}.mel"] = mel
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
