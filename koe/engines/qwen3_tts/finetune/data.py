"""A speaker dataset for Qwen3-TTS fine-tuning: read it, check it, prepare its codec codes.

This is the data step of upstream's recipe (QwenLM/Qwen3-TTS `finetuning/prepare_data.py` and the
README's "Input JSONL format") on koe's own codec and audio loading. Three steps:

`read_dataset(path, ref=None)` reads one of four layouts into `Clip`s, in order:
  * upstream's raw JSONL: one object a line, `{"audio": wav, "text": transcript, "ref_audio": wav}`,
    optional `language` (kept, unused by the recipe) and any other keys (kept and written back);
  * a prepared JSONL (every line also has `audio_codes`, (frames, 16) lists of ints): taken as is,
    its codes validated (16 codebooks, ints in 0..2047, at least one frame);
  * a CSV (`.csv`; `.tsv` for tabs) with a header: `audio`, `text`, optional `ref_audio`,
    optional `language`;
  * a folder of `NAME.wav` + `NAME.txt` pairs (any audio koe decodes: flac, ogg, mp3, ...), sorted
    by name; a transcript file's surrounding whitespace (its final newline) is not part of it.
  A JSONL or CSV must be a regular file of at most 2 GiB (`MAX_DATA_BYTES`: a prepared JSONL of
  some 500 hours) with lines of at most 1 MiB (`MAX_LINE_BYTES`: a 30 s clip's prepared row is
  about 35 KB), and a transcript file at most 1 MiB (`MAX_TRANSCRIPT_BYTES`). A file is read a
  line at a time, so `/dev/zero`, a FIFO or a huge file without newlines is refused in a moment,
  never read whole.
  Relative paths in a JSONL or CSV are relative to the folder of that file (upstream's script
  resolves them against its working directory instead); every path is made absolute. Rows without
  `ref_audio` take the `ref` the caller gives; with none given, the data's first `ref_audio`, and
  with none in the data either, the first clip (a note says so: upstream strongly recommends one
  reference for the whole set).

`check_dataset(dataset)` decodes every file before anything is trained and raises one
`DatasetError` listing every problem, each naming its row (`file:line`, or the clip's file name in
a folder): rows it could not read, missing or undecodable files, empty or whitespace-only
transcripts, silent clips (peak below -60 dBFS, or all zeros), clips shorter than one codec frame
(0.08 s) or longer than 30 s, references shorter than 1 s or longer than 30 s, the same clip (path
or file contents) twice, no rows. Upstream checks none of this: a bad row fails mid-run or, worse,
trains. The 30 s cap is koe's: upstream has none, but a batch is padded to its longest item twice
(the codec encodes 32 clips padded to the longest, and the training collate pads text + codes), so
one long recording multiplies the memory of its whole batch; 30 s is also koe's limit for clone
references. The 1 s reference minimum is koe's clone minimum: the speaker encoder itself runs on a
few mel frames, but less than a second of speech does not give a voice.

A reference that is not 24 kHz: upstream's recipe refuses it (`dataset.py` `extract_mels` asserts
24 kHz); koe resamples it to 24 kHz with `voice.to_codec_rate`, as upstream's inference does with a
clone reference. For such references only, koe trains where upstream would stop (a note says so).

`prepare(checked, codec_folder, out)` writes upstream's prepared JSONL: the rows with absolute
paths plus `audio_codes`, `json.dumps(..., ensure_ascii=False)` one object a line. Each clip is
loaded as upstream loads it (`librosa.load(sr=None, mono=True)`: `koe.audio.io.load_audio`, the same
float32 bits for every format libsndfile reads) and resampled to 24 kHz as upstream does
(`librosa.resample`, soxr_hq: `to_codec_rate`), and the clips are encoded in upstream's batches of
32 in file order, right-padded with zeros: the codec's encoder sees the padding, so a clip's codes
depend on its batch, and keeping upstream's batches keeps its codes. Next to the JSONL goes
`<name>.summary.json` (clips, seconds, frames, references, notes) for a user to read, holding also a
fingerprint of the inputs (paths, sizes, mtimes, texts, the codec's config and weights): a prepared
file whose inputs are unchanged is reused, not encoded again. Both files are written atomically.
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
import os
import re
import stat
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from koe.audio.errors import AudioError, AudioTooLong
from koe.audio.io import load_audio
from koe.engines.base import TrainingError
from koe.engines.qwen3_tts.voice import (
    MAX_REF_SECONDS,
    MIN_REF_SECONDS,
    SAMPLE_RATE,
    to_codec_rate,
)
from koe.runtime.files import atomic_file

__all__ = [
    "AUDIO_SUFFIXES",
    "BATCH_SIZE",
    "MAX_CLIP_SECONDS",
    "MAX_DATA_BYTES",
    "MAX_LINE_BYTES",
    "MAX_TRANSCRIPT_BYTES",
    "AudioInfo",
    "CheckedDataset",
    "Clip",
    "Dataset",
    "DatasetError",
    "Prepared",
    "check_dataset",
    "encode_batch",
    "load_dataset",
    "prepare",
    "read_dataset",
    "summary_path",
]

BATCH_SIZE = 32  # upstream's BATCH_INFER_NUM: clips encoded together (their codes depend on it)
NUM_CODEBOOKS = 16
CODEBOOK_SIZE = 2048
FRAME_SAMPLES = 1920  # 24 kHz samples per codec frame (12.5 frames a second)
MIN_CLIP_SECONDS = FRAME_SAMPLES / SAMPLE_RATE
MAX_CLIP_SECONDS = 30.0
SILENCE_DBFS = -60.0
AUDIO_SUFFIXES = frozenset({".wav", ".wave", ".flac", ".ogg", ".oga", ".opus", ".mp3", ".aif", ".aiff", ".m4a", ".aac", ".webm"})
FORMAT_VERSION = 1  # of the summary file and the fingerprint
KNOWN_FIELDS = ("audio", "text", "ref_audio", "language", "audio_codes")
SHOWN_PROBLEMS = 50  # listed in the error's message; all of them are in `.problems`
MAX_DATA_BYTES = 2 << 30  # a JSONL or CSV (a prepared JSONL: about 4 MB an hour of audio)
MAX_LINE_BYTES = 1 << 20  # a line of one, its line end included (a 30 s clip's prepared row: about 35 KB)
MAX_TRANSCRIPT_BYTES = 1 << 20  # a NAME.txt of a folder of pairs
_LONE_CR = re.compile(r"(?<=\r)(?!\n)")  # where a line ends at a "\r" alone (old Mac line ends)

Progress = Callable[[int, int], None]


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


# ------------------------------------------------------------------------------------------ records
@dataclass
class Clip:
    """One training row: a clip, its transcript and the speaker reference (absolute paths).

    `where` names the row for messages ("train.jsonl:3", "utt003.wav"); `codes` is the (frames, 16)
    int64 array of a prepared row. Neither takes part in `==`, so formats compare by content.
    """

    audio: Path
    text: str
    ref_audio: Path | None = None
    language: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # other keys of the row, written back
    where: str = field(default="", compare=False)
    codes: np.ndarray | None = field(default=None, compare=False, repr=False)

    def line(self, codes: list | None = None) -> str:
        """This row as a line of upstream's prepared JSONL (`codes`, else its own, as `audio_codes`)."""
        obj: dict[str, Any] = {"audio": str(self.audio), "text": self.text, "ref_audio": str(self.ref_audio)}
        if self.language is not None:
            obj["language"] = self.language
        obj.update(self.extra)
        obj["audio_codes"] = codes if codes is not None else self.codes.tolist()
        return json.dumps(obj, ensure_ascii=False) + "\n"


