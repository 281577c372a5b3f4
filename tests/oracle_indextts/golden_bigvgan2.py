"""The `bigvgan2` golden, upstream's side: IndexTTS 2's vocoder (NVIDIA's BigVGAN v2, no speaker conditioning).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_bigvgan2.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_bigvgan2.py `write_inputs` wrote: one released-style
folder per case. Each is loaded as `IndexTTS2.__init__` loads the vocoder (indextts/infer_v2.py):
`bigvgan.BigVGAN.from_pretrained(folder, use_cuda_kernel=False)` (config.json +
bigvgan_generator.pt; a strict load, retried after `remove_weight_norm()` for a folded file),
`remove_weight_norm()`, `eval()`; then called as `infer` calls it, `bigvgan(mel.float())`, and
scaled with `torch.clamp(32767 * wav, -32767, 32767)`. Writes per case the waveform, its PCM-scale
samples, whether the strict first load failed (the folded file's path), and the anti-aliasing
filters a freshly built generator holds.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import recorded_hashes  # noqa: E402
from indextts.s2mel.modules.bigvgan import bigvgan  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    result = recorded_hashes(folder)
    for case in json.loads((folder / "cases.json").read_text()):
        sub = folder / case
        said = io.StringIO()
        with contextlib.redirect_stdout(said):
            model = bigvgan.BigVGAN.from_pretrained(str(sub), use_cuda_kernel=False)
            fresh = bigvgan.BigVGAN(bigvgan.load_hparams_from_json(sub / "config.json")).state_dict()
            model.remove_weight_norm()
        model.eval()
        result[f"{case}.retried_folded"] = np.array("does not contain weight norm" in said.getvalue())
        result[f"{case}.upsample_filter"] = fresh["activation_post.upsample.filter"].numpy().copy()
        result[f"{case}.downsample_filter"] = fresh["activation_post.downsample.lowpass.filter"].numpy().copy()
        mel = torch.from_numpy(np.load(sub / "mel.npy"))
        with torch.no_grad():
            wav = model(mel.float())
            pcm = torch.clamp(32767 * wav.squeeze(1), -32767.0, 32767.0)
        result[f"{case}.wav"] = wav.numpy()
        result[f"{case}.pcm"] = pcm.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
