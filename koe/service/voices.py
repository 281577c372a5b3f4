"""The voice library: named reference clips kept under `KOE_HOME/voices/<name>/`.

A voice folder holds `reference.wav` (the clip as float32 mono at its own rate, so cloning from the
library gives the same bits as cloning from the original file), `transcript.txt` when there is a
transcript, `voice.json`, and `prompts/<model-key>/`: the voice prompt each model prepared from it,
made the first time the voice is used with that model. Folders are written whole (temp folder +
rename) and indexed in koe.db.
"""

from __future__ import annotations

import io
import json
import logging
import tarfile
import threading
import time
import zipfile
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from koe.audio.errors import AudioError
from koe.audio.io import AudioSource, load_audio, write_wav
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, StorageError, Unavailable
from koe.service.fsio import atomic_folder, atomic_write_bytes, atomic_write_text, remove_tree, sweep_leftovers
from koe.service.names import check_name
from koe.service.storage import Database, VoiceRow

log = logging.getLogger(__name__)

REFERENCE = "reference.wav"
TRANSCRIPT = "transcript.txt"
VOICE_JSON = "voice.json"
PROMPTS = "prompts"
MIN_REFERENCE_SECONDS = 1.0  # as the Qwen3-TTS engine requires (voice.MIN_REF_SECONDS)
MAX_ARCHIVE_BYTES = 512 * 1024 * 1024
_ARCHIVE_FILES = (REFERENCE, TRANSCRIPT, VOICE_JSON)


@dataclass(frozen=True)
class Voice:
    """A voice in the library. `ref_text` None means the voice clones from the timbre alone (x-vector only)."""

    name: str
    folder: Path
    source: str  # "clip", "design" or "import"
    created_at: float
    ref_text: str | None
    description: str | None
    language: str | None
    duration_s: float
    sample_rate: int

    @property
    def reference_path(self) -> Path:
        return self.folder / REFERENCE

    def prompt_dir(self, model_key: str) -> Path:
        return self.folder / PROMPTS / model_key

    @property
    def prepared_for(self) -> list[str]:
        """Model keys this voice already has a prepared prompt for."""
        d = self.folder / PROMPTS
        return sorted(p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith(".")) if d.is_dir() else []

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["folder"] = str(self.folder)
        d["prepared_for"] = self.prepared_for
        return d