@dataclass
class Dataset:
    """What `read_dataset` found: the clips in order, the problems met while reading, notes for the user."""

    source: Path
    kind: str  # "jsonl" (upstream's raw JSONL), "prepared", "csv" or "pairs"
    clips: list[Clip]
    problems: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    given_ref: Path | None = None
    first_clip_ref: Path | None = None  # set when no reference was given or named: the first clip stands in

    @property
    def root(self) -> Path:
        """The folder the data's relative paths are taken from (and shown relative to)."""
        return self.source if self.source.is_dir() else self.source.parent

    @property
    def prepared(self) -> bool:
        return bool(self.clips) and all(c.codes is not None for c in self.clips)


@dataclass(frozen=True)
class AudioInfo:
    """A decoded file's length, rate and peak; `frames`: the codec frames it gives (ceil(24 kHz samples / 1920))."""

    seconds: float
    sample_rate: int
    peak_dbfs: float
    frames: int


@dataclass
class CheckedDataset:
    """A dataset that passed `check_dataset`, with what decoding its files found."""

    dataset: Dataset
    audio: list[AudioInfo | None]  # per clip; None for a prepared row (its audio is not read)
    references: dict[Path, AudioInfo]
    notes: list[str]  # the dataset's and the check's: what the user should know before training

    @property
    def clips(self) -> list[Clip]:
        return self.dataset.clips

    def frames(self) -> list[int]:
        return [len(c.codes) if c.codes is not None else a.frames for c, a in zip(self.clips, self.audio)]

    def summary(self) -> dict[str, Any]:
        """Clips, total seconds and codec frames, sample rates, references: what a user checks first."""
        frames = self.frames()
        seconds = [a.seconds if a is not None else f * FRAME_SAMPLES / SAMPLE_RATE for a, f in zip(self.audio, frames)]
        rates: dict[str, int] = {}
        for a in self.audio:
            if a is not None:
                rates[str(a.sample_rate)] = rates.get(str(a.sample_rate), 0) + 1
        refs = [
            {"path": str(p), "seconds": round(i.seconds, 3), "sample_rate": i.sample_rate, "rows": sum(c.ref_audio == p for c in self.clips)}
            for p, i in self.references.items()
        ]
        return {
            "source": str(self.dataset.source),
            "kind": self.dataset.kind,
            "clips": len(self.clips),
            "seconds": round(sum(seconds), 3),
            "frames": sum(frames),
            "shortest_seconds": round(min(seconds), 3),
            "longest_seconds": round(max(seconds), 3),
            "sample_rates": rates,
            "references": refs,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Prepared:
    """The prepared JSONL, its summary (also in `summary_path`), and whether an earlier one was reused."""

    jsonl: Path
    summary_path: Path
    summary: dict[str, Any]
    reused: bool


# ------------------------------------------------------------------------------------------ reading
def read_dataset(path: str | Path, *, ref: str | Path | None = None) -> Dataset:
    """Read a JSONL, CSV or folder of pairs (see the module docstring); problems are collected in
    `Dataset.problems` for `check_dataset` to report with the rest. A path that does not exist, a
    file that is not a regular file, is over the caps or is not UTF-8 text, raises `DatasetError` at once."""
    source = Path(os.path.abspath(path))
    given = Path(os.path.abspath(ref)) if ref is not None else None
    if not source.exists():
        raise DatasetError(source, [f"{source}: no such file or folder"], hint="give a JSONL or CSV file, or a folder of NAME.wav + NAME.txt pairs")
    problems: list[str] = []
    if source.is_dir():
        kind, clips = "pairs", _read_pairs(source, given, problems)
    elif source.suffix.lower() in (".csv", ".tsv"):
        kind, clips = "csv", _read_csv(source, problems)
    else:
        kind, clips = "jsonl", _read_jsonl(source, problems)
    if kind == "jsonl":
        with_codes = [c.where for c in clips if c.codes is not None]
        without = [c.where for c in clips if c.codes is None]
        if with_codes and without:
            problems.append(f"{_few(with_codes)} have audio_codes but {_few(without)} do not: give a raw JSONL (no audio_codes) or a fully prepared one")
        elif with_codes:
            kind = "prepared"
    dataset = Dataset(source, kind, clips, problems, given_ref=given)
    _assign_references(dataset)
    return dataset


def _read_jsonl(path: Path, problems: list[str]) -> list[Clip]:
    clips = []
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
        clip = _clip(obj, path.parent, where, problems, codes=True)
        if clip is not None:
            clips.append(clip)
    return clips


def _read_csv(path: Path, problems: list[str]) -> list[Clip]:
    lines = _lines(path)
    reader = csv.reader((line for _, line in lines), delimiter="\t" if path.suffix.lower() == ".tsv" else ",")
    clips: list[Clip] = []
    try:
        header = next(reader, None)
        if header is None:
            return []
        names = [h.strip().lower() for h in header]
        missing = [n for n in ("audio", "text") if n not in names]
        if missing:
            problems.append(
                f"{path.name}:1: the header has no {' or '.join(repr(m) for m in missing)} column "
                f"(it has {', '.join(repr(h) for h in header)}); the columns are audio, text, ref_audio, language"
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
            clip = _clip(dict(zip(names, row)), path.parent, where, problems, codes=False)
            if clip is not None:
                clips.append(clip)
    except csv.Error as e:  # a field over csv's limit (128 KiB), a stray NUL: the rows after it are not read
        problems.append(f"{path.name}:{reader.line_num}: not valid CSV ({e}); the rows after it were not read")
    finally:
        lines.close()
    return clips


def _read_pairs(folder: Path, given_ref: Path | None, problems: list[str]) -> list[Clip]:
    audio: dict[str, list[Path]] = {}
    texts: dict[str, Path] = {}
    for p in folder.iterdir():
        if p.name.startswith(".") or p.is_dir() or p == given_ref:
            continue  # a FIFO or device named like a clip or transcript is kept: it is refused by name below
        if p.suffix.lower() in AUDIO_SUFFIXES:
            audio.setdefault(p.stem, []).append(p)
        elif p.suffix.lower() == ".txt":
            texts[p.stem] = p
    clips = []
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
        clips.append(Clip(audio=found[0], text=text, where=where))
    return clips


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
        kind, size = _kind(os.stat(path).st_mode), 0
        if kind is None:
            fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))  # no effect on a regular file's reads
            try:
                st = os.fstat(fd)
                kind, size = _kind(st.st_mode), st.st_size
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


