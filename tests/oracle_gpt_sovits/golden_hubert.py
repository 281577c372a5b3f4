"""The `hubert` golden, upstream's side: `chinese-hubert-base` as upstream's `CNHubert` loads it
(`HubertModel` / `Wav2Vec2FeatureExtractor.from_pretrained(folder, local_files_only=True)`).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_gpt_sovits/golden_hubert.py <folder> <out.npz>
`folder` holds what tests/engines/gpt_sovits/golden_hubert.py `write_inputs` wrote. The script
fails unless the checkpoint's tensors are exactly the ones the model loads.

Recorded: `state_sha256`; per clip, `model.<clip>` (sha256 of `model(x)["last_hidden_state"]
.transpose(1, 2)`, as `TTS._set_prompt_semantic` calls it), `.shape`, `.head` (its first 4 frames),
`draws.<clip>` (5 draws of `torch.rand` after seeding 0 and running the model: transformers draws
once a layer).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from feature_extractor.cnhubert import CNHubert  # noqa: E402
from oracle_arrays import sha  # noqa: E402

CLIPS = ("short", "long")


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    result: dict[str, np.ndarray] = {"state_sha256": np.array((folder / "state_sha256.txt").read_text().split()[0])}
    hubert = CNHubert(str(folder / "hubert")).eval()
    saved = set(torch.load(folder / "hubert" / "pytorch_model.bin", map_location="cpu", weights_only=True))
    held = {
        k.replace("parametrizations.weight.original0", "weight_g").replace("parametrizations.weight.original1", "weight_v") for k in hubert.model.state_dict()
    }
    if saved != held:
        raise SystemExit(f"pytorch_model.bin does not fit upstream's HuBERT: missing {sorted(held - saved)[:8]}, unexpected {sorted(saved - held)[:8]}")
    result["model_dtype"] = np.array(str(next(hubert.model.parameters()).dtype))
    with torch.no_grad():
        for name in CLIPS:
            x = torch.from_numpy(np.load(folder / f"{name}.npy"))
            torch.manual_seed(0)
            feats = hubert.model(x.unsqueeze(0))["last_hidden_state"].transpose(1, 2)
            result[f"draws.{name}"] = torch.rand(5).numpy()
            result[f"model.{name}"] = sha(feats)
            result[f"model.{name}.shape"] = np.array(feats.shape)
            result[f"model.{name}.head"] = feats[0, :, :4].contiguous().numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