class VoiceLibrary:
    """Add, list, show, remove, export and import voices; hand out prepared voice prompts per model."""

    def __init__(self, root: str | Path, db: Database, *, max_reference_seconds: float | None = None) -> None:
        self.root = Path(root)
        self.db = db
        self.max_reference_seconds = max_reference_seconds
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create the voice folder {self.root}: {e.strerror}") from e
        sweep_leftovers(self.root)
        self._reconcile()

    # -- reading --------------------------------------------------------------------------------
    def list(self) -> list[Voice]:
        """All voices, by name."""
        return [self._voice(r) for r in self.db.list_voices()]

    def get(self, name: str) -> Voice:
        """The voice called `name` (case-insensitive); `NotFound` lists the voices there are."""
        check_name(name, "voice")
        row = self.db.get_voice(name)
        if row is None or not (self.root / row.name / VOICE_JSON).is_file():
            known = [v.name for v in self.list()]
            raise NotFound(f"no voice named {name!r}; voices: {', '.join(known) if known else '(none yet: koe voices add NAME --ref clip.wav)'}", param="voice")
        return self._voice(row)

    def exists(self, name: str) -> bool:
        """True when a voice called `name` is in the library (False for invalid names too)."""
        try:
            self.get(name)
        except (NotFound, InvalidRequest):
            return False
        return True

    # -- writing --------------------------------------------------------------------------------
    def add(
        self,
        name: str,
        ref_audio: AudioSource,
        ref_text: str | None = None,
        *,
        description: str | None = None,
        language: str | None = None,
        source: str = "clip",
        overwrite: bool = False,
    ) -> Voice:
        """Keep `ref_audio` (a path, file bytes or `(samples, sample_rate)`) as voice `name`.

        Raises `InvalidRequest` for a bad name or unusable audio (unreadable, silent, too short or
        longer than the configured limit) and `AlreadyExists` unless `overwrite`.
        """
        check_name(name, "voice")
        if not overwrite and self.db.get_voice(name) is not None:
            raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite")
        try:
            samples, sr = load_audio(ref_audio, max_seconds=self.max_reference_seconds)
        except AudioError as e:
            raise InvalidRequest(f"reference audio: {e}", param="ref_audio") from e
        duration = len(samples) / sr
        if duration < MIN_REFERENCE_SECONDS:
            raise InvalidRequest(f"reference audio is {duration:.2f} s; give at least {MIN_REFERENCE_SECONDS} s of speech", param="ref_audio")
        if self.max_reference_seconds and duration > self.max_reference_seconds:
            raise InvalidRequest(
                f"reference audio is {duration:.1f} s; at most {self.max_reference_seconds:g} s is allowed (3-20 s of clean speech works best)",
                param="ref_audio",
            )
        ref_text = ref_text.strip() if ref_text and ref_text.strip() else None
        row = VoiceRow(name, time.time(), source, ref_text, description or None, language or None, round(duration, 3), int(sr))
        with self._lock(name):
            existing = self.db.get_voice(name)
            if existing is not None and not overwrite:
                raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite")
            if existing is not None:
                row = replace(row, name=existing.name)  # names are case-insensitive: keep the folder's
            try:
                with atomic_folder(self.root / row.name, replace=overwrite) as tmp:
                    write_wav(tmp / REFERENCE, samples, sr, subtype="FLOAT")
                    if ref_text:
                        atomic_write_text(tmp / TRANSCRIPT, ref_text + "\n")
                    atomic_write_text(tmp / VOICE_JSON, json.dumps(_voice_json(row), indent=2, ensure_ascii=False))
            except FileExistsError as e:
                raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite") from e
            self.db.put_voice(row)
        return self._voice(row)

    def remove(self, name: str) -> None:
        """Delete voice `name` and its prepared prompts; `NotFound` if there is none."""
        voice = self.get(name)
        with self._lock(voice.name):
            self.db.delete_voice(voice.name)
            remove_tree(voice.folder)

    def export(self, name: str, dest: str | Path) -> Path:
        """Write voice `name` (reference, transcript, voice.json; prompts are rebuilt on use) to a .zip,
        .tar, .tar.gz or .tgz archive at `dest` (a folder gets `<name>.zip`). Returns the archive's path."""
        voice = self.get(name)
        dest = Path(dest)
        if dest.is_dir():
            dest = dest / f"{voice.name}.zip"
        files = {f: (voice.folder / f).read_bytes() for f in _ARCHIVE_FILES if (voice.folder / f).is_file()}
        buf = io.BytesIO()
        kind = _archive_kind(dest)
        if kind == "zip":
            with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
                for f, data in files.items():
                    zf.writestr(f"{voice.name}/{f}", data)
        else:
            with tarfile.open(fileobj=buf, mode="w:gz" if kind == "tar.gz" else "w") as tf:
                for f, data in files.items():
                    info = tarfile.TarInfo(f"{voice.name}/{f}")
                    info.size = len(data)
                    info.mtime = int(voice.created_at)
                    info.mode = 0o644
                    tf.addfile(info, io.BytesIO(data))
        try:
            return atomic_write_bytes(dest, buf.getvalue())
        except OSError as e:
            raise StorageError(f"cannot write {dest}: {e.strerror}") from e

    def import_archive(self, archive: str | Path | bytes, name: str | None = None, *, overwrite: bool = False) -> Voice:
        """Add the voice in an archive made by `export` (as `name`, or the name it was exported with).

        Only `reference.wav`, `transcript.txt` and `voice.json` are read from it; members with
        absolute paths, `..` or links are refused, and the audio is checked like `add` does.
        """
        files = _read_archive(archive)
        meta: dict[str, Any] = {}
        if VOICE_JSON in files:
            try:
                meta = json.loads(files[VOICE_JSON].decode("utf-8"))
            except (UnicodeDecodeError, json.JSONDecodeError) as e:
                raise InvalidRequest(f"voice archive: voice.json is not valid JSON ({e})") from e
        if REFERENCE not in files:
            raise InvalidRequest(f"voice archive holds no {REFERENCE}")
        ref_text = files[TRANSCRIPT].decode("utf-8", errors="replace").strip() if TRANSCRIPT in files else meta.get("ref_text")
        target = name or meta.get("name")
        if not target:
            raise InvalidRequest("voice archive has no name in voice.json; give one")
        return self.add(
            str(target), files[REFERENCE], ref_text, description=meta.get("description"),
            language=meta.get("language"), source="import", overwrite=overwrite,
        )  # fmt: skip

    # -- prepared prompts -----------------------------------------------------------------------
    def prompt_for(self, name: str, model_key: str, prepare: Callable[[Voice], Any], load: Callable[[Path], Any]) -> Any:
        """The voice prompt of voice `name` for model `model_key`: loaded from `prompts/<model_key>/`,
        or made with `prepare(voice)` (e.g. the engine's `prepare_voice`) and saved there first.

        `load(folder)` reads a saved prompt (e.g. `VoicePrompt.load`); a damaged one is remade.
        """
        check_name(model_key, "model key")
        voice = self.get(name)
        folder = voice.prompt_dir(model_key)
        with self._lock(voice.name):
            if folder.is_dir():
                try:
                    return load(folder)
                except (OSError, ValueError, KeyError) as e:
                    log.warning("prepared prompt %s is damaged (%s); preparing it again", folder, e)
            prompt = prepare(voice)
            save = getattr(prompt, "save", None)
            if save is None:
                raise Unavailable("this engine's voice prompts cannot be saved")
            try:
                with atomic_folder(folder, replace=True) as tmp:
                    save(tmp)
            except OSError as e:
                log.warning("could not keep the prepared prompt for %s (%s)", voice.name, e)
            return prompt

    # -- internals ------------------------------------------------------------------------------
    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name.lower(), threading.Lock())

    def _voice(self, row: VoiceRow) -> Voice:
        return Voice(row.name, self.root / row.name, row.source, row.created_at, row.ref_text, row.description, row.language, row.duration_s, row.sample_rate)

    def _reconcile(self) -> None:
        """Make koe.db agree with the folders: index complete folders it lacks, forget rows without a folder."""
        rows = {r.name for r in self.db.list_voices()}
        on_disk = {}
        for p in self.root.iterdir():
            if p.is_dir() and not p.name.startswith(".") and (p / VOICE_JSON).is_file() and (p / REFERENCE).is_file():
                on_disk[p.name] = p
        for name in rows - set(on_disk):
            self.db.delete_voice(name)
        for name in set(on_disk) - rows:
            try:
                meta = json.loads((on_disk[name] / VOICE_JSON).read_text(encoding="utf-8"))
                self.db.put_voice(VoiceRow(
                    name, float(meta.get("created_at", time.time())), str(meta.get("source", "clip")), meta.get("ref_text"),
                    meta.get("description"), meta.get("language"), float(meta["duration_s"]), int(meta["sample_rate"]),
                ))  # fmt: skip
            except (OSError, ValueError, KeyError, TypeError) as e:
                log.warning("voice folder %s is not readable (%s); skipped", on_disk[name], e)


