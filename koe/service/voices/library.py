"""The voice library: named reference clips kept under `KOE_HOME/voices/<name>/`.

A voice folder holds `reference.wav` (the clip as float32 mono at its own rate, so cloning from the
library gives the same bits as cloning from the original file), `transcript.txt` when there is a
transcript, `voice.json`, and `prompts/<model-key>/`: the voice prompt each model prepared from it,
made the first time the voice is used with that model (`prompts/<model-key>+<option>=<value>/` for
one prepared with a prompt-changing option, such as Qwen3-TTS's ref_pad_seconds: `prompt_key`).
Folders are written whole (temp folder + rename) and indexed in koe.db; the folder is the truth and
the database its index.

Hardening, in short:
- Everything a voice carries (name, texts, numbers, archive members) is checked before anything is
  written (`manifest`, `archive`), so a bad request or a crafted archive leaves no folder, no row and
  no temp folder.
- A bad folder or database row (bad JSON, wrong types, missing or unreadable files, an invalid name)
  is skipped with a warning, at startup and when listing or getting; it never stops koe.
- Overwriting swaps the new folder in with one atomic exchange (see `fsio.atomic_folder`): readers
  in any process see the old voice or the new one, never neither. `get` reads the voice's own
  `voice.json`, so what it returns always matches the folder it points to.
- Writers (add, overwrite, remove, startup reconcile) lock the voices folder (`flock`), one at a time
  across processes, so folder and row change together.
"""

from __future__ import annotations

import json
import logging
import os
import re
import sqlite3
import stat
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from koe.audio.decode import MAX_CLIP_SECONDS
from koe.audio.errors import AudioError
from koe.audio.io import AudioSource, load_audio, write_wav
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, StorageError, Unavailable
from koe.service.fsio import atomic_folder, atomic_write_bytes, atomic_write_text, path_lock, remove_tree, sweep_leftovers
from koe.service.names import check_name, close_matches, did_you_mean
from koe.service.storage import Database, VoiceRow
from koe.service.voices.archive import archive_kind, read_archive, write_archive
from koe.service.voices.manifest import (
    MAX_MANIFEST_BYTES,
    MAX_REFERENCE_BYTES,
    MAX_STORED_SECONDS,
    REFERENCE,
    SAMPLE_RATES,
    SOURCES,
    TRANSCRIPT,
    VOICE_JSON,
    VoiceLimits,
    check_manifest,
    check_row,
    check_text,
    manifest_json,
    parse_manifest,
)

log = logging.getLogger(__name__)

PROMPTS = "prompts"
# The library's own floor for a clip it keeps: a voice is kept for whichever model it is used with later. Each
# model's floor (`Capabilities.min_reference_s`) is checked when the voice is used with it (`check_reference`).
MIN_REFERENCE_SECONDS = 1.0
SWAP_WAIT_S = 0.25  # how long `get` waits for a folder caught between two renames (no atomic exchange)
_VARIANT_PART = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,31}")  # an option name or value in a prompt folder's name


@dataclass(frozen=True)
class Voice:
    """A voice in the library. `ref_text` None means the voice clones from the clip alone (timbre only, no transcript)."""

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
        try:
            return sorted(p.name for p in d.iterdir() if p.is_dir() and not p.name.startswith("."))
        except OSError:
            return []

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["folder"] = str(self.folder)
        d["prepared_for"] = self.prepared_for
        return d


