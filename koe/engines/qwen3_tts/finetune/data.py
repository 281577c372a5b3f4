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

import hashlib
import json
import math
import os
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from koe.audio.errors import AudioError, AudioTooLong
from koe.audio.io import load_audio
from koe.engines.dataset import AUDIO_SUFFIXES, MAX_DATA_BYTES, MAX_LINE_BYTES, MAX_TRANSCRIPT_BYTES, DatasetError, Row, few, file_kind, read_rows
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
FORMAT_VERSION = 1  # of the summary file and the fingerprint
KNOWN_FIELDS = ("audio", "text", "ref_audio", "language", "audio_codes")

Progress = Callable[[int, int], None]


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
    given = Path(os.path.abspath(ref)) if ref is not None else None
    found = read_rows(path, columns="audio, text, ref_audio, language", skip=given)
    kind, problems = found.kind, found.problems
    clips = [clip for row in found.rows if (clip := _clip(row, problems, codes=kind == "jsonl")) is not None]
    if kind == "jsonl":
        with_codes = [c.where for c in clips if c.codes is not None]
        without = [c.where for c in clips if c.codes is None]
        if with_codes and without:
            problems.append(f"{few(with_codes)} have audio_codes but {few(without)} do not: give a raw JSONL (no audio_codes) or a fully prepared one")
        elif with_codes:
            kind = "prepared"
    dataset = Dataset(found.source, kind, clips, problems, given_ref=given)
    _assign_references(dataset)
    return dataset


def _clip(row: Row, problems: list[str], *, codes: bool) -> Clip | None:
    """A row as a Clip; its problems go to `problems` (None if unusable)."""
    obj, where = row.fields, row.where
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
        audio=row.path(audio.strip()),
        text=text,
        ref_audio=row.path(ref) if ref else None,
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
        kind = file_kind(path.stat().st_mode) if path.exists() else None
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
