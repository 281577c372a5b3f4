"""Reading a fine-tuning dataset, for every family's trainer: rows of fields from a JSONL, a CSV or
a folder of clip + transcript pairs, with every problem met collected, never raised one at a time.

Three layouts, in order of their rows:
  * a JSONL: one JSON object a line (upstream's format for most recipes: `{"audio": ..., "text":
    ...}` and the family's other fields);
  * a CSV (`.csv`; `.tsv` for tabs) with a header naming the columns (`audio` and `text` at least);
  * a folder of `NAME.wav` + `NAME.txt` pairs (any audio koe decodes: flac, ogg, mp3, ...), sorted
    by name; a transcript file's surrounding whitespace (its final newline) is not part of it.
A JSONL or CSV must be a regular file of at most 2 GiB (`MAX_DATA_BYTES`) with lines of at most
1 MiB (`MAX_LINE_BYTES`), and a transcript file at most 1 MiB (`MAX_TRANSCRIPT_BYTES`). A file is
read a line at a time, so `/dev/zero`, a FIFO or a huge file without newlines is refused in a
moment, never read whole. Relative paths in a row are relative to the folder of its file
(`Row.path`). A family turns rows into its clips and checks them (`DatasetError` lists every
problem, each naming its row: `file:line`, or the clip's file name in a folder).
"""

from __future__ import annotations

import csv
import json
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from koe.engines.base import TrainingError

__all__ = [
    "AUDIO_SUFFIXES",
    "Clip",
    "MAX_DATA_BYTES",
    "MAX_LINE_BYTES",
    "MAX_TRANSCRIPT_BYTES",
    "DatasetError",
    "Row",
    "Rows",
    "few",
    "file_kind",
    "load_clips",
    "missing_file",
    "read_rows",
]

AUDIO_SUFFIXES = frozenset({".wav", ".wave", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".m4a", ".aac", ".webm"})
SHOWN_PROBLEMS = 50  # listed in the error's message; all of them are in `.problems`
MAX_DATA_BYTES = 2 << 30  # a JSONL or CSV (a prepared JSONL: about 4 MB an hour of audio)
MAX_LINE_BYTES = 1 << 20  # a line of one, its line end included (a 30 s clip's prepared row: about 35 KB)
MAX_TRANSCRIPT_BYTES = 1 << 20  # a NAME.txt of a folder of pairs
_LONE_CR = re.compile(r"(?<=\r)(?!\n)")  # where a line ends at a "\r" alone (old Mac line ends)


class DatasetError(TrainingError):
    """A dataset that cannot be trained on: `problems` lists every problem, each naming its row.

    `message` holds the problems (the first 50) so that a shell wrapping it as a KoeError
    (`InvalidRequest(err.message, hint=err.hint)`) shows them; `hint` says what to do.
    """

    def __init__(self, source: str | Path, problems: list[str], hint: str | None = None) -> None:
        self.source = str(source)
        self.problems = list(problems)
        self.hint = hint or "fix these rows (each names its file and line, or its clip) and run again"
        n = len(self.problems)
        lines = [f"{n} problem{'s' if n != 1 else ''} in the dataset {self.source}:"]
        lines += [f"  {p}" for p in self.problems[:SHOWN_PROBLEMS]]
        if n > SHOWN_PROBLEMS:
            lines.append(f"  ... and {n - SHOWN_PROBLEMS} more")
        self.message = "\n".join(lines)
        super().__init__(self.message, self.hint, "data")

    def __str__(self) -> str:
        return f"{self.message}\n({self.hint})"


@dataclass(frozen=True)
class Row:
    """One row as read: its fields (a JSON object, a CSV row by column, or a pair's `audio` and
    `text`), where it is (`file:line` or the clip's file name) and the folder its paths are relative to."""

    fields: dict[str, Any]
    where: str
    base: Path

    def path(self, value: str) -> Path:
        """`value` (a path in this row) made absolute against the row's folder, normalised, links kept."""
        return Path(os.path.abspath(self.base / value))


@dataclass
class Rows:
    source: Path  # absolute
    kind: str  # "jsonl", "csv" or "pairs"
    rows: list[Row]
    problems: list[str]


def read_rows(path: str | Path, *, columns: str = "audio, text", skip: Path | None = None) -> Rows:
    """Every row of the dataset at `path` (see the module's doc); problems are collected in
    `Rows.problems`. A path that does not exist, a file that is not a regular file, is over the caps
    or is not UTF-8 text, raises `DatasetError` at once. `columns`: the columns a CSV may have (for
    its header's message); `skip`: a file of a folder of pairs that is no clip (a reference)."""
    source = Path(os.path.abspath(path))
    if not source.exists():
        raise DatasetError(source, [f"{source}: no such file or folder"], hint="give a JSONL or CSV file, or a folder of NAME.wav + NAME.txt pairs")
    problems: list[str] = []
    if source.is_dir():
        return Rows(source, "pairs", _read_pairs(source, skip, problems), problems)
    if source.suffix.lower() in (".csv", ".tsv"):
        return Rows(source, "csv", _read_csv(source, columns, problems), problems)
    return Rows(source, "jsonl", _read_jsonl(source, problems), problems)