def _kind(mode: int) -> str | None:
    """None for a regular file, else what the file is ("a FIFO (named pipe)", "a character device", ...)."""
    if stat.S_ISREG(mode):
        return None
    return next((name for test, name in _KINDS if test(mode)), "not a file")


def _bytes(n: int) -> str:
    for unit, size in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.3g} {unit}"
    return f"{n} bytes"


def _clip(obj: dict, base: Path, where: str, problems: list[str], *, codes: bool) -> Clip | None:
    """A row (JSON object or CSV row) as a Clip; its problems go to `problems` (None if unusable)."""
    found = len(problems)
    audio, text = obj.get("audio"), obj.get("text")
    if not isinstance(audio, str) or not audio.strip():
        problems.append(f'{where}: no audio path ("audio")' if audio in (None, "") else f'{where}: "audio" must be a path, got {audio!r}')
    if text is None:
        problems.append(f'{where}: no transcript ("text")')
    elif not isinstance(text, str):
        problems.append(f'{where}: "text" must be a string, got {text!r}')
    ref, language = _stripped(obj.get("ref_audio")), _stripped(obj.get("language"))
    if ref is not None and not isinstance(ref, str):
        problems.append(f'{where}: "ref_audio" must be a path, got {ref!r}')
    if language is not None and not isinstance(language, str):
        problems.append(f'{where}: "language" must be a string, got {language!r}')
    array = None
    if codes and "audio_codes" in obj:
        array = _codes(obj["audio_codes"], where, problems)
    if len(problems) > found:
        return None
    extra = {k: v for k, v in obj.items() if k not in KNOWN_FIELDS or (k == "audio_codes" and not codes)}
    return Clip(
        audio=_absolute(audio.strip(), base),
        text=text,
        ref_audio=_absolute(ref, base) if ref else None,
        language=language,
        extra=extra,
        where=where,
        codes=array,
    )


