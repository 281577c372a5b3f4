"""The `semantic_codec` golden, upstream's side: MaskGCT's semantic codec as IndexTTS 2 runs it.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_semantic_codec.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_semantic_codec.py `write_inputs` wrote. Each case's
codec is built by upstream's `build_semantic_codec` from its config section and loaded as
`IndexTTS2.__init__` loads it (`safetensors.torch.load_model`, strict), in eval. Per input: the codes
and quantized frames of `quantize`, `quantizer.vq2emb` of the codes stage-major (and of the first
stage alone), and for a batch of one `vq2emb(codes.unsqueeze(1))` as infer's GPT path calls it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import safetensors.torch  # noqa: E402
import torch  # noqa: E402
from common import recorded_hashes  # noqa: E402
from indextts.codec.maskgct_codec import build_semantic_codec  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    cases = json.loads((folder / "cases.json").read_text())
    result = recorded_hashes(folder)
    for case, spec in cases.items():
        codec = build_semantic_codec(OmegaConf.create(spec["config"]))
        safetensors.torch.load_model(codec, str(folder / f"{case}.safetensors"))
        codec.eval()
        stages = spec["config"]["num_quantizers"]
        for name in spec["inputs"]:
            frames = torch.from_numpy(np.load(folder / f"{case}.{name}.npy"))
            with torch.no_grad():
                codes, quantized = codec.quantize(frames)
                stage_major = codes.unsqueeze(0) if stages == 1 else codes
                result[f"{case}.{name}.codes"] = codes.numpy()
                result[f"{case}.{name}.quantized"] = quantized.numpy()
                result[f"{case}.{name}.vq2emb"] = codec.quantizer.vq2emb(stage_major).numpy()
                result[f"{case}.{name}.vq2emb_first"] = codec.quantizer.vq2emb(stage_major, n_quantizers=1).numpy()
                if frames.shape[0] == 1 and stages == 1:
                    result[f"{case}.{name}.vq2emb_gpt"] = codec.quantizer.vq2emb(codes.unsqueeze(1)).numpy()
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