class VoiceLibrary:
    """Add, list, show, remove, export and import voices; hand out prepared voice prompts per model."""

    def __init__(
        self,
        root: str | Path,
        db: Database,
        *,
        max_reference_seconds: float | None = None,
        max_transcript_chars: int = VoiceLimits.transcript_chars,
        max_description_chars: int = VoiceLimits.description_chars,
    ) -> None:
        self.root = Path(root)
        self.db = db
        self.max_reference_seconds = max_reference_seconds
        self.limits = VoiceLimits(max_transcript_chars, max_description_chars)
        self._locks: dict[str, threading.Lock] = {}
        self._locks_guard = threading.Lock()
        self._warned: set[str] = set()
        try:
            self.root.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise StorageError(f"cannot create the voice folder {self.root}: {e.strerror}") from e
        sweep_leftovers(self.root)
        self._reconcile()

    # -- reading --------------------------------------------------------------------------------
    def list(self) -> list[Voice]:
        """All voices, by name. A damaged row is read from its folder instead; a damaged voice is skipped with a warning."""
        voices = []
        for row in self.db.list_voices():
            try:
                check_row(row, self.limits)
            except InvalidRequest as e:
                voice = self._from_folder_or_warn(row.name, f"koe.db's row is damaged ({e})")
            else:
                folder = self.root / row.name
                voice = self._voice(row) if (folder / VOICE_JSON).is_file() and (folder / REFERENCE).is_file() else None
            if voice is not None:
                voices.append(voice)
        return voices

    def get(self, name: str) -> Voice:
        """The voice called `name` (case-insensitive), as its folder's voice.json has it.

        `NotFound` lists the voices there are; a damaged voice is `NotFound` saying what is wrong.
        """
        check_name(name, "voice")
        row = self.db.get_voice(name)
        if row is None:
            raise self._not_found(name)
        try:
            check_name(row.name, "voice")
            return self._voice(self._read_live(row.name))
        except FileNotFoundError:
            raise self._not_found(name) from None
        except (InvalidRequest, OSError) as e:
            self._warn(f"voice {row.name!r} is damaged ({_reason(e)}); skipped")
            raise NotFound(f"voice {row.name!r} is damaged: {_reason(e)}", hint=f"koe voices remove {row.name}, then add it again", param="voice") from e

    def exists(self, name: str) -> bool:
        """True when a voice called `name` is in the library (False for invalid names too)."""
        try:
            self.get(name)
        except (NotFound, InvalidRequest):
            return False
        return True

    def check_fields(self, ref_text: Any = None, description: Any = None, language: Any = None) -> tuple[str | None, str | None, str | None]:
        """(ref_text, description, language) checked and stripped as `add` keeps them (empty -> None).

        Raises `InvalidRequest` naming the param for a non-string, text over its limit, or
        characters that are not text (control characters, lone surrogates). Call it before
        expensive work whose result `add` would then refuse.
        """
        lim = self.limits
        return (
            check_text(ref_text, "the transcript (ref_text)", "ref_text", lim.transcript_chars),
            check_text(description, "the description", "description", lim.description_chars),
            check_text(language, "the language", "language", lim.language_chars, one_line=True),
        )

    def check_reference(self, name: str, min_seconds: float, model: str) -> Voice:
        """Voice `name`, if its clip is long enough for `model`, whose floor is `min_seconds` (its
        `Capabilities.min_reference_s`); else `InvalidRequest` saying how long the clip must be."""
        voice = self.get(name)
        if voice.duration_s < min_seconds:
            raise InvalidRequest(
                f"voice {voice.name!r} is {voice.duration_s:.2f} s of audio; {model} clones from at least {min_seconds:g} s",
                hint=f"add it again from a longer clip (koe voices add {voice.name} --ref CLIP --overwrite)",
                param="voice",
            )
        return voice

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

        Raises `InvalidRequest` for a bad name, text (see `check_fields`) or unusable audio
        (unreadable, silent, too short or longer than the configured limit), all before anything is
        written, and `AlreadyExists` unless `overwrite`. An overwrite is atomic: readers see the old
        voice or the new one.
        """
        check_name(name, "voice")
        ref_text, description, language = self.check_fields(ref_text, description, language)
        if source not in SOURCES:
            raise InvalidRequest(f"source must be one of {', '.join(SOURCES)}", param="source")
        if not overwrite and self.db.get_voice(name) is not None:
            raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite")
        try:
            samples, sr = load_audio(ref_audio, max_seconds=self.max_reference_seconds or MAX_CLIP_SECONDS)
        except AudioError as e:
            raise InvalidRequest(f"reference audio: {e}", param="ref_audio") from e
        duration = len(samples) / sr
        if duration < MIN_REFERENCE_SECONDS:
            raise InvalidRequest(f"reference audio is {duration:.2f} s; give at least {MIN_REFERENCE_SECONDS} s of speech", param="ref_audio")
        if duration > MAX_STORED_SECONDS or (self.max_reference_seconds and duration > self.max_reference_seconds):
            raise InvalidRequest(
                f"reference audio is {duration:.1f} s; at most {self.max_reference_seconds or MAX_STORED_SECONDS:g} s is allowed (3-20 s of clean speech works best)",
                param="ref_audio",
            )
        if not SAMPLE_RATES[0] <= sr <= SAMPLE_RATES[1]:
            raise InvalidRequest(f"reference audio is at {sr} Hz; use {SAMPLE_RATES[0]}-{SAMPLE_RATES[1]} Hz", param="ref_audio")
        row = VoiceRow(name, time.time(), source, ref_text, description, language, round(duration, 3), int(sr))
        check_row(row, self.limits)  # the numbers too: nothing reaches the disk that could not be read back
        with self._writing(name):
            existing = self.db.get_voice(name)
            if existing is not None and not overwrite:
                raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite")
            if existing is not None:
                row = replace(row, name=existing.name)  # names are case-insensitive: keep the folder's
            folder = self.root / row.name
            try:
                with atomic_folder(folder, replace=overwrite) as tmp:
                    write_wav(tmp / REFERENCE, samples, sr, subtype="FLOAT")
                    if ref_text:
                        atomic_write_text(tmp / TRANSCRIPT, ref_text + "\n")
                    atomic_write_text(tmp / VOICE_JSON, json.dumps(manifest_json(row), indent=2, ensure_ascii=False))
            except FileExistsError as e:
                if existing is None:
                    raise AlreadyExists(f"a folder {row.name!r} that is not a readable voice is in the way", hint="remove it first or pass overwrite") from e
                raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite") from e
            try:
                self.db.put_voice(row)
            except sqlite3.Error as e:
                if existing is None:
                    remove_tree(folder)  # an overwrite keeps its new folder: the next start indexes it
                raise StorageError(f"cannot index voice {row.name!r} in koe.db: {e}") from e
        return self._voice(row)

    def remove(self, name: str) -> None:
        """Delete voice `name` and its prepared prompts (a damaged one too); `NotFound` if there is none."""
        check_name(name, "voice")
        with self._writing(name):
            row = self.db.get_voice(name)
            folder = self.root / (row.name if row is not None else name)
            if row is None and not (folder.is_dir() or folder.is_symlink()):
                raise self._not_found(name)
            if row is not None:
                self.db.delete_voice(row.name)
            remove_tree(folder)

    def reference_bytes(self, name: str) -> tuple[Voice, bytes]:
        """Voice `name` and its reference clip's bytes, read as the library reads its own files (a
        regular file, never a device or FIFO put there; at most MAX_REFERENCE_BYTES), under the
        voice's lock so an overwrite in this process never mixes versions."""
        with self._lock(name):
            voice = self.get(name)
            try:
                return voice, _read_regular(voice.reference_path, MAX_REFERENCE_BYTES)
            except FileNotFoundError:  # removed by another process since `get`
                raise self._not_found(name) from None

    def export(self, name: str, dest: str | Path) -> Path:
        """Write voice `name` (reference, transcript, voice.json; prompts are rebuilt on use) to a .zip,
        .tar, .tar.gz or .tgz archive at `dest` (a folder gets `<name>.zip`). Returns the archive's path."""
        dest = Path(dest)
        with self._writing(name):  # no overwrite mid-read: the archive holds one version
            voice = self.get(name)
            if dest.is_dir():
                dest = dest / f"{voice.name}.zip"
            kind = archive_kind(dest)
            files = {REFERENCE: _read_regular(voice.reference_path, MAX_REFERENCE_BYTES)}
            if voice.ref_text:
                files[TRANSCRIPT] = (voice.ref_text + "\n").encode("utf-8")
            row = VoiceRow(voice.name, voice.created_at, voice.source, voice.ref_text, voice.description, voice.language, voice.duration_s, voice.sample_rate)
            files[VOICE_JSON] = json.dumps(manifest_json(row), indent=2, ensure_ascii=False).encode("utf-8")
        data = write_archive(files, kind, voice.name, voice.created_at)
        try:
            return atomic_write_bytes(dest, data)
        except OSError as e:
            raise StorageError(f"cannot write {dest}: {e.strerror}") from e

    def import_archive(self, archive: str | Path | bytes, name: str | None = None, *, overwrite: bool = False) -> Voice:
        """Add the voice in an archive made by `export` (as `name`, or the name it was exported with).

        Only `reference.wav`, `transcript.txt` and `voice.json` are read from it, each up to a size
        limit; members with absolute paths, `..`, links or duplicates are refused, every field of
        voice.json is checked (unknown keys are ignored: newer koe versions may add some), the
        transcript must be UTF-8 and the audio is checked like `add` does. A refused archive leaves
        nothing behind.
        """
        files = read_archive(archive, self.limits)
        fields: dict[str, Any] = {}
        if VOICE_JSON in files:
            fields = check_manifest(parse_manifest(files[VOICE_JSON]), self.limits, complete=False)
        if REFERENCE not in files:
            raise InvalidRequest(f"voice archive holds no {REFERENCE}")
        ref_text = fields.get("ref_text")
        if TRANSCRIPT in files:
            try:
                ref_text = files[TRANSCRIPT].decode("utf-8").removeprefix("\ufeff")
            except UnicodeDecodeError as e:
                raise InvalidRequest(f"voice archive: {TRANSCRIPT} is not UTF-8 text ({e.reason} at byte {e.start})", param="ref_text") from e
        target = name or fields.get("name")
        if not target:
            raise InvalidRequest("voice archive has no name in voice.json; give one")
        return self.add(
            target,
            files[REFERENCE],
            ref_text,
            description=fields.get("description"),
            language=fields.get("language"),
            source="import",
            overwrite=overwrite,
        )

    # -- prepared prompts -----------------------------------------------------------------------
    def prompt_for(
        self, name: str, model_key: str, prepare: Callable[[Voice], Any], load: Callable[[Path], Any], *, variant: Mapping[str, Any] | None = None
    ) -> Any:
        """The voice prompt of voice `name` for model `model_key`: loaded from `prompts/<key>/`,
        or made with `prepare(voice)` (e.g. the engine's `prepare_voice`) and saved there first.

        `variant`: the request options that change a prepared prompt (the engine's
        `prompt_options`, e.g. {"ref_pad_seconds": 0.5}); they are part of the key (`prompt_key`),
        so a padded and an unpadded prompt are never mixed up. `load(folder)` reads a saved prompt
        (e.g. `VoicePrompt.load`); a damaged one is remade. A prompt is not kept when the voice was
        overwritten (by another process) while it was made.
        """
        voice = self.get(name)
        folder = voice.prompt_dir(prompt_key(model_key, variant))
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
                if self._read_folder(voice.folder).created_at != voice.created_at:
                    log.info("voice %s was replaced while its prompt was made; not keeping it", voice.name)
                    return prompt
                with atomic_folder(folder, replace=True) as tmp:
                    save(tmp)
            except (OSError, InvalidRequest) as e:
                log.warning("could not keep the prepared prompt for %s (%s)", voice.name, e)
            return prompt

    # -- internals ------------------------------------------------------------------------------
    def _lock(self, name: str) -> threading.Lock:
        with self._locks_guard:
            return self._locks.setdefault(name.lower(), threading.Lock())

    @contextmanager
    def _writing(self, name: str) -> Iterator[None]:
        """Hold `name`'s lock in this process and the lock on the voices folder across processes."""
        with self._lock(name), path_lock(self.root):
            yield

    def _voice(self, row: VoiceRow) -> Voice:
        return Voice(row.name, self.root / row.name, row.source, row.created_at, row.ref_text, row.description, row.language, row.duration_s, row.sample_rate)

    def _not_found(self, name: str) -> NotFound:
        known = [v.name for v in self.list()]
        return NotFound(
            f"no voice named {name!r}; voices: {', '.join(known) if known else '(none yet: koe voices add NAME --ref clip.wav)'}",
            hint=did_you_mean(close_matches(name, known)),
            param="voice",
        )

    def _warn(self, message: str) -> None:
        """Log `message` once per library (a listing is not a flood of the same warning)."""
        if message not in self._warned:
            self._warned.add(message)
            log.warning("%s", message)

    def _read_folder(self, folder: Path) -> VoiceRow:
        """The voice in `folder`, from its voice.json, checked; the folder's name is the voice's name.

        Raises `FileNotFoundError` when voice.json or reference.wav is missing, another `OSError`
        when one cannot be read, `InvalidRequest` when the name or a field is bad.
        """
        check_name(folder.name, "voice")
        fields = check_manifest(parse_manifest(_read_regular(folder / VOICE_JSON, MAX_MANIFEST_BYTES)), self.limits, complete=True)
        ref = folder / REFERENCE
        st = ref.stat()  # missing: FileNotFoundError, as mid-swap (the folder went after voice.json was read)
        if not stat.S_ISREG(st.st_mode) or st.st_size == 0:
            raise InvalidRequest(f"{REFERENCE} is not a regular, non-empty file")
        with open(ref, "rb"):
            pass  # readable
        return VoiceRow(
            folder.name,
            float(fields["created_at"]),
            fields["source"],
            fields.get("ref_text"),
            fields.get("description"),
            fields.get("language"),
            float(fields["duration_s"]),
            int(fields["sample_rate"]),
        )

    def _read_live(self, name: str) -> VoiceRow:
        """`_read_folder(root/name)`, retried for up to SWAP_WAIT_S while the folder is missing: an
        overwrite on a file system without atomic exchange leaves it gone between two renames."""
        deadline = time.monotonic() + SWAP_WAIT_S
        delay = 0.001
        while True:
            try:
                return self._read_folder(self.root / name)
            except FileNotFoundError:
                if time.monotonic() >= deadline:
                    raise
                time.sleep(delay)
                delay = min(2 * delay, 0.02)

    def _from_folder_or_warn(self, name: str, why: str) -> Voice | None:
        try:
            check_name(name, "voice")
            voice = self._voice(self._read_folder(self.root / name))
        except (InvalidRequest, OSError) as e:
            self._warn(f"voice {name!r} skipped: {why}; its folder: {_reason(e)}")
            return None
        self._warn(f"voice {name!r}: {why}; using its voice.json")
        return voice

    def _reconcile(self) -> None:
        """Make koe.db agree with the folders, which win: index good folders it lacks or has wrong,
        forget rows without a good folder, skip (with a warning) folders that are not good voices,
        and sweep the leftovers of crashed prompt writes."""
        with path_lock(self.root):
            found: dict[str, VoiceRow] = {}
            try:
                entries = sorted(self.root.iterdir())
            except OSError as e:
                raise StorageError(f"cannot read the voice folder {self.root}: {e.strerror}") from e
            for p in entries:
                if p.name.startswith(".") or not p.is_dir():
                    continue
                try:
                    row = self._read_folder(p)
                except (InvalidRequest, OSError) as e:
                    self._warn(f"voice folder {p} skipped: {_reason(e)}")
                    continue
                if row.name.lower() in found:
                    self._warn(f"voice folder {p} skipped: another folder has the same name in other case")
                    continue
                found[row.name.lower()] = row
                sweep_leftovers(p / PROMPTS)
            try:
                indexed = {r.name: r for r in self.db.list_voices()}
                for name in indexed:
                    if name.lower() not in found or found[name.lower()].name != name:
                        self.db.delete_voice(name)
                for row in found.values():
                    if indexed.get(row.name) != row:
                        self.db.put_voice(row)
            except sqlite3.Error as e:
                log.warning("could not bring koe.db's voices up to date (%s); listing what it has", e)


