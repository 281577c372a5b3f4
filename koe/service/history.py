"""The history of outputs in koe.db: list, show, replay and delete what was spoken.

The synthesizer records one `outputs` row per utterance (`Synthesizer._record`): the text, the model's
name, the voice label, the format, the duration, the kept file's path (when it was saved under
KOE_HOME/outputs) and the plan as metadata (mode, seed, language, speaker, instruction, library
voice, speed, options, model name and key, and the engine's own fields such as precision). That is
enough to say the same thing again: `replay_request` turns a row back into a `SpeechRequest`.

Torch-free; the CLI's `koe history` is a shell over this, and the server could be.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koe.service.errors import InvalidRequest, NotFound, StorageError
from koe.service.home import KoeHome
from koe.service.storage import OutputRow
from koe.service.synthesis.requests import SpeechRequest

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Entry:
    """One history row, with its kept file when that file is still there."""

    row: OutputRow
    file: Path | None  # the kept output, if it exists under KOE_HOME/outputs

    @property
    def id(self) -> int:
        return self.row.id

    def when(self) -> str:
        """Local time of the request, `YYYY-MM-DD HH:MM:SS`."""
        return time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(self.row.created_at))

    def summary(self) -> dict[str, Any]:
        """What `koe history list --json` prints per row."""
        r = self.row
        return {
            "id": r.id,
            "created_at": r.created_at,
            "when": self.when(),
            "model": r.model,
            "voice": r.voice,
            "format": r.format,
            "seconds": round(r.duration_s, 3),
            "text": r.text,
            "path": str(self.file) if self.file else None,
        }

    def details(self) -> dict[str, Any]:
        """Everything recorded: the summary, the recorded path (kept or not) and the metadata."""
        return {**self.summary(), "recorded_path": self.row.path, "file_exists": self.file is not None, "metadata": self.row.metadata}


@dataclass(frozen=True)
class Deleted:
    """What `delete` removed: the rows and the kept files (files outside KOE_HOME/outputs are left)."""

    rows: list[OutputRow]
    files: list[Path]
    left: list[str]  # recorded paths not removed (outside KOE_HOME/outputs, or could not be removed: why)


class History:
    """The `outputs` table of a KOE_HOME, with the files kept under its outputs folder."""

    def __init__(self, home: KoeHome) -> None:
        self.home = home
        self.db = home.db
        self.outputs = home.settings.outputs_dir

    def list(self, limit: int = 20) -> list[Entry]:
        """The newest `limit` rows first; a damaged row is skipped with a warning (as the voice library skips a damaged voice)."""
        if limit < 1:
            raise InvalidRequest(f"limit must be at least 1, got {limit}", param="limit")
        return [self._entry(r) for r in self.db.list_outputs(limit, on_damaged=lambda e: log.warning("%s; skipped", e))]

    def count(self) -> int:
        return self.db.count_outputs()

    def get(self, output_id: int) -> Entry:
        row = self.db.get_output(output_id)
        if row is None:
            raise NotFound(f"no output {output_id} in the history", hint="`koe history list` shows the ids", param="id")
        return self._entry(row)

    def delete(self, ids: list[int] | None = None) -> Deleted:
        """Remove rows `ids` (every row when None) and their kept files under KOE_HOME/outputs.

        Every id must exist (else `NotFound`, nothing removed). A recorded path outside the outputs
        folder is never touched; a day folder left empty is removed."""
        if ids is not None:
            ids = list(dict.fromkeys(ids))
            missing = [i for i in ids if not self.db.has_output(i)]  # a damaged row can be deleted
            if missing:
                raise NotFound(f"no output {', '.join(map(str, missing))} in the history", hint="`koe history list` shows the ids", param="id")
        rows = self.db.delete_outputs(ids)
        files: list[Path] = []
        left: list[str] = []
        for row in rows:
            if not row.path:
                continue
            path = self._owned(row.path)
            if path is None:
                left.append(f"{row.path} (outside {self.outputs})")
                continue
            try:
                path.unlink()
                files.append(path)
            except FileNotFoundError:
                continue
            except OSError as e:
                left.append(f"{row.path} ({e.strerror})")
                continue
            with contextlib.suppress(OSError):
                if path.parent != self.outputs.resolve():
                    path.parent.rmdir()  # only when empty
        return Deleted(rows, files, left)

    def replay_request(
        self,
        output_id: int,
        *,
        model: str | None = None,
        ref_audio: str | None = None,
        ref_text: str | None = None,
        save: bool | None = None,
        emotion_audio: str | None = None,
    ) -> SpeechRequest:
        """The request that made output `output_id`, to speak again: same text, model, voice, emotion
        reference, seed, language, options, speed and format; the runtime (device, dtype, precision) is
        this run's.

        `model` replaces the recorded one (a model used from a folder or the Hugging Face cache is
        recorded by its path, `model_path`, which may have moved since). A clip cloned ad hoc is not
        kept, so such a row needs `ref_audio` (and `ref_text`) again; an emotion clip, `emotion_audio`."""
        row = self.get(output_id).row
        meta = row.metadata
        mode = meta.get("mode")
        if mode is None or "seed" not in meta:
            raise StorageError(f"output {output_id} was recorded without its request", hint="speak it again with `koe speak`")
        request = SpeechRequest(
            text=row.text,
            model=model or meta.get("model_path") or meta.get("model_name") or row.model,
            language=meta.get("language"),
            seed=meta.get("seed"),
            options=dict(meta.get("options") or {}),
            speed=meta.get("speed"),
            format=meta.get("format") or row.format,
            save=save,
        )
        instruct = meta.get("instruct")
        if mode == "speaker":
            request.speaker = meta.get("speaker")
        elif mode == "clone_voice":
            request.voice = meta.get("voice")
            if request.voice and not self.home.voices.exists(request.voice):
                raise NotFound(f"output {output_id} used library voice {request.voice!r}, which is no longer in the library", param="voice")
        elif mode == "design":
            request.design, instruct = instruct, None
        elif mode == "clone_clip":
            if ref_audio is None:
                raise InvalidRequest(
                    f"output {output_id} cloned a reference clip, which the history does not keep",
                    hint="give the clip again: koe history replay ID --ref CLIP [--ref-text ...]",
                    param="ref_audio",
                )
            request.ref_audio, request.ref_text = ref_audio, ref_text
        request.instruct = instruct
        if meta.get("emotion_voice"):
            request.emotion_voice = meta["emotion_voice"]
            if not self.home.voices.exists(request.emotion_voice):
                raise NotFound(
                    f"output {output_id} took its emotion from library voice {request.emotion_voice!r}, which is no longer in the library",
                    param="emotion_voice",
                )
        elif meta.get("emotion_clip"):
            if emotion_audio is None:
                raise InvalidRequest(
                    f"output {output_id} took its emotion from a clip, which the history does not keep",
                    hint="give the clip again: koe history replay ID --emotion-ref CLIP",
                    param="emotion_audio",
                )
            request.emotion_audio = emotion_audio
        return request

    # -- parts ----------------------------------------------------------------------------------
    def _entry(self, row: OutputRow) -> Entry:
        path = self._owned(row.path) if row.path else None
        return Entry(row, path if path is not None and path.is_file() else None)

    def _owned(self, recorded: str) -> Path | None:
        """`recorded` as a path inside KOE_HOME/outputs (links resolved), else None: never touch others."""
        root = self.outputs.resolve()
        try:
            path = Path(os.path.realpath(recorded))
        except (OSError, ValueError):
            return None
        return path if path != root and path.is_relative_to(root) else None