def _voice_json(row: VoiceRow) -> dict[str, Any]:
    from koe import __version__

    return {"format": 1, "koe_version": __version__, **asdict(row)}


def _archive_kind(path: Path) -> str:
    name = path.name.lower()
    if name.endswith(".zip"):
        return "zip"
    if name.endswith((".tar.gz", ".tgz")):
        return "tar.gz"
    if name.endswith(".tar"):
        return "tar"
    raise InvalidRequest(f"archive {path.name!r}: use a .zip, .tar, .tar.gz or .tgz name")


def _member_file(member: str) -> str | None:
    """The voice file a member names (`reference.wav` or `<voice>/reference.wav`), None to skip; unsafe paths raise."""
    parts = member.replace("\\", "/").split("/")
    if member.startswith(("/", "\\")) or ".." in parts or (parts and ":" in parts[0]):
        raise InvalidRequest(f"voice archive member {member!r} has an unsafe path")
    parts = [p for p in parts if p not in ("", ".")]
    if len(parts) in (1, 2) and parts[-1] in _ARCHIVE_FILES:
        return parts[-1]
    return None


def _read_archive(archive: str | Path | bytes) -> dict[str, bytes]:
    if isinstance(archive, (bytes, bytearray)):
        data = bytes(archive)
        label = "<upload>"
    else:
        path = Path(archive)
        if not path.is_file():
            raise NotFound(f"no such archive: {path}")
        if path.stat().st_size > MAX_ARCHIVE_BYTES:
            raise InvalidRequest(f"voice archive {path.name} is too large")
        data = path.read_bytes()
        label = path.name
    files: dict[str, bytes] = {}
    if zipfile.is_zipfile(io.BytesIO(data)):
        with zipfile.ZipFile(io.BytesIO(data)) as zf:
            for info in zf.infolist():
                f = _member_file(info.filename)
                if f is None or info.is_dir():
                    continue
                if info.file_size > MAX_ARCHIVE_BYTES:
                    raise InvalidRequest(f"voice archive member {info.filename!r} is too large")
                files[f] = zf.read(info)
        return files
    try:
        with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tf:
            for m in tf.getmembers():
                f = _member_file(m.name)
                if f is None or m.isdir():
                    continue
                if not m.isfile():
                    raise InvalidRequest(f"voice archive member {m.name!r} is a link or device; refused")
                if m.size > MAX_ARCHIVE_BYTES:
                    raise InvalidRequest(f"voice archive member {m.name!r} is too large")
                fobj = tf.extractfile(m)
                if fobj is not None:
                    files[f] = fobj.read()
    except tarfile.TarError as e:
        raise InvalidRequest(f"{label} is not a voice archive (.zip or .tar): {e}") from e
    return files
