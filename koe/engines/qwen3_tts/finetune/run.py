"""A whole speaker fine-tuning run: check the base model, prepare the data, train, export.

The run's folder is the exported model's: `OUT/` becomes a CustomVoice model folder, and
`OUT/training/` keeps what the stages leave (the prepared JSONL, the log, the checkpoint), so a
stopped run starts again where it was. Every check that can fail runs before the first step.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import torch

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.finetune.batch import SpeakerExamples
from koe.engines.qwen3_tts.finetune.export import export_speaker
from koe.engines.qwen3_tts.finetune.trainer import (
    SpeakerTrainer,
    StepReport,
    TrainingError,
    TrainSettings,
    latest_checkpoint,
    read_checkpoint_file,
    read_checkpoint_state,
)
from koe.engines.qwen3_tts.voice import model_stamp
from koe.runtime.files import atomic_file, read_json_object

STAGES = ("prepare", "train", "export")
RUN_FILE = "run.json"  # in OUT/training: the base model and speaker a run is for


@dataclass
class Reporter:
    """What a shell shows while a run goes: notes, the prepare stage's progress, every batch."""

    note: Callable[[str], None] = lambda message: None
    prepare: Callable[[int, int], None] = lambda done, total: None
    step: Callable[[StepReport], None] = lambda report: None


def check_base(cfg: Qwen3TTSConfig, folder: Path) -> None:
    """Refuse, with the reason, a model upstream's recipe cannot fine-tune."""
    if cfg.model_type != "base":
        raise TrainingError(
            f"{folder} is a {cfg.model_type} model; speaker fine-tuning starts from a Base model "
            "(Qwen3-TTS-12Hz-1.7B-Base): it needs the Base model's speaker encoder"
        )
    talker = cfg.talker
    if talker.text_hidden_size != talker.decoder.hidden_size:
        raise TrainingError(
            f"{folder}: upstream's fine-tuning recipe adds the text embeddings (width {talker.text_hidden_size}) to the "
            f"talker's codec embeddings (width {talker.decoder.hidden_size}) without the text projection, so it only works "
            "where the two widths match: the 1.7B Base model (2048 and 2048), not the 0.6B (2048 and 1024)"
        )


def check_speaker(name: str) -> str:
    """The preset name as it will be written (lower case; see export.py)."""
    cleaned = name.strip()
    if not cleaned or len(cleaned) > 64 or any(not (c.isalnum() or c in "_-") for c in cleaned):
        raise TrainingError(f"speaker name {name!r}: use 1-64 letters, digits, '_' or '-'")
    return cleaned.lower()


def fingerprint(cfg: Qwen3TTSConfig, base: Path, rows: list[dict]) -> str:
    """What a checkpoint belongs to: the base model (its voice-prompt stamp: config, weight sizes)
    and the prepared data."""
    h = hashlib.sha256(model_stamp(cfg, base).fingerprint.encode())
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


def load_reference(path: Path):
    """A reference as the recipe reads it (librosa at its own rate), at 24 kHz (see data.py)."""
    from koe.audio.io import load_audio
    from koe.engines.qwen3_tts.voice import to_codec_rate

    return to_codec_rate(*load_audio(path))


def train_speaker(
    base: Path,
    data: Path,
    speaker: str,
    out: Path,
    settings: TrainSettings,
    *,
    ref: Path | None = None,
    device: str | torch.device = "cpu",
    export_dtype: torch.dtype | None = None,
    stop_after: str | None = None,
    reporter: Reporter | None = None,
    should_stop: Callable[[], bool] | None = None,
) -> TrainResult | None:
    """The whole run: check, prepare (`OUT/training/prepared.jsonl`), train, export to `OUT`.

    Each stage reuses what an earlier run left (the same prepared data, the checkpoint), so running
    the same command again after a stop goes on where it was. `stop_after`: "prepare" or "train"
    (then None is returned, or the result without the export). Raises `DatasetError` (data.py)
    or `TrainingError` before any training when something is wrong.
    """
    from koe.engines.qwen3_tts.finetune.data import load_dataset, prepare

    r = reporter or Reporter()
    base, data, out = Path(base).absolute(), Path(data).absolute(), Path(out).absolute()
    if stop_after not in (None, *STAGES[:-1]):
        raise TrainingError(f"stop_after must be one of {', '.join(STAGES[:-1])} (got {stop_after!r})")
    cfg = Qwen3TTSConfig.from_folder(base)
    check_base(cfg, base)
    name = check_speaker(speaker)
    if name != speaker.strip():
        r.note(f"the speaker is saved as {name!r} (upstream looks presets up in lower case)")
    settings.check()
    work = claim_output(out, base, name)
    checked = load_dataset(data, ref=ref)
    for message in checked.notes:
        r.note(message)
    prepared = prepare(checked, base / "speech_tokenizer", work / "prepared.jsonl", device=str(device), progress=r.prepare)
    if prepared.reused:
        r.note(f"using the data prepared before ({prepared.jsonl})")
    if stop_after == "prepare":
        return None
    rows = [json.loads(line) for line in prepared.jsonl.read_text(encoding="utf-8").splitlines() if line.strip()]
    return train_on_rows(
        base,
        rows,
        name,
        out,
        settings,
        load_reference=load_reference,
        device=device,
        export_dtype=export_dtype,
        on_step=r.step,
        should_stop=should_stop,
        export=stop_after is None,
    )