def _codes(value: Any, where: str, problems: list[str]) -> np.ndarray | None:
    """A prepared row's `audio_codes` as (frames, 16) int64, or a problem."""
    shape_problem = f"{where}: audio_codes must be a (frames, {NUM_CODEBOOKS}) list of lists of ints"
    try:
        array = np.asarray(value)
    except ValueError:  # ragged
        problems.append(shape_problem)
        return None
    if array.ndim != 2 or array.dtype.kind not in "iu" or array.dtype == np.bool_:
        detail = f", got shape {array.shape}" if array.dtype.kind in "iu" else ""
        problems.append(shape_problem + detail)
        return None
    if array.shape[1] != NUM_CODEBOOKS:
        problems.append(f"{where}: audio_codes has {array.shape[1]} codebooks, expected {NUM_CODEBOOKS}")
        return None
    if array.shape[0] == 0:
        problems.append(f"{where}: audio_codes has no frames")
        return None
    if array.min() < 0 or array.max() >= CODEBOOK_SIZE:
        problems.append(f"{where}: audio_codes outside 0..{CODEBOOK_SIZE - 1} (from {array.min()} to {array.max()})")
        return None
    return array.astype(np.int64)


def _stripped(value: Any) -> Any:
    """A string field without surrounding whitespace, None when empty (a CSV's empty cell)."""
    if isinstance(value, str):
        value = value.strip()
    return value if value not in ("", None) else None


