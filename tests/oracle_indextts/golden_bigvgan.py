"""The `bigvgan` golden, upstream's side: IndexTTS 1.5's vocoder (BigVGAN with its ECAPA speaker encoder).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_bigvgan.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_bigvgan.py `write_inputs` wrote. Each case is
loaded as `IndexTTS.__init__` loads the vocoder (indextts/infer.py): `BigVGAN(cfg.bigvgan)` from the
yaml, `torch.load` of `bigvgan_generator.pth`, `load_state_dict(d["generator"])` (strict),
`remove_weight_norm()`, `eval()`; then called as `infer` calls it, `bigvgan(latent,
cond_mel.transpose(1, 2))`, and scaled with `torch.clamp(32767 * wav, -32767, 32767)`. Writes per
case the waveform, its PCM-scale samples, the speaker embedding alone, and the anti-aliasing
filters a freshly built generator holds.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import recorded_hashes  # noqa: E402
from indextts.BigVGAN.models import BigVGAN  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    result = recorded_hashes(folder)
    for case in json.loads((folder / "cases.json").read_text()):
        sub = folder / case
        cfg = OmegaConf.load(sub / "config.yaml")
        bigvgan = BigVGAN(cfg.bigvgan, use_cuda_kernel=False)
        fresh = bigvgan.state_dict()
        result[f"{case}.upsample_filter"] = fresh["activation_post.upsample.filter"].numpy().copy()
        result[f"{case}.downsample_filter"] = fresh["activation_post.downsample.lowpass.filter"].numpy().copy()
        vocoder_dict = torch.load(sub / "bigvgan_generator.pth", map_location="cpu")
        bigvgan.load_state_dict(vocoder_dict["generator"])
        bigvgan.remove_weight_norm()
        bigvgan.eval()
        latent = torch.from_numpy(np.load(sub / "latent.npy"))
        cond_mel = torch.from_numpy(np.load(sub / "cond_mel.npy"))
        with torch.no_grad():
            speaker = bigvgan.speaker_encoder(cond_mel.transpose(1, 2), None)
            wav, _ = bigvgan(latent, cond_mel.transpose(1, 2))
            pcm = torch.clamp(32767 * wav.squeeze(1), -32767.0, 32767.0)
        result[f"{case}.speaker"] = speaker.numpy()
        result[f"{case}.wav"] = wav.numpy()
        result[f"{case}.pcm"] = pcm.numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
