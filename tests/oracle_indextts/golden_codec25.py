"""The `codec25` golden, upstream's side: IndexTTS 2.5's `EnhancedCodec` as `infer_v2_5` runs it.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_codec25.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_codec25.py `write_inputs` wrote, a folder per
case. Each codec is built as `IndexTTS2.__init__` (infer_v2_5) builds it,
`EnhancedCodec(**cfg.semantic_codec, cfg=cfg.semantic_codec)` from the case's config.yaml, and
loaded by its `load_checkpoint(<case>/codec.pth)`; a key that load would keep at its random
initialisation, or one it would ignore, fails the script. Like infer, it never calls `eval()`.
Per batch of frames: `quantize`'s codes and frames (after `torch.manual_seed(draw_seed)`, and the
generator's next three `torch.rand` values, which show quantize's own draws), and `decode` of those
codes; `decode` of the GPT-like codes and of the extra stage-major codes. Where `decode` raises,
`<case>.decode_fails` records it.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
import torch  # noqa: E402
from common import recorded_hashes  # noqa: E402
from indextts.codec.models import EnhancedCodec  # noqa: E402
from omegaconf import OmegaConf  # noqa: E402


class _Warnings(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def load(case_folder: Path) -> EnhancedCodec:
    cfg = OmegaConf.load(case_folder / "config.yaml")
    codec = EnhancedCodec(**cfg.semantic_codec, cfg=cfg.semantic_codec)
    handler = _Warnings()
    logger = logging.getLogger("indextts.codec.models")
    logger.addHandler(handler)
    try:
        codec.load_checkpoint(str(case_folder / "codec.pth"))
    finally:
        logger.removeHandler(handler)
    if handler.messages:
        raise SystemExit(f"{case_folder}: upstream's load_checkpoint kept keys at random: {handler.messages}")
    saved = set(torch.load(case_folder / "codec.pth", map_location="cpu")["model"])
    if saved != set(codec.state_dict()):
        raise SystemExit(f"{case_folder}: keys upstream ignores: {sorted(saved - set(codec.state_dict()))}")
    return codec


def main(folder: Path, out: Path) -> None:
    torch.set_num_threads(1)
    cases = json.loads((folder / "cases.json").read_text())
    draw_seed = int((folder / "draw_seed.txt").read_text())
    result = recorded_hashes(folder)
    for case, spec in cases.items():
        codec = load(folder / case)
        assert codec.training  # as infer_v2_5 leaves it
        decodes = True
        with torch.no_grad():
            for name in spec["batches"]:
                frames = torch.from_numpy(np.load(folder / case / f"{name}.npy"))
                torch.manual_seed(draw_seed)
                codes, quantized = codec.quantize(frames)
                result[f"{case}.{name}.after"] = torch.rand(3).numpy()
                result[f"{case}.{name}.codes"] = codes.numpy()
                result[f"{case}.{name}.quantized"] = quantized.numpy()
                try:
                    result[f"{case}.{name}.decoded"] = codec.decode(codes).numpy()
                except UnboundLocalError:  # no downsampling: decode's result is never set
                    decodes = False
            for name in spec["codes"]:
                codes = torch.from_numpy(np.load(folder / case / f"{name}.npy"))
                if decodes:
                    result[f"{case}.{name}.decoded"] = codec.decode(codes).numpy()
        if not decodes:
            result[f"{case}.decode_fails"] = np.array(True)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
