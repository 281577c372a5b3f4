"""A fine-tuning run on an OmniVoice model folder: the clips' audio tokens in upstream's shards, the
model trained on them (`trainer.run`), then exported as a model folder that koe and upstream load.

`out` becomes the model folder: the base's files with the trained `model.safetensors` and
`config.json` (the base's, with the text tokenizer's pad, bos and eos ids as upstream's trainer
sets them). `out/training/` keeps the run: `data/` (the shards, `data.lst`, `data_config.json`:
upstream's `omnivoice.cli.train` trains on them too) and `checkpoint-<update>/` in upstream's
format. Running again into the same `out` goes on from its latest checkpoint (the same settings
and data), or, for a finished run, exports it again.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
from collections.abc import Callable
from pathlib import Path

import numpy as np
import torch
from safetensors.torch import load_file
from tokenizers import Tokenizer

from koe.engines.base import TrainingError
from koe.engines.finetuning import Finetuned, check_same_run, refuse_settings
from koe.engines.omnivoice import spec
from koe.engines.omnivoice.audio_tokenizer import load_audio_tokenizer
from koe.engines.omnivoice.config import read_config
from koe.engines.omnivoice.finetune.data import Clip, load_clips, prepare_samples
from koe.engines.omnivoice.finetune.shards import Sample, write_dataset
from koe.engines.omnivoice.finetune.trainer import SCHEDULES, STATE_NAME, StepReport, TrainSettings, run
from koe.engines.omnivoice.model import OmniVoiceLM
from koe.engines.omnivoice.text import TextTokenizer
from koe.engines.spec import RANDOM_WEIGHTS_FILE
from koe.runtime.weights import build_from_weights

__all__ = ["Finetuned", "data_key", "export", "finetune", "latest_checkpoint", "train"]

_CHECKPOINT = re.compile(r"checkpoint-(\d+)")


def finetune(
    model: str | os.PathLike,
    data: str | os.PathLike | list[Clip] | list[Sample],
    out: str | os.PathLike,
    settings: TrainSettings | None = None,
    *,
    on_step: Callable[[StepReport], None] | None = None,
    should_stop: Callable[[], bool] | None = None,
    device: str | torch.device = "cpu",
    on_note: Callable[[str], None] = lambda message: None,
) -> Finetuned:
    """Fine-tune the OmniVoice model in folder `model` on `data` (a dataset's path, see `data.py`,
    clips, or samples already tokenized); `out` becomes the new model's folder. Every problem of
    the data or the settings is a `TrainingError` (`DatasetError` for the data) before anything
    is written."""
    model, out = Path(model), Path(out)
    settings = settings or TrainSettings()
    _check(settings)
    missing = [name for name in spec.REQUIRED_FILES if not (model / name).is_file()]
    if missing:
        raise TrainingError(f"{model}: not an OmniVoice model folder (missing {', '.join(missing)})", param="model")
    if out.resolve() == model.resolve():
        raise TrainingError(f"{out}: the output folder is the model's own", hint="give a new folder for the fine-tuned model", param="out")
    if out.exists() and (not out.is_dir() or (any(p.name != "training" for p in out.iterdir()) and latest_checkpoint(out / "training") is None)):
        raise TrainingError(f"{out} holds something other than a fine-tuning run; its files would be replaced", hint="give a new or empty folder", param="out")
    cfg = read_config(model)
    if isinstance(data, list) and data and isinstance(data[0], Sample):
        samples = list(data)
    else:
        clips = data if isinstance(data, list) else load_clips(data)
        _enough(len(clips), settings.workers)
        on_note(f"encoding {len(clips)} clips with the audio tokenizer")
        samples = prepare_samples(clips, load_audio_tokenizer(model), settings.max_sample_tokens, "" if isinstance(data, list) else data)
    _enough(len(samples), settings.workers)
    key = data_key(samples)
    training = out / "training"
    resume = _earlier_run(training, settings, key)
    if resume is not None and resume[1]["koe"]["update"] >= settings.steps:  # finished: the export again
        export(model, out, resume[0])
        return Finetuned(out, resume[1]["koe"]["update"])
    if resume is None:
        pairs = write_dataset(training / "data", samples, settings.workers)
        on_note(f"{len(samples)} clips in {len(pairs)} shards in {training / 'data'} (upstream's layout)")
    size, extra = divmod(len(samples), settings.workers)
    starts = [i * size + min(i, extra) for i in range(settings.workers + 1)]
    shards = [samples[starts[i] : starts[i + 1]] for i in range(settings.workers)]

    net = build_from_weights(lambda: OmniVoiceLM(cfg), [model / "model.safetensors"])
    state = None
    if resume is not None:
        folder, state = resume
        net.load_state_dict(load_file(str(folder / "model.safetensors")))
        state = {
            **state,
            "optimizer": torch.load(folder / "optimizer.bin", weights_only=True),
            "scheduler": torch.load(folder / "scheduler.bin", weights_only=True),
        }
        on_note(f"going on from {folder.name}")
    text = TextTokenizer.from_folder(model)
    ids = special_ids(model, text.tokenizer)
    updates = run(
        net,
        shards,
        training,
        settings,
        tokenize=text.ids,
        pad_id=ids["pad_token_id"],
        write_extra=lambda folder: _write_model_files(model, folder, ids),
        on_step=on_step,
        should_stop=should_stop,
        device=device,
        resume=state,
        data_key=key,
    )
    last = latest_checkpoint(training)
    assert last is not None
    if updates >= settings.steps:
        export(model, out, last)
    return Finetuned(out, updates)


def _enough(clips: int, workers: int) -> None:
    if clips < workers:
        raise TrainingError(
            f"{clips} clips for {workers} data-loader workers: upstream's loader needs a shard per worker",
            hint=f"lower workers to {clips} or less (the draws then follow other seeds), or add clips",
            param="workers",
        )


def special_ids(model: Path, vocabulary: Tokenizer | None = None) -> dict[str, int | None]:
    """The text tokenizer's pad, bos and eos ids, as upstream's trainer puts them in the config
    (pad: the eos when the tokenizer has none); `vocabulary`: the folder's, when already read."""
    config = json.loads((model / "tokenizer_config.json").read_text(encoding="utf-8"))
    vocabulary = vocabulary or Tokenizer.from_file(str(model / "tokenizer.json"))

    def token_id(name: str) -> int | None:
        token = config.get(name)
        token = token.get("content") if isinstance(token, dict) else token
        return None if token is None else vocabulary.token_to_id(token)

    eos = token_id("eos_token")
    pad = token_id("pad_token")
    return {"pad_token_id": eos if pad is None else pad, "bos_token_id": token_id("bos_token"), "eos_token_id": eos}


