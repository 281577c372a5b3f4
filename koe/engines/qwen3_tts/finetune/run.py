"""A whole speaker fine-tuning run: check the base model, prepare the data, train, export.

The run's folder is the exported model's: `OUT/` becomes a CustomVoice model folder, and
`OUT/training/` keeps what the stages leave (the prepared JSONL, the log, the checkpoint), so a
stopped run starts again where it was. Every check that can fail runs before the first step.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import torch

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.finetune.batch import SpeakerExamples
from koe.engines.qwen3_tts.finetune.export import export_speaker
from koe.engines.qwen3_tts.finetune.trainer import SpeakerTrainer, StepReport, TrainingError, TrainSettings

STAGES = ("prepare", "train", "export")


def check_base(cfg: Qwen3TTSConfig, folder: Path) -> None:
    """Refuse, with the reason, a model upstream's recipe cannot fine-tune."""
    if cfg.model_type != "base":
        raise TrainingError(f"{folder} is a {cfg.model_type} model; speaker fine-tuning starts from a Base model "
                            "(Qwen3-TTS-12Hz-1.7B-Base): it needs the Base model's speaker encoder")
    talker = cfg.talker
    if talker.text_hidden_size != talker.decoder.hidden_size:
        raise TrainingError(
            f"{folder}: upstream's fine-tuning recipe adds the text embeddings (width {talker.text_hidden_size}) to the "
            f"talker's codec embeddings (width {talker.decoder.hidden_size}) without the text projection, so it only works "
            "where the two widths match: the 1.7B Base model (2048 and 2048), not the 0.6B (2048 and 1024)")


def check_speaker(name: str) -> str:
    """The preset name as it will be written (lower case; see export.py)."""
    cleaned = name.strip()
    if not cleaned or len(cleaned) > 64 or any(not (c.isalnum() or c in "_-") for c in cleaned):
        raise TrainingError(f"speaker name {name!r}: use 1-64 letters, digits, '_' or '-'")
    return cleaned.lower()


def fingerprint(base: Path, rows: list[dict]) -> str:
    """What a checkpoint belongs to: the base model (config, weight sizes) and the prepared data."""
    h = hashlib.sha256((base / "config.json").read_bytes())
    for p in sorted(base.glob("*.safetensors")):
        h.update(f"{p.name}:{p.stat().st_size}".encode())
    for row in rows:
        h.update(json.dumps([row["text"], str(row["ref_audio"]), row["audio_codes"]]).encode())
    return h.hexdigest()[:16]


@dataclass(frozen=True)
class TrainResult:
    out: Path
    speaker: str
    finished: bool  # False: stopped early (a checkpoint is kept; run again to go on)
    losses: list[float]
    optimizer_steps: int


def train_on_rows(base: Path, rows: list[dict], speaker: str, out: Path, settings: TrainSettings, *,
                  load_reference: Callable[[Path], object], device: str | torch.device = "cpu",
                  export_dtype: torch.dtype | None = None, on_step: Callable[[StepReport], None] | None = None,
                  should_stop: Callable[[], bool] | None = None) -> TrainResult:
    """Train on prepared rows (`text`, `ref_audio`, `audio_codes`) and export to `out`."""
    from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
    from koe.text.qwen_tokenizer import QwenTokenizer

    base, out = Path(base), Path(out)
    cfg = Qwen3TTSConfig.from_folder(base)
    check_base(cfg, base)
    name = check_speaker(speaker)
    settings.check()
    if not rows:
        raise TrainingError("no training examples")
    dtype = torch.bfloat16 if settings.precision == "bfloat16" else torch.float32
    net = Qwen3TTSNetwork.from_folder(base, cfg, device=device, dtype=dtype)
    for p in net.parameters():
        p.requires_grad_(True)
    examples = SpeakerExamples(rows, QwenTokenizer.from_folder(base), load_reference)
    trainer = SpeakerTrainer(net, examples, settings, out / "training", fingerprint(base, rows), on_step)
    finished = trainer.run(should_stop)
    if finished:
        assert trainer.target is not None
        export_speaker(base, out, net.talker.state_dict(), name, trainer.target, export_dtype)
    return TrainResult(out, name, finished, list(trainer.state.losses), trainer.state.optimizer_steps)