# -- voice.json -------------------------------------------------------------------------------------
def prompt_key(model_key: str, variant: Mapping[str, Any] | None = None) -> str:
    """The folder name under `prompts/` of `model_key`'s prompt made with `variant` (options that
    change a prepared prompt): the model key alone without any (as before variants existed), else
    "<model key>+<option>=<value>..." in name order ("qwen-base+ref_pad_seconds=0.5")."""
    check_name(model_key, "model key")
    parts = []
    for option, value in sorted((variant or {}).items()):
        shown = repr(float(value)).removesuffix(".0") if isinstance(value, float) else str(value).lower() if isinstance(value, bool) else str(value)
        if not _VARIANT_PART.fullmatch(option) or not _VARIANT_PART.fullmatch(shown):
            raise InvalidRequest(f"cannot key a prepared prompt on {option}={value!r}", param=option)
        parts.append(f"+{option}={shown}")
    return model_key + "".join(parts)


def _reason(e: BaseException) -> str:
    """An error in a few words, without the absolute path of a file."""
    if isinstance(e, OSError) and e.filename:
        return f"{Path(str(e.filename)).name}: {e.strerror or e}"
    return str(e)


def _read_regular(path: Path, limit: int) -> bytes:
    """The bytes of the regular file `path` (a link to one is followed), at most `limit`; else `InvalidRequest`.

    A device or FIFO put in a voice folder could hang or flood a reader; it is refused.
    """
    with open(path, "rb") as f:
        st = os.fstat(f.fileno())
        if not stat.S_ISREG(st.st_mode):
            raise InvalidRequest(f"{path.name} is not a regular file")
        if st.st_size > limit:
            raise InvalidRequest(f"{path.name} is over {limit // 1024} KiB")
        data = f.read(limit + 1)
    if len(data) > limit:
        raise InvalidRequest(f"{path.name} is over {limit // 1024} KiB")
    return data
