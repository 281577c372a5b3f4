"""The `infer_bf16` golden, upstream's side: whole requests through upstream's server engine in
bfloat16, as `tools/server/model_manager.py`'s `ModelManager(half=False)` sets it up on a CPU.

    <oracle python> tests/oracle_fish_speech/golden_infer_bf16.py <folder> <out.npz>

What that server does in bfloat16: the transformer through `launch_thread_safe_queue(..., precision=
torch.bfloat16)` (`init_model` in bfloat16, its caches in bfloat16), run here in turn (golden_infer's
`InTurn`); the codec through `fish_speech.models.dac.inference.load_model`, which assigns the
checkpoint's tensors as they are stored (float32 in this fixture), so it is golden_codec's float32
codec; the reference clips encoded by that float32 codec on float32 samples (no autocast there);
each batch decoded in `get_audio_segment` under `torch.autocast("cpu", torch.bfloat16)`
(`autocast_exclude_mps`), the audio returned as float32. Recorded as golden_infer records.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import golden_infer  # noqa: E402
import torch  # noqa: E402
from fish_speech.inference_engine import TTSInferenceEngine  # noqa: E402
from fish_speech.models.text2semantic.inference import init_model  # noqa: E402


class InTurnBF16(golden_infer.InTurn):
    """`InTurn` with the transformer and its caches in bfloat16 (the server's half=False)."""

    def __init__(self, folder: Path) -> None:
        self.model, self.decode_one_token = init_model(str(folder), "cpu", torch.bfloat16, compile=False)
        self.model.setup_caches(max_batch_size=1, max_seq_len=self.model.config.max_seq_len, dtype=torch.bfloat16)


def server_engine_bf16(**kwargs) -> TTSInferenceEngine:
    """The engine as ModelManager(half=False) makes it: precision bfloat16 (its decoder autocast)."""
    return TTSInferenceEngine(**{**kwargs, "precision": torch.bfloat16})


def main(folder: Path, out: Path) -> None:
    """golden_infer's run with the transformer and the engine's precision in bfloat16."""
    golden_infer.InTurn = InTurnBF16
    golden_infer.TTSInferenceEngine = server_engine_bf16
    golden_infer.main(folder, out)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
