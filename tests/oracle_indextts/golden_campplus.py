"""The `campplus` golden, upstream's side: IndexTTS 2's speaker style (Kaldi fbank into 3D-Speaker's CAM++)
and its pick of an emotion matrix's row by cosine similarity.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_campplus.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_campplus.py `write_inputs` wrote. As
`IndexTTS2.infer` computes the style (indextts/infer_v2.py): `torchaudio.compliance.kaldi.fbank(
audio_16k, num_mel_bins=80, dither=0, sample_frequency=16000)`, minus its mean over frames, into
`CAMPPlus(feat_dim=80, embedding_size=192)` (state loaded strictly, `eval()`) as `feat.unsqueeze(0)`;
then `find_most_similar_cosine(style, part)` for each part of a matrix split as `spk_matrix` is split.
Writes per clip the fbank (and the first clip's model input), per model and clip the style, and the picks.
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
from common import recorded_hashes, stand_in_missing  # noqa: E402
from indextts.s2mel.modules.campplus.DTDNN import CAMPPlus  # noqa: E402


def find_most_similar_cosine():
    """Upstream's function from indextts/infer_v2.py (its module's unused imports stood in where missing)."""
    stand_in_missing()
    from indextts.infer_v2 import find_most_similar_cosine as pick

    return pick


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    setup = json.loads((folder / "setup.json").read_text())
    result = recorded_hashes(folder)
    feats = {}
    for clip in setup["clips"]:
        audio_16k = torch.from_numpy(np.load(folder / f"clip_{clip}.npy"))
        feat = torchaudio.compliance.kaldi.fbank(audio_16k, num_mel_bins=80, dither=0, sample_frequency=16000)
        result[f"{clip}.fbank"] = feat.numpy().copy()
        feat = feat - feat.mean(dim=0, keepdim=True)
        if clip == setup["clips"][0]:  # the model's input once (the golden stays small)
            result[f"{clip}.feat"] = feat.numpy().copy()
        feats[clip] = feat
    styles = {}
    for name, kwargs in setup["models"].items():
        model = CAMPPlus(**kwargs)
        model.load_state_dict(torch.load(folder / f"campplus_{name}.bin", map_location="cpu"), strict=True)
        model.eval()
        for clip, feat in feats.items():
            with torch.no_grad():
                style = model(feat.unsqueeze(0))
            result[f"{name}.{clip}.style"] = style.numpy()
            styles[(name, clip)] = style
    pick = find_most_similar_cosine()
    matrix = torch.from_numpy(np.load(folder / "matrix.npy"))
    parts = list(torch.split(matrix, setup["splits"]))
    parts[setup["half_part"]] = parts[setup["half_part"]].half()
    queries = torch.from_numpy(np.load(folder / "queries.npy"))
    result["picks"] = np.array([[int(pick(q, part)) for part in parts] for q in queries])
    result["style_picks"] = np.array([[int(pick(styles[("release", clip)], part)) for part in parts] for clip in setup["clips"]])
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