def _absolute(path: str, base: Path) -> Path:
    """`path` made absolute against `base` (a JSONL's or CSV's folder), normalised, symlinks kept."""
    return Path(os.path.abspath(base / path))


def _few(wheres: list[str], n: int = 3) -> str:
    return ", ".join(wheres[:n]) + (f" (and {len(wheres) - n} more)" if len(wheres) > n else "")


def _assign_references(dataset: Dataset) -> None:
    """Give rows without `ref_audio` one: the caller's, else the data's first, else the first clip."""
    clips, given = dataset.clips, dataset.given_ref
    if not clips:
        return
    missing = [i for i, c in enumerate(clips) if c.ref_audio is None]
    own = next((c.ref_audio for c in clips if c.ref_audio is not None), None)
    if missing:
        if given is not None:
            fallback = given
        elif own is not None:
            fallback = own
            dataset.notes.append(f"{len(missing)} rows have no ref_audio: they use {_shown(own, dataset.root)}, the first in the data")
        else:
            fallback = dataset.first_clip_ref = clips[0].audio
            dataset.notes.append(
                f"no reference given and none in the data: the first clip ({clips[0].where}, "
                f"{_shown(fallback, dataset.root)}) is the reference; a clean 3-10 s clip of the speaker works best"
            )
        for i in missing:
            clips[i] = replace(clips[i], ref_audio=fallback)
    elif given is not None:
        dataset.notes.append(f"every row names its own ref_audio: the reference given ({_shown(given, dataset.root)}) is not used")
    distinct = list(dict.fromkeys(c.ref_audio for c in clips))
    if len(distinct) > 1:
        dataset.notes.append(
            f"{len(distinct)} different references: upstream strongly recommends one for the whole set; "
            f"the speaker embedding the new voice keeps is taken from the first batch's first row ({_shown(distinct[0], dataset.root)})"
        )