def _write_model_files(base: Path, folder: Path, ids: dict[str, int | None]) -> None:
    """The config (the base's, with the tokenizer's `ids`) and the text tokenizer's files."""
    config = json.loads((base / "config.json").read_text(encoding="utf-8"))
    config.update(ids)
    (folder / "config.json").write_text(json.dumps(config, indent=2), encoding="utf-8")
    for name in spec.TEXT_FILES:
        shutil.copy2(base / name, folder / name)


def data_key(samples: list[Sample]) -> str:
    """What a run's data is, for a resumed run to check: every sample's key, tokens and label."""
    digest = hashlib.sha256()
    for sample in samples:
        digest.update(json.dumps([sample.key, sample.label, list(sample.tokens.shape)], ensure_ascii=False, sort_keys=True).encode())
        digest.update(np.ascontiguousarray(sample.tokens, dtype=np.int16).tobytes())
    return digest.hexdigest()


def latest_checkpoint(training: Path) -> Path | None:
    """The complete checkpoint folder of the most updates in `training` (one with koe's state)."""
    if not training.is_dir():
        return None
    found = [(int(m.group(1)), p) for p in training.iterdir() if (m := _CHECKPOINT.fullmatch(p.name)) and (p / STATE_NAME).is_file()]
    return max(found)[1] if found else None


def _earlier_run(training: Path, settings: TrainSettings, key: str) -> tuple[Path, dict] | None:
    """(folder, koe's state) of the latest checkpoint of an earlier run into the same folder, to
    go on from; None when there is none. A damaged one, or one made with other settings or data,
    is a TrainingError."""
    folder = latest_checkpoint(training)
    if folder is None:
        return None
    try:
        state = torch.load(folder / STATE_NAME, map_location="cpu", weights_only=True)
        for name in ("model.safetensors", "optimizer.bin", "scheduler.bin"):
            if not (folder / name).is_file():
                raise FileNotFoundError(name)
    except Exception as e:  # a torn or foreign file: torch's unpickler raises several kinds
        raise TrainingError(
            f"{folder}: a damaged checkpoint ({type(e).__name__}: {e})", hint=f"remove {folder.name} to go on from the one before", param="out"
        ) from e
    check_same_run(training.parent, state, settings, key)
    return folder, state


def train(model: Path, data: Path, out: Path, settings: TrainSettings, *, device: str = "cpu", reporter=None, should_stop=None) -> Finetuned:
    """`koe train finetune` on an OmniVoice model (the spec's `trainers`; `koe.service.training`)."""
    note = reporter.note if reporter is not None else (lambda message: None)
    note(f"fine-tuning {model.name} on {data} (upstream omnivoice's OmniTrainer recipe)")
    return finetune(model, data, out, settings, on_step=reporter.step if reporter is not None else None, should_stop=should_stop, device=device, on_note=note)


def export(base: Path, out: Path, checkpoint: Path) -> Path:
    """Write the model folder `out` from a checkpoint folder of the run and the base's audio tokenizer."""
    for name in ("config.json", *spec.TEXT_FILES):
        shutil.copy2(checkpoint / name, out / name)
    if (base / RANDOM_WEIGHTS_FILE).is_file():
        shutil.copy2(base / RANDOM_WEIGHTS_FILE, out / RANDOM_WEIGHTS_FILE)
    shutil.copytree(base / "audio_tokenizer", out / "audio_tokenizer", dirs_exist_ok=True)
    partial = out / ".model.safetensors.partial"
    shutil.copy2(checkpoint / "model.safetensors", partial)
    partial.replace(out / "model.safetensors")
    return out


def _check(s: TrainSettings) -> None:
    refuse_settings(
        (
            ("steps", s.steps >= 1, "at least 1"),
            ("lr", s.lr > 0, "positive"),
            ("weight_decay", s.weight_decay >= 0, "0 or more"),
            ("warmup_updates", s.warmup_updates is None or s.warmup_updates >= 0, "0 or more"),
            ("schedule", s.schedule in SCHEDULES, f"one of {', '.join(SCHEDULES)}"),
            ("batch_tokens", s.batch_tokens > 0, "positive"),
            ("max_clips", s.max_clips >= 1, "at least 1"),
            ("min_sample_tokens", 0 <= s.min_sample_tokens < s.max_sample_tokens, "0 or more and below max_sample_tokens"),
            ("grad_accum", s.grad_accum >= 1, "at least 1"),
            ("max_grad_norm", s.max_grad_norm >= 0, "0 (no clipping) or more"),
            ("save_every", s.save_every >= 1, "at least 1"),
            ("workers", s.workers >= 1, "at least 1 (upstream's loader runs in worker processes)"),
        )
    )
