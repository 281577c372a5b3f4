"""What every family's fine-tuning run shares (`koe train finetune` / `lora`): its settings checked
with every problem named at once, the key of its data, and the checks before a run goes on from
its last checkpoint (the same settings, the same data), each a `TrainingError` the shells print
as one message."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from koe.engines.base import TrainingError
from koe.engines.dataset import Clip

__all__ = ["Finetuned", "check_same_run", "clips_key", "refuse_settings"]


@dataclass(frozen=True)
class Finetuned:
    """What a finished (or stopped) run returns: the exported model folder, the updates done."""

    folder: Path
    updates: int


def refuse_settings(rules: Iterable[tuple[str, bool, str]]) -> None:
    """`rules`: (setting, whether it is valid, what it must be); a TrainingError naming every
    invalid one ("lr must be positive; ...")."""
    problems = [f"{name} must be {rule}" for name, ok, rule in rules if not ok]
    if problems:
        raise TrainingError("; ".join(problems), param="settings")


def clips_key(clips: list[Clip]) -> str:
    """What a run's clips are, for a resumed run to check: each clip's path, size, time and text."""
    digest = hashlib.sha256()
    for clip in clips:
        st = clip.audio.stat() if clip.audio.exists() else None
        digest.update(json.dumps([str(clip.audio), st and st.st_size, st and st.st_mtime_ns, clip.text]).encode())
    return digest.hexdigest()


def check_same_run(out: Path, saved: dict[str, Any], settings: Any, key: str, free: tuple[str, ...] = ("save_every",)) -> None:
    """A run in `out` goes on only with the settings it was made with (but those in `free`, which
    do not change its results) and on the same data (`key`); `saved`: what its checkpoint keeps
    ("settings": the settings as a dict, "data": the data's key)."""
    kept = {k: v for k, v in asdict(settings).items() if k not in free}
    changed = sorted(name for name, value in kept.items() if saved.get("settings", {}).get(name) != value)
    if changed:
        raise TrainingError(
            f"{out} holds a run made with other settings ({', '.join(changed)})",
            hint="run it again with its own settings to go on, or give another output folder",
            param="settings",
        )
    if saved.get("data") != key:
        raise TrainingError(f"{out} holds a run made on other data", hint="give another output folder", param="data")