# ------------------------------------------------------------------------------------------ checking
def load_dataset(path: str | Path, *, ref: str | Path | None = None, max_seconds: float = MAX_CLIP_SECONDS) -> CheckedDataset:
    """`read_dataset` then `check_dataset`: a dataset ready to prepare, or one `DatasetError` with every problem."""
    return check_dataset(read_dataset(path, ref=ref), max_seconds=max_seconds)


def check_dataset(dataset: Dataset, *, max_seconds: float = MAX_CLIP_SECONDS) -> CheckedDataset:
    """Decode every clip and reference and check the rows (see the module docstring); raise one
    `DatasetError` with the problems found while reading and these. A prepared row's `audio` is not
    read (training uses only its codes, text and reference): its codes must fit `max_seconds`."""
    problems, notes = list(dataset.problems), []
    root = dataset.root
    if not dataset.clips and not problems:
        empty = " (no NAME.wav + NAME.txt pairs in the folder)" if dataset.kind == "pairs" else ""
        problems.append(f"{dataset.source.name}: no clips{empty}")
    infos: list[AudioInfo | None] = []
    decoded: dict[Path, AudioInfo | None] = {}
    first_row: dict[Path, str] = {}  # audio path -> the first row with it
    first_file: dict[str, str] = {}  # file contents' digest -> the first row with them
    for clip in dataset.clips:
        where, shown = clip.where, _shown(clip.audio, root)
        if not clip.text.strip():
            problems.append(f"{where}: the transcript is empty")
        if clip.audio in first_row:
            problems.append(f"{where}: the same clip as {first_row[clip.audio]} ({shown})")
            infos.append(decoded[clip.audio])
            continue
        first_row[clip.audio] = where
        if clip.codes is not None:
            infos.append(decoded.setdefault(clip.audio, None))
            if len(clip.codes) > max_seconds * SAMPLE_RATE / FRAME_SAMPLES:
                seconds = len(clip.codes) * FRAME_SAMPLES / SAMPLE_RATE
                problems.append(f"{where}: audio_codes has {len(clip.codes)} frames ({seconds:.1f} s); at most {max_seconds:g} s per clip")
            continue
        info = _check_audio(clip.audio, f"{where}: audio {shown}", problems, min_seconds=MIN_CLIP_SECONDS, max_seconds=max_seconds, kind="clip")
        infos.append(decoded.setdefault(clip.audio, info))
        if info is not None:
            digest = _file_digest(clip.audio)
            if digest in first_file:
                problems.append(f"{where}: audio {shown} has the same contents as the clip of {first_file[digest]}")
            first_file.setdefault(digest, where)
    references = {}
    for ref in dict.fromkeys(c.ref_audio for c in dataset.clips):
        rows = [c.where for c in dataset.clips if c.ref_audio == ref]
        if ref == dataset.given_ref:
            label = "the reference given"
        elif ref == dataset.first_clip_ref:
            label = "no reference given, so the first clip is the reference"
        else:
            label = rows[0] + (f" (and {len(rows) - 1} more rows)" if len(rows) > 1 else "")
        info = _check_audio(
            ref, f"{label}: reference {_shown(ref, root)}", problems, min_seconds=MIN_REF_SECONDS, max_seconds=MAX_REF_SECONDS, kind="reference"
        )
        if info is not None:
            references[ref] = info
            if info.sample_rate != SAMPLE_RATE:
                notes.append(
                    f"reference {_shown(ref, root)} is {info.sample_rate} Hz: koe resamples it to 24 kHz as upstream's "
                    "inference does (upstream's training recipe accepts only 24 kHz references)"
                )
    if problems:
        raise DatasetError(dataset.source, problems)
    return CheckedDataset(dataset, infos, references, dataset.notes + notes)


