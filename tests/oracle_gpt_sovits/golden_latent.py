"""The `latent` golden, upstream's side: `SynthesizerTrn.extract_latent` of seeded HuBERT features,
on koe's tiny SoVITS v2 file loaded by `TTS.init_vits_weights` (sovits_oracle.py).

    <oracle python> tests/oracle_gpt_sovits/golden_latent.py <folder> <out.npz>

Each features array (1, frames, 768) goes in as `TTS._set_prompt_semantic` hands it over: the
transpose of HuBERT's `last_hidden_state`, a (1, 768, frames) view. Recorded: `state_sha256`,
`<name>.codes` ((1, 1, frames // 2) int64), and `<name>.prompt` (`codes[0, 0]`, the AR model's
prompt).
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import torch
from sovits_oracle import load


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    model, _, _ = load(folder / "s2G.pth")
    arrays = dict(np.load(folder / "inputs.npz"))
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    for key, features in arrays.items():
        name = key.removeprefix("features.")
        with torch.no_grad():
            codes = model.extract_latent(torch.from_numpy(features).transpose(1, 2))
        result[f"{name}.codes"] = codes.numpy()
        result[f"{name}.prompt"] = codes[0, 0].numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
