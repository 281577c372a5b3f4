"""The `sv` golden, upstream's side: `SV.compute_embedding3` (upstream's own Kaldi filterbanks and
`ERes2NetV2.forward3`) on koe's random checkpoint, loaded as `TTS.init_sv_model` loads it.

    <oracle python> tests/oracle_gpt_sovits/golden_sv.py <folder> <out.npz>

Recorded: `state_sha256`; per clip `<clip>.fbank_sha256` and `.fbank_shape` (each row's
filterbanks as `compute_embedding3` stacks them), and the embedding: `<clip>.emb` whole for the
clips in `full`, else `<clip>.emb_sha256`, `.emb_head` and `.emb_tail` (256 numbers of the flat
embedding).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from oracle_arrays import record, sha
from sv_oracle import place_sv, sv

FULL = ("short", "pair")


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    place_sv(folder)
    model = sv.SV(torch.device("cpu"), False)
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    with np.load(folder / "clips.npz") as z:
        clips = {k.removeprefix("clip."): torch.from_numpy(z[k]) for k in z.files}
    for name, wav in clips.items():
        feats = torch.stack([sv.Kaldi.fbank(w.unsqueeze(0), num_mel_bins=80, sample_frequency=16000, dither=0) for w in wav])
        result[f"{name}.fbank_sha256"] = sha(feats)
        result[f"{name}.fbank_shape"] = np.array(feats.shape)
        emb = model.compute_embedding3(wav)
        record(result, f"{name}.emb", emb, name in FULL, shape=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