def _check_audio(path: Path, label: str, problems: list[str], *, min_seconds: float, max_seconds: float, kind: str) -> AudioInfo | None:
    """Decode `path` (at most `max_seconds` of it) and check it; its problems go to `problems`."""
    if not path.is_file():
        kind = _kind(path.stat().st_mode) if path.exists() else None
        problems.append(f"{label}: {kind}, not a regular file" if kind else f"{label}: no such file")
        return None
    try:
        audio, sr = load_audio(path, max_seconds=max_seconds)
    except AudioTooLong as e:
        length = f"{e.seconds:.1f} s long" if e.seconds is not None else f"longer than {max_seconds:g} s"
        cut = "cut long recordings into sentences" if kind == "clip" else "cut a clean 3-10 s clip"
        problems.append(f"{label}: {length}; a {kind} may be at most {max_seconds:g} s ({cut})")
        return None
    except AudioError as e:
        problems.append(f"{label}: cannot be used: {e}")
        return None
    seconds = len(audio) / sr
    peak = float(np.abs(audio).max())
    dbfs = 20 * math.log10(peak) if peak > 0 else -math.inf
    samples = len(audio) if sr == SAMPLE_RATE else math.ceil(len(audio) * (SAMPLE_RATE / sr))  # as librosa.resample
    frames = -(-samples // FRAME_SAMPLES)
    if dbfs < SILENCE_DBFS:
        problems.append(f"{label}: silent (peak {dbfs:.0f} dBFS, below {SILENCE_DBFS:.0f} dBFS)")
    if (samples < FRAME_SAMPLES) if kind == "clip" else (seconds < min_seconds):
        need = f"one codec frame ({min_seconds:.2f} s)" if kind == "clip" else f"{min_seconds:g} s (3-10 s works best)"
        problems.append(f"{label}: {seconds:.3f} s long, shorter than {need}")
    return AudioInfo(seconds, sr, dbfs, frames)


def _shown(path: Path, root: Path) -> str:
    """`path` relative to the dataset's folder when inside it, else as is: short and unambiguous."""
    try:
        return str(path.relative_to(root))
    except ValueError:
        return str(path)


def _file_digest(path: Path) -> str:
    h = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


# ------------------------------------------------------------------------------------------ preparing
def summary_path(jsonl: str | Path) -> Path:
    """Where the summary of a prepared JSONL lives: `train.jsonl` -> `train.summary.json`."""
    jsonl = Path(jsonl)
    return jsonl.with_name(jsonl.stem + ".summary.json")


def prepare(
    checked: CheckedDataset, codec_folder: str | Path, out: str | Path, *, codec=None, device: str = "cpu", progress: Progress | None = None
) -> Prepared:
    """Write upstream's prepared JSONL of `checked` to `out` (and its summary next to it).

    `codec_folder` is the model's `speech_tokenizer/` folder (loaded on `device` when there is work
    to do, unless a loaded `SpeechTokenizer` is passed as `codec`). `progress(done, total)` is called
    with 0 first, then after each batch of 32. A previous `out` whose summary's fingerprint matches
    these inputs (and whose contents match the summary) is reused: nothing is encoded, `progress`
    is not called, `reused` is True. A prepared dataset's codes are written as they are.
    """
    dataset = checked.dataset
    out = Path(os.path.abspath(out))
    summary_file = summary_path(out)
    if out == dataset.source:
        raise ValueError(f"the prepared JSONL would overwrite the dataset itself ({out}); write it elsewhere")
    fingerprint = _fingerprint(dataset, Path(codec_folder))
    previous = _reusable(out, summary_file, fingerprint)
    if previous is not None:
        return Prepared(out, summary_file, previous, reused=True)
    out.parent.mkdir(parents=True, exist_ok=True)
    clips, digest, frames = dataset.clips, hashlib.sha256(), 0
    with _atomic_text(out) as f:
        if dataset.prepared:
            for clip in clips:
                f.write(line := clip.line())
                digest.update(line.encode("utf-8"))
                frames += len(clip.codes)
        else:
            if codec is None:
                from koe.engines.qwen3_tts.codec.tokenizer import SpeechTokenizer

                codec = SpeechTokenizer.from_folder(codec_folder, device=device)
            if progress:
                progress(0, len(clips))
            for start in range(0, len(clips), BATCH_SIZE):
                batch = clips[start : start + BATCH_SIZE]
                for clip, codes in zip(batch, encode_batch(codec, [c.audio for c in batch])):
                    f.write(line := clip.line(codes.cpu().tolist()))
                    digest.update(line.encode("utf-8"))
                    frames += int(codes.shape[0])
                if progress:
                    progress(start + len(batch), len(clips))
    summary = checked.summary()
    summary.update(
        frames=frames,
        jsonl=str(out),
        jsonl_sha256=digest.hexdigest(),
        codec=str(Path(codec_folder).absolute()),
        device=None if codec is None else str(codec.device),
        batch_size=BATCH_SIZE,
        format=FORMAT_VERSION,
        fingerprint=fingerprint,
    )
    with _atomic_text(summary_file) as f:
        f.write(json.dumps(summary, indent=2, ensure_ascii=False) + "\n")
    return Prepared(out, summary_file, summary, reused=False)


def encode_batch(codec, paths: list[Path]) -> list:
    """Codes ((frames, 16) int64 tensors) of one batch of files, as upstream's `Qwen3TTSTokenizer.encode(paths)`:
    each loaded at its own rate and mixed to mono, resampled to 24 kHz, the batch right-padded with zeros."""
    import torch

    wavs = [torch.from_numpy(to_codec_rate(*load_audio(p))) for p in paths]
    return codec.encode_list(wavs)


def _fingerprint(dataset: Dataset, codec_folder: Path) -> str:
    """What the prepared file depends on: each row's paths, file size and mtime, text and other
    fields (or its codes), the codec's config and weights (size and mtime), the batch size."""
    h = hashlib.sha256()
    codec = None if dataset.prepared else _codec_fingerprint(codec_folder)
    h.update(json.dumps({"format": FORMAT_VERSION, "batch_size": BATCH_SIZE, "codec": codec}).encode())
    for c in dataset.clips:
        row = [str(c.audio), _stat(c.audio), c.text, str(c.ref_audio), c.language, c.extra]
        if c.codes is not None:
            row.append(hashlib.sha256(c.codes.tobytes()).hexdigest() + str(c.codes.shape))
        h.update(json.dumps(row, ensure_ascii=False, sort_keys=True, default=str).encode("utf-8") + b"\n")
    return h.hexdigest()


def _codec_fingerprint(folder: Path) -> str:
    h = hashlib.sha256()
    for name in ("config.json", "preprocessor_config.json"):
        p = folder / name
        h.update(name.encode() + (p.read_bytes() if p.is_file() else b"(missing)"))
    for p in sorted(folder.glob("*.safetensors")):
        h.update(f"{p.name}:{_stat(p)}".encode())
    return h.hexdigest()


def _stat(path: Path) -> list[int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return [st.st_size, st.st_mtime_ns]


def _reusable(out: Path, summary_file: Path, fingerprint: str) -> dict | None:
    """The summary of a previous `out` made from these very inputs, if `out` is still what it wrote."""
    try:
        summary = json.loads(summary_file.read_text(encoding="utf-8"))
        if not isinstance(summary, dict) or summary.get("fingerprint") != fingerprint:
            return None
        return summary if _file_digest(out) == summary.get("jsonl_sha256") else None
    except (OSError, ValueError):
        return None


def _atomic_text(path: Path):
    """A UTF-8 text file written to a temporary name in `path`'s folder, renamed to `path` when complete."""
    return atomic_file(path, "w", encoding="utf-8")