def claim_output(out: Path, base: Path, speaker: str) -> Path:
    """`OUT/training`, made for this run; refuses an OUT that is the base model, holds another
    model, or holds a run for another base model or speaker."""
    work = out / "training"
    if out == base or base in out.parents:
        raise TrainingError(f"the output folder {out} is (inside) the base model's folder; choose another")
    run_file = work / RUN_FILE
    if run_file.exists():
        run = read_run(out)
        if run["base"] != str(base) or run["speaker"] != speaker:
            raise TrainingError(f"{out} holds a run for speaker {run['speaker']!r} from {run['base']}; use another output folder, or remove it to start again")
        return work
    if out.exists() and any(out.iterdir()):
        raise TrainingError(f"{out} exists and is not a koe training run; give a new or empty folder")
    work.mkdir(parents=True, exist_ok=True)
    with atomic_file(run_file, "w", encoding="utf-8") as f:
        f.write(json.dumps({"base": str(base), "speaker": speaker}, indent=1))
    return work


def read_run(out: Path) -> dict[str, str]:
    """`OUT/training/run.json`: the base model's folder and the speaker of the run in `out`, or a
    TrainingError saying it is damaged and what to do."""
    run_file, hint = Path(out) / "training" / RUN_FILE, f"remove {out} (or use another output folder) to start the run again"
    try:
        run = read_json_object(run_file)
    except ValueError as e:
        raise TrainingError(f"the training run's file is damaged: {e}", hint=hint) from e
    if not (isinstance(run.get("base"), str) and isinstance(run.get("speaker"), str)):
        raise TrainingError(f"the training run's file is damaged: {run_file}: it does not name the base model and speaker", hint=hint)
    return run


def prepare_dataset(base: Path, data: Path, out: Path, *, ref: Path | None = None, device: str = "cpu") -> Path:
    """The data stage alone (`koe.train.prepare`): check `data` and write upstream's prepared JSONL of
    it to `out` with the codec of the model in `base`; returns `out`. Raises `DatasetError`."""
    from koe.engines.qwen3_tts.finetune.data import load_dataset, prepare

    checked = load_dataset(Path(data), ref=Path(ref) if ref is not None else None)
    return prepare(checked, Path(base) / "speech_tokenizer", Path(out), device=device).jsonl


def export_checkpoint(out: Path, export_dtype: torch.dtype | None = None) -> Path:
    """Export the run's latest checkpoint (`OUT/training/checkpoint`) to `OUT` without training on:
    to listen to a run stopped early."""
    from safetensors.torch import load_file

    out = Path(out).absolute()
    checkpoint = latest_checkpoint(out / "training") if (out / "training" / RUN_FILE).exists() else None
    if checkpoint is None:
        raise TrainingError(f"{out} has no training checkpoint to export (train first: it is written after each epoch)")
    run = read_run(out)
    extra = read_checkpoint_file(checkpoint, "trainer.safetensors", lambda p: load_file(str(p)))
    if "target_speaker_embedding" not in extra:
        raise TrainingError(f"the checkpoint in {checkpoint} has no speaker embedding yet")
    talker = read_checkpoint_file(checkpoint, "talker.safetensors", lambda p: load_file(str(p)))
    settings = read_checkpoint_state(checkpoint)["settings"]
    base = Path(run["base"])
    if settings.get("lora_rank"):  # adapters only: merge them into the base model's weights
        from koe.engines.qwen3_tts.finetune.lora import add_lora, merged_state
        from koe.engines.qwen3_tts.model import Qwen3TTSNetwork

        net = Qwen3TTSNetwork.from_folder(base, Qwen3TTSConfig.from_folder(base), dtype=next(iter(talker.values())).dtype)
        s = TrainSettings(**settings)
        add_lora(net, s.lora_rank, s.alpha, s.seed)
        net.talker.load_state_dict(talker, strict=False)
        talker = merged_state(net.talker)
    return export_speaker(base, out, talker, run["speaker"], extra["target_speaker_embedding"], export_dtype)


def train_on_rows(
    base: Path,
    rows: list[dict],
    speaker: str,
    out: Path,
    settings: TrainSettings,
    *,
    load_reference: Callable[[Path], object],
    device: str | torch.device = "cpu",
    export_dtype: torch.dtype | None = None,
    on_step: Callable[[StepReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    export: bool = True,
) -> TrainResult:
    """Train on prepared rows (`text`, `ref_audio`, `audio_codes`) and export to `out` (with `export`)."""
    from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
    from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer

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
    trainer = SpeakerTrainer(net, examples, settings, out / "training", fingerprint(cfg, base, rows), on_step)
    finished = trainer.run(should_stop)
    if finished and export:
        assert trainer.target is not None
        export_speaker(base, out, trainer.export_state(), name, trainer.target, export_dtype)
    return TrainResult(out, name, finished, list(trainer.state.losses), trainer.state.optimizer_steps)
