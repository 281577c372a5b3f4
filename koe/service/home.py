"""KOE_HOME opened: the database, the model store, the voice library and saved outputs."""

from __future__ import annotations

import time
from pathlib import Path

from koe.service.config.settings import Settings, load_settings
from koe.service.errors import StorageError
from koe.service.fsio import atomic_write_bytes, sweep_leftovers
from koe.service.storage import Database
from koe.service.store.models import ModelStore
from koe.service.synthesis.encode import AudioFormat
from koe.service.voices.library import VoiceLibrary


class KoeHome:
    """The data folder and what lives in it. Cheap to open; safe to share between threads."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.root = settings.home
        try:
            self.root.mkdir(parents=True, exist_ok=True)
            settings.outputs_dir.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create KOE_HOME at {self.root}: {e.strerror}", hint="set KOE_HOME to a writable folder") from e
        _sweep_outputs(settings.outputs_dir)
        self.db = Database(settings.db_path)
        self.models = ModelStore(settings.models_dir, self.db, settings=settings)
        server = settings.server
        self.voices = VoiceLibrary(
            settings.voices_dir,
            self.db,
            max_reference_seconds=server.max_reference_seconds,
            max_transcript_chars=server.max_transcript_chars,
            max_description_chars=server.max_description_chars,
        )

    @classmethod
    def open(cls, home: str | Path | None = None, flags: dict | None = None) -> KoeHome:
        """Load the settings (see `load_settings`) and open their KOE_HOME."""
        return cls(load_settings(home, flags))

    def save_output(self, output_id: int, data: bytes, fmt: AudioFormat) -> Path:
        """Write an output's bytes atomically as `outputs/<date>/<id>.<ext>` and record the path."""
        day = time.strftime("%Y-%m-%d")
        path = self.settings.outputs_dir / day / f"{output_id:06d}{fmt.extension}"
        try:
            atomic_write_bytes(path, data)
        except OSError as e:
            raise StorageError(f"cannot save the output to {path}: {e.strerror}") from e
        self.db.set_output_path(output_id, str(path))
        return path

    def close(self) -> None:
        self.db.close()


def _sweep_outputs(outputs: Path) -> None:
    """Sweep crash leftovers in `outputs/` and its day folders (`save_output` writes its temp files there)."""
    sweep_leftovers(outputs)
    try:
        days = [p for p in outputs.iterdir() if p.is_dir() and not p.name.startswith(".")]
    except OSError:
        return
    for day in days:
        sweep_leftovers(day)