def _read_jsonl(path: Path, problems: list[str]) -> list[Row]:
    rows = []
    for number, line in _lines(path):
        if not line.strip():
            continue
        where = f"{path.name}:{number}"
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as e:
            problems.append(f"{where}: not valid JSON ({e.msg} at column {e.colno})")
            continue
        if not isinstance(obj, dict):
            problems.append(f"{where}: not a JSON object")
            continue
        rows.append(Row(obj, where, path.parent))
    return rows


def _read_csv(path: Path, columns: str, problems: list[str]) -> list[Row]:
    lines = _lines(path)
    reader = csv.reader((line for _, line in lines), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    rows: list[Row] = []
    try:
        header = next(reader, None)
        if header is None:
            return []
        names = [h.strip().lower() for h in header]
        missing = [n for n in ("audio", "text") if n not in names]
        if missing:
            problems.append(
                f"{path.name}:1: the header has no {' or '.join(repr(m) for m in missing)} column "
                f"(it has {', '.join(repr(h) for h in header)}); the columns are {columns}"
            )
            return []
        last = reader.line_num
        for row in reader:
            where, last = f"{path.name}:{last + 1}", reader.line_num
            if not any(cell.strip() for cell in row):
                continue
            if len(row) != len(names):
                problems.append(f"{where}: {len(row)} fields, but the header has {len(names)}")
                continue
            rows.append(Row(dict(zip(names, row)), where, path.parent))
    except csv.Error as e:  # a field over csv's limit (128 KiB), a stray NUL: the rows after it are not read
        problems.append(f"{path.name}:{reader.line_num}: not valid CSV ({e}); the rows after it were not read")
    finally:
        lines.close()
    return rows


def _read_pairs(folder: Path, skip: Path | None, problems: list[str]) -> list[Row]:
    audio: dict[str, list[Path]] = {}
    texts: dict[str, Path] = {}
    for p in folder.iterdir():
        if p.name.startswith(".") or p.is_dir() or p == skip:
            continue  # a FIFO or device named like a clip or transcript is kept: it is refused by name below
        if p.suffix.lower() in AUDIO_SUFFIXES:
            audio.setdefault(p.stem, []).append(p)
        elif p.suffix.lower() == ".txt":
            texts[p.stem] = p
    rows = []
    for stem in sorted(audio.keys() | texts.keys()):
        found = sorted(audio.get(stem, []))
        if not found:
            problems.append(f"{texts[stem].name}: no audio file {stem}.wav (or .flac, .mp3, ...) next to it")
            continue
        where = found[0].name
        if len(found) > 1:
            problems.append(f"{where}: more than one audio file for {stem}.txt ({', '.join(p.name for p in found)}); keep one")
            continue
        if stem not in texts:
            problems.append(f"{where}: no transcript {stem}.txt next to it")
            continue
        try:
            text = _read_transcript(texts[stem])
        except DatasetError as e:
            problems += e.problems
            continue
        rows.append(Row({"audio": str(found[0]), "text": text}, where, folder))
    return rows


def _read_transcript(path: Path) -> str:
    """A NAME.txt's text without its surrounding whitespace (line ends as Python reads text: "\\r\\n" and "\\r" are "\\n")."""
    with _open_regular(path, MAX_TRANSCRIPT_BYTES, "a transcript", hint="a transcript is the text of one clip: keep it short") as f:
        raw = f.read(MAX_TRANSCRIPT_BYTES + 1)
    if len(raw) > MAX_TRANSCRIPT_BYTES:  # it grew since it was opened
        raise DatasetError(path, [f"{path.name}: more than the {_bytes(MAX_TRANSCRIPT_BYTES)} a transcript may be"])
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise DatasetError(path, [f"{path.name}: not UTF-8 text"]) from e
    return text.replace("\r\n", "\n").replace("\r", "\n").strip()


def _lines(path: Path) -> Iterator[tuple[int, str]]:
    """The lines of a JSONL or CSV with their numbers, decoded (UTF-8, a BOM dropped) one at a time and
    ending as they do in the file ("\\n", "\\r\\n", or "\\r" alone: a line too, as Python's text mode reads
    it; U+2028 is text, not a line end). A file that is not regular or is over `MAX_DATA_BYTES`, a line
    over `MAX_LINE_BYTES` or not UTF-8, raises `DatasetError` naming it: memory stays bounded."""
    what = "give a JSONL or CSV file (each row one line), or a folder of NAME.wav + NAME.txt pairs"
    with _open_regular(path, MAX_DATA_BYTES, "a dataset file", hint=what) as f:
        number = total = 0
        while raw := f.readline(MAX_LINE_BYTES + 1):
            total += len(raw)
            if len(raw) > MAX_LINE_BYTES:
                raise DatasetError(path, [f"{path.name}:{number + 1}: a line longer than {_bytes(MAX_LINE_BYTES)}"], hint=what)
            if total > MAX_DATA_BYTES:  # it grew since it was opened
                raise DatasetError(path, [f"{path.name}: more than the {_bytes(MAX_DATA_BYTES)} a dataset file may be"], hint=what)
            try:
                text = raw.decode("utf-8-sig" if number == 0 else "utf-8")
            except UnicodeDecodeError as e:
                raise DatasetError(
                    path, [f"{path.name}:{number + 1}: not UTF-8 text ({e.reason} at byte {e.start + 1} of the line)"], hint="save the file as UTF-8"
                ) from e
            for line in _LONE_CR.split(text):
                if line:
                    number += 1
                    yield number, line


def _open_regular(path: Path, limit: int, what: str, *, hint: str):
    """`path` opened for binary reading when it is a regular file (or a link to one) of at most
    `limit` bytes, else `DatasetError` saying what it is. A FIFO would block a reader and a device
    such as /dev/zero never ends: neither is read. The file is opened without blocking and checked
    again once open, so one swapped in after the first check is caught too."""
    try:
        kind, size = file_kind(os.stat(path).st_mode), 0
        if kind is None:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # no effect on a regular file's reads
            try:
                st = os.fstat(fd)
                kind, size = file_kind(st.st_mode), st.st_size
                if kind is None and size <= limit:
                    return os.fdopen(fd, "rb")
            except BaseException:
                os.close(fd)
                raise
            os.close(fd)
    except OSError as e:
        raise DatasetError(path, [f"{path.name}: cannot be read ({e.strerror or e})"], hint=hint) from e
    if kind is not None:
        raise DatasetError(path, [f"{path.name}: {kind}, not a regular file"], hint=hint)
    raise DatasetError(path, [f"{path.name}: {_bytes(size)}, more than the {_bytes(limit)} {what} may be"], hint=hint)


_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str | None:
    """None for a regular file, else what the file is ("a FIFO (named pipe)", "a character device", ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def missing_file(path: Path, label: str) -> str | None:
    """The problem of a row whose file is not there or not a regular file (None: it is one)."""
    if path.is_file():
        return None
    return f"{label}: no such file {path}" if not path.exists() else f"{label}: {path} is not a regular file"


def few(wheres: list[str], n: int = 3) -> str:
    """The first `n` of `wheres` (rows), and how many more."""
    return ", ".join(wheres[:n]) + (f" (and {len(wheres) - n} more)" if len(wheres) > n else "")


@dataclass(frozen=True)
class Clip:
    """A recording and its transcript, as a dataset's row names them (and the row's optional text
    fields a recipe reads, `extra`)."""

    audio: Path
    text: str
    where: str = field(default="", compare=False)  # its row, for messages ("train.csv:3", "utt3.wav")
    extra: dict[str, str] = field(default_factory=dict, compare=False)


def load_clips(path: str | Path, optional: tuple[str, ...] = (), aliases: dict[str, str] | None = None) -> list[Clip]:
    """The clips (an audio path and its transcript a row) of the dataset at `path`, or
    `DatasetError` listing every problem of its rows: rows without a path or a transcript, empty
    transcripts, the same clip twice, no rows at all. `optional`: the text fields a row may add
    (kept in `Clip.extra`; another name for one in `aliases`, taken when the field itself is not
    there)."""
    found = read_rows(path, columns="audio, text")
    problems = list(found.problems)
    clips: list[Clip] = []
    for row in found.rows:
        audio, text = row.fields.get("audio"), row.fields.get("text")
        given = {**{name: row.fields[alias] for alias, name in (aliases or {}).items() if alias in row.fields and name not in row.fields}, **row.fields}
        extra = {k: given[k] for k in optional if given.get(k) not in (None, "")}
        bad = [k for k, v in extra.items() if not isinstance(v, str)]
        if not isinstance(audio, str) or not audio.strip():
            problems.append(f'{row.where}: no audio path ("audio")' if audio in (None, "") else f'{row.where}: "audio" must be a path, got {audio!r}')
        elif not isinstance(text, str):
            problems.append(f'{row.where}: no transcript ("text")' if text is None else f'{row.where}: "text" must be a string, got {text!r}')
        elif not text.strip():
            problems.append(f"{row.where}: an empty transcript")
        elif bad:
            problems.append(f"{row.where}: {', '.join(repr(k) for k in bad)} must be text")
        else:
            clips.append(Clip(row.path(audio.strip()), text, row.where, extra))
    seen: dict[Path, list[str]] = {}
    for clip in clips:
        seen.setdefault(clip.audio, []).append(clip.where)
    problems += [f"{few(wheres)}: the same clip {path.name} more than once" for path, wheres in seen.items() if len(wheres) > 1]
    if not clips and not problems:
        problems.append("no clips")
    if problems:
        raise DatasetError(found.source, problems)
    return clips
