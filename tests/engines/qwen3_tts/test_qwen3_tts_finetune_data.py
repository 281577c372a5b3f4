"""The fine-tuning data stage: reading a speaker dataset (JSONL, CSV, folder of pairs), checking it
(every problem at once, each naming its row), and preparing its codec codes as upstream's
`prepare_data.py` does, bit for bit (oracle: upstream qwen-tts on the same random-weight codec)."""

from __future__ import annotations

import csv
import json
import os
import shutil
import threading
import tracemalloc
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from finetune_data import TEXTS, random_codes_jsonl, voiced, write_dataset
from oracle_harness import run_oracle, same

from koe.engines.qwen3_tts.codec.tokenizer import SpeechTokenizer
from koe.engines.qwen3_tts.finetune.data import (
    BATCH_SIZE,
    MAX_LINE_BYTES,
    MAX_TRANSCRIPT_BYTES,
    DatasetError,
    check_dataset,
    encode_batch,
    load_dataset,
    prepare,
    read_dataset,
    summary_path,
)
from koe.engines.qwen3_tts.fixtures import write_random_model


@pytest.fixture(scope="module")
def codec_folder(session_tmp: Path) -> Path:
    folder = session_tmp / "finetune-data-base"
    if not folder.exists():
        write_random_model(folder, "base", "tiny-1b7")
    return folder / "speech_tokenizer"


@pytest.fixture()
def data(tmp_path: Path) -> dict[str, Path]:
    return write_dataset(tmp_path / "data")


def _jsonl(path: Path, rows: list) -> Path:
    """Write rows (dicts, or raw strings for lines that are not JSON) as a JSONL file."""
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r, ensure_ascii=False)) + "\n" for r in rows), encoding="utf-8")
    return path


def _problems(path, **kwargs) -> list[str]:
    with pytest.raises(DatasetError) as info:
        load_dataset(path, **kwargs)
    err = info.value
    assert err.problems and err.hint and err.message.startswith(f"{len(err.problems)} problem")
    assert all(p in err.message for p in err.problems[:50]) and err.hint in str(err)
    return err.problems


def _assert_problems(problems: list[str], expected: list[tuple[str, str]]) -> None:
    """Each (row, words) appears in one problem starting with that row, and nothing else is reported."""
    for where, words in expected:
        assert any(p.startswith((where + ":", where + " (")) for p in problems if words in p), (where, words, problems)
    assert len(problems) == len(expected), problems


# ------------------------------------------------------------------------------------------ reading
def test_three_formats_give_the_same_records(data):
    jsonl, table = read_dataset(data["jsonl"]), read_dataset(data["csv"])
    pairs = read_dataset(data["pairs"], ref=data["ref"])
    assert (jsonl.kind, table.kind, pairs.kind) == ("jsonl", "csv", "pairs")
    assert len(jsonl.clips) == 11 and jsonl.clips == table.clips
    assert [(c.audio.name, c.text, c.ref_audio, c.language, c.extra) for c in pairs.clips] == [
        (c.audio.name, c.text, c.ref_audio, c.language, c.extra) for c in jsonl.clips
    ]
    assert [c.text for c in jsonl.clips] == TEXTS and all(c.ref_audio == data["ref"] for c in jsonl.clips)
    assert all(c.audio.is_absolute() and c.audio.parent == data["pairs"] for c in pairs.clips)
    assert [c.where for c in jsonl.clips][:2] == ["train_raw.jsonl:1", "train_raw.jsonl:2"]
    assert [c.where for c in table.clips][:2] == ["train.csv:2", "train.csv:3"]
    assert pairs.clips[0].where == "utt000.wav"
    assert not (jsonl.problems or table.problems or pairs.problems or jsonl.notes or pairs.notes)
    checked = [check_dataset(d) for d in (jsonl, table, pairs)]
    assert checked[0].summary()["frames"] == checked[1].summary()["frames"] == checked[2].summary()["frames"]


def test_relative_paths_are_taken_from_the_files_folder(data, tmp_path, monkeypatch):
    folder = data["jsonl"].parent
    rows = [{"audio": f"clips/utt00{i}.wav", "text": TEXTS[i], "ref_audio": "ref.wav", "language": "English", "speaker": "me"} for i in range(3)]
    _jsonl(folder / "relative.jsonl", rows)
    with (folder / "relative.csv").open("w", newline="", encoding="utf-8") as f:
        w = csv.writer(f)
        w.writerow(["audio", "text", "ref_audio", "language", "speaker"])
        w.writerows([[r["audio"], r["text"], r["ref_audio"], r["language"], r["speaker"]] for r in rows])
    monkeypatch.chdir(tmp_path)  # not the data's folder
    jsonl, table = read_dataset(folder / "relative.jsonl"), read_dataset(folder / "relative.csv")
    assert jsonl.clips == table.clips
    assert [c.audio for c in jsonl.clips] == [data["clips"] / f"utt00{i}.wav" for i in range(3)]
    assert jsonl.clips[0].ref_audio == data["ref"] and jsonl.clips[0].language == "English"
    assert jsonl.clips[0].extra == {"speaker": "me"}
    line = json.loads(jsonl.clips[0].line([[0] * 16]))
    assert line == {
        "audio": str(data["clips"] / "utt000.wav"),
        "text": TEXTS[0],
        "ref_audio": str(data["ref"]),
        "language": "English",
        "speaker": "me",
        "audio_codes": [[0] * 16],
    }


def test_reference_fallbacks(data, tmp_path):
    pairs = read_dataset(data["pairs"])  # no reference anywhere: the first clip, said so
    assert all(c.ref_audio == data["pairs"] / "utt000.wav" for c in pairs.clips)
    assert len(pairs.notes) == 1 and "the first clip (utt000.wav" in pairs.notes[0]
    assert _problems(data["pairs"]) == [  # and is checked as a reference: these clips are too short for one
        "no reference given, so the first clip is the reference: reference utt000.wav: 0.800 s long, shorter than 1 s (3-10 s works best)"
    ]
    rows = [json.loads(line) for line in data["jsonl"].read_text().splitlines()]
    other = tmp_path / "other_ref.wav"
    sf.write(other, voiced(2.0, 200.0, 24000, seed=7), 24000)
    for r in rows[1:]:
        del r["ref_audio"]
    partial = read_dataset(_jsonl(tmp_path / "partial.jsonl", rows))  # the data's own reference for the others
    assert all(c.ref_audio == data["ref"] for c in partial.clips) and "10 rows have no ref_audio" in partial.notes[0]
    given = read_dataset(tmp_path / "partial.jsonl", ref=other)  # the caller's for rows without one
    assert given.clips[0].ref_audio == data["ref"] and all(c.ref_audio == other for c in given.clips[1:])
    assert any("2 different references" in n and "upstream strongly recommends one" in n for n in given.notes)
    unused = read_dataset(data["jsonl"], ref=other)
    assert all(c.ref_audio == data["ref"] for c in unused.clips) and "is not used" in unused.notes[0]


def test_a_reference_not_at_24k_is_resampled_and_noted(data, tmp_path):
    ref16 = tmp_path / "ref16k.wav"
    sf.write(ref16, voiced(3.0, 150.0, 16000, seed=3), 16000)
    checked = load_dataset(data["pairs"], ref=ref16)
    assert checked.references[ref16].sample_rate == 16000
    assert any("16000 Hz" in n and "resamples it to 24 kHz" in n for n in checked.notes)


# ------------------------------------------------------------------------------------------ checking
def test_every_bad_row_is_reported_at_once(data, tmp_path):
    folder = tmp_path / "bad"
    folder.mkdir()
    good, ref = str(data["clips"] / "utt000.wav"), str(data["ref"])
    (folder / "noise.wav").write_bytes(b"this is not audio at all" * 20)
    sf.write(folder / "zeros.wav", np.zeros(24000, dtype=np.float32), 24000)
    sf.write(folder / "quiet.wav", (voiced(1.0, 120.0) / 0.3 * 10 ** (-70 / 20)).astype(np.float32), 24000, subtype="FLOAT")
    sf.write(folder / "short.wav", voiced(0.05, 120.0), 24000)
    sf.write(folder / "long.wav", voiced(31.0, 120.0), 24000)
    sf.write(folder / "short_ref.wav", voiced(0.5, 150.0), 24000)
    shutil.copy(good, folder / "copy.wav")
    rows = [
        {"audio": good, "text": "fine", "ref_audio": ref},  # 1
        {"audio": "missing.wav", "text": "a", "ref_audio": ref},  # 2
        {"audio": "noise.wav", "text": "b", "ref_audio": ref},  # 3
        {"audio": str(data["clips"] / "utt001.wav"), "text": "", "ref_audio": ref},  # 4
        {"audio": str(data["clips"] / "utt002.wav"), "text": " \t ", "ref_audio": ref},  # 5
        {"audio": "zeros.wav", "text": "c", "ref_audio": ref},  # 6
        {"audio": "quiet.wav", "text": "d", "ref_audio": ref},  # 7
        {"audio": "short.wav", "text": "e", "ref_audio": ref},  # 8
        {"audio": "long.wav", "text": "f", "ref_audio": ref},  # 9
        {"audio": good, "text": "fine again", "ref_audio": ref},  # 10
        {"audio": "copy.wav", "text": "g", "ref_audio": ref},  # 11
        '{"audio": "x.wav", "text": ',  # 12
        {"audio": str(data["clips"] / "utt003.wav"), "ref_audio": ref},  # 13
        {"audio": str(data["clips"] / "utt004.wav"), "text": 5},  # 14
        "",  # 15: blank lines are skipped
        {"audio": str(data["clips"] / "utt005.wav"), "text": "h", "ref_audio": "short_ref.wav"},  # 16
        ["not", "an", "object"],  # 17
    ]
    problems = _problems(_jsonl(folder / "train.jsonl", rows))
    _assert_problems(
        problems,
        [
            ("train.jsonl:2", "audio missing.wav: no such file"),
            ("train.jsonl:3", "audio noise.wav: cannot be used"),
            ("train.jsonl:4", "the transcript is empty"),
            ("train.jsonl:5", "the transcript is empty"),
            ("train.jsonl:6", "audio zeros.wav: cannot be used: audio is all silence"),
            ("train.jsonl:7", "audio quiet.wav: silent (peak -70 dBFS, below -60 dBFS)"),
            ("train.jsonl:8", "audio short.wav: 0.050 s long, shorter than one codec frame (0.08 s)"),
            ("train.jsonl:9", "audio long.wav: 31.0 s long; a clip may be at most 30 s"),
            ("train.jsonl:10", "the same clip as train.jsonl:1"),
            ("train.jsonl:11", "audio copy.wav has the same contents as the clip of train.jsonl:1"),
            ("train.jsonl:12", "not valid JSON"),
            ("train.jsonl:13", 'no transcript ("text")'),
            ("train.jsonl:14", '"text" must be a string, got 5'),
            ("train.jsonl:16", "reference short_ref.wav: 0.500 s long, shorter than 1 s"),
            ("train.jsonl:17", "not a JSON object"),
        ],
    )


def test_a_bad_reference_names_its_rows(data, tmp_path):
    rows = [json.loads(line) for line in data["jsonl"].read_text().splitlines()]
    for r in rows:
        r["ref_audio"] = "nowhere.wav"
    problems = _problems(_jsonl(data["jsonl"].parent / "noref.jsonl", rows))
    assert problems == ["noref.jsonl:1 (and 10 more rows): reference nowhere.wav: no such file"]
    assert _problems(data["pairs"], ref=tmp_path / "given.wav") == [f"the reference given: reference {tmp_path / 'given.wav'}: no such file"]


def test_no_rows(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n\n", encoding="utf-8")
    assert _problems(tmp_path / "empty.jsonl") == ["empty.jsonl: no clips"]
    (tmp_path / "pairs").mkdir()
    (tmp_path / "pairs" / "notes.md").write_text("not a clip")
    assert _problems(tmp_path / "pairs") == ["pairs: no clips (no NAME.wav + NAME.txt pairs in the folder)"]
    (tmp_path / "header.csv").write_text("audio,text\n", encoding="utf-8")
    assert _problems(tmp_path / "header.csv") == ["header.csv: no clips"]
    with pytest.raises(DatasetError, match="no such file or folder"):
        read_dataset(tmp_path / "nothing.jsonl")
    (tmp_path / "latin1.jsonl").write_bytes('{"audio": "a.wav", "text": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DatasetError, match="not UTF-8 text"):
        read_dataset(tmp_path / "latin1.jsonl")


def test_csv_problems(data, tmp_path):
    (tmp_path / "columns.csv").write_text("file,transcript\na.wav,hello\n", encoding="utf-8")
    [problem] = _problems(tmp_path / "columns.csv")
    assert problem.startswith("columns.csv:1: the header has no 'audio' or 'text' column")
    clip = data["clips"] / "utt000.wav"
    (tmp_path / "rows.csv").write_text(
        f'\ufeffAudio, Text\n{clip},"one, two"\n\n{clip}\n"{data["clips"] / "utt001.wav"}","a\nb"\n,x\n{data["clips"] / "utt002.wav"},ok,extra\n',
        encoding="utf-8",
    )
    problems = _problems(tmp_path / "rows.csv", ref=data["ref"])
    _assert_problems(
        problems,
        [("rows.csv:4", "1 fields, but the header has 2"), ("rows.csv:7", 'no audio path ("audio")'), ("rows.csv:8", "3 fields, but the header has 2")],
    )
    table = read_dataset(tmp_path / "rows.csv")  # BOM and header case/spaces tolerated; a quoted newline is one row
    assert [(c.where, c.text) for c in table.clips] == [("rows.csv:2", "one, two"), ("rows.csv:5", "a\nb")]
    tsv = tmp_path / "rows.tsv"
    tsv.write_text(f"audio\ttext\n{clip}\thello\n", encoding="utf-8")
    assert read_dataset(tsv).clips[0].text == "hello"


def test_pairs_folder(data, tmp_path):
    folder = data["pairs"]
    (folder / "utt000.txt").write_text("  She said she would be here by noon.\n\n", encoding="utf-8")
    sf.write(folder / "extra.flac", voiced(1.0, 130.0), 24000)  # any audio koe decodes
    (folder / "extra.txt").write_text("A flac clip.", encoding="utf-8")
    (folder / ".hidden.wav").write_bytes(b"ignored")
    (folder / "README.md").write_text("ignored")
    pairs = read_dataset(folder, ref=data["ref"])
    assert [c.audio.name for c in pairs.clips] == ["extra.flac"] + [f"utt{i:03d}.wav" for i in range(11)]
    assert pairs.clips[1].text == TEXTS[0]
    sf.write(folder / "lonely.wav", voiced(1.0, 130.0), 24000)
    (folder / "orphan.txt").write_text("no audio")
    sf.write(folder / "utt001.flac", voiced(1.0, 130.0), 24000)
    shutil.copy(data["ref"], folder / "ref.wav")
    problems = _problems(folder, ref=folder / "ref.wav")  # the reference given is not a clip without a transcript
    _assert_problems(
        problems,
        [("lonely.wav", "no transcript lonely.txt"), ("orphan.txt", "no audio file orphan.wav"), ("utt001.flac", "more than one audio file for utt001.txt")],
    )


# ---------------------------------------------------------------------------- bounded reading
# /dev/zero and files over the 2 GiB cap are refused through `koe train` in a memory-capped
# subprocess (tests/test_cli_train.py); here what can run in this process whatever the code does.
def _refused_in_seconds(path, *, fifo: Path | None = None, **kwargs) -> tuple[DatasetError, float]:
    """`load_dataset(path)` in a thread: the DatasetError it must raise within 10 s, and Python's peak
    allocations meanwhile in MiB. A reader blocked on `fifo` (the bug this guards against) is let go."""
    outcome: dict = {}

    def read():
        try:
            load_dataset(path, **kwargs)
        except DatasetError as e:
            outcome["error"] = e

    tracemalloc.start()
    try:
        worker = threading.Thread(target=read, daemon=True)
        worker.start()
        worker.join(10)
        peak = tracemalloc.get_traced_memory()[1] / (1 << 20)
    finally:
        tracemalloc.stop()
    if worker.is_alive() and fifo is not None:
        os.close(os.open(fifo, os.O_WRONLY | os.O_NONBLOCK))  # EOF for the blocked reader
        worker.join(10)
    assert "error" in outcome, f"{path}: not refused within 10 s"
    return outcome["error"], peak


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_fifo_is_refused_not_read(tmp_path):
    os.mkfifo(fifo := tmp_path / "train.jsonl")
    err, _ = _refused_in_seconds(fifo, fifo=fifo)
    assert err.problems == ["train.jsonl: a FIFO (named pipe), not a regular file"]
    assert "give a JSONL or CSV file" in err.hint


def test_a_line_over_the_cap_is_refused_at_once_in_bounded_memory(data, tmp_path):
    flat = tmp_path / "flat.jsonl"  # 64 MiB and no newline (sparse: no disk)
    with flat.open("wb") as f:
        f.truncate(64 << 20)
    err, peak = _refused_in_seconds(flat)
    assert err.problems == ["flat.jsonl:1: a line longer than 1 MiB"] and peak < 8, peak
    good = json.dumps({"audio": str(data["clips"] / "utt000.wav"), "text": "hi", "ref_audio": str(data["ref"])})
    late = tmp_path / "late.csv"
    late.write_bytes(b"audio,text\r\n" + good.encode() + b"\r\n" + b"x" * (MAX_LINE_BYTES + 1))
    err, _ = _refused_in_seconds(late)
    assert err.problems == ["late.csv:3: a line longer than 1 MiB"]


def test_line_ends_and_numbers_are_as_python_reads_text(data, tmp_path):
    row = json.dumps({"audio": str(data["clips"] / "utt000.wav"), "text": "one\u2028line", "ref_audio": str(data["ref"])})
    mixed = tmp_path / "mixed.jsonl"  # CRLF, a lone CR (a line end too), U+2028 inside a line (not one)
    mixed.write_bytes(b"\xef\xbb\xbf" + row.encode() + b"\r\n\r\nnot json\r" + row.replace("utt000", "utt001").encode())
    dataset = read_dataset(mixed)
    assert dataset.problems == ["mixed.jsonl:3: not valid JSON (Expecting value at column 1)"]
    assert [(c.where, c.text) for c in dataset.clips] == [("mixed.jsonl:1", "one\u2028line"), ("mixed.jsonl:4", "one\u2028line")]
    (tmp_path / "latin1.jsonl").write_bytes(row.encode() + b"\n" + '{"text": "caf\xe9"}\n'.encode("latin-1"))
    with pytest.raises(DatasetError, match=r"latin1.jsonl:2: not UTF-8 text \(invalid continuation byte at byte 14 of the line\)"):
        read_dataset(tmp_path / "latin1.jsonl")


def test_a_csv_field_over_csvs_limit_is_one_problem(data, tmp_path):
    clip = data["clips"] / "utt000.wav"
    table = tmp_path / "long.csv"
    table.write_text(f'audio,text\n{clip},ok\n{clip},"' + "many words\n" * 15000 + '"\n', encoding="utf-8")
    dataset = read_dataset(table, ref=data["ref"])
    [problem] = dataset.problems
    assert problem.startswith("long.csv:") and "not valid CSV (field larger than field limit" in problem, problem
    assert [c.where for c in dataset.clips] == ["long.csv:2"]


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="FIFOs are POSIX")
def test_a_folders_fifo_or_huge_transcript_is_named_not_read(data):
    folder = data["pairs"]
    (folder / "utt000.txt").unlink()
    os.mkfifo(fifo := folder / "utt000.txt")
    with (folder / "utt001.txt").open("wb") as f:
        f.truncate(3 * MAX_TRANSCRIPT_BYTES)
    (folder / "utt002.wav").unlink()
    os.mkfifo(folder / "utt002.wav")
    err, peak = _refused_in_seconds(folder, fifo=fifo, ref=data["ref"])
    _assert_problems(
        err.problems,
        [
            ("utt000.txt", "a FIFO (named pipe), not a regular file"),
            ("utt001.txt", "3 MiB, more than the 1 MiB a transcript may be"),
            ("utt002.wav: audio utt002.wav", "a FIFO (named pipe), not a regular file"),
        ],
    )
    assert peak < 8, peak


def test_prepared_jsonl_is_taken_as_is_and_validated(data, tmp_path):
    prepared = random_codes_jsonl(data["jsonl"], tmp_path / "prepared.jsonl")
    dataset = read_dataset(prepared)
    assert dataset.kind == "prepared" and dataset.prepared
    rows = [json.loads(line) for line in prepared.read_text().splitlines()]
    assert all(np.array_equal(c.codes, r["audio_codes"]) and c.codes.dtype == np.int64 for c, r in zip(dataset.clips, rows))
    os.unlink(data["clips"] / "utt005.wav")  # training reads only codes, text and reference
    checked = check_dataset(dataset)
    assert checked.audio == [None] * 11 and checked.summary()["frames"] == sum(len(r["audio_codes"]) for r in rows)
    bad = json.loads(json.dumps(rows[:8]))
    bad[1]["audio_codes"] = [row[:15] for row in rows[1]["audio_codes"]]
    bad[2]["audio_codes"][0][3] = 2048
    bad[3]["audio_codes"][0][0] = -1
    bad[4]["audio_codes"] = [[0.5] * 16]
    bad[5]["audio_codes"] = []
    bad[6]["audio_codes"] = [[1] * 16, [1] * 15]
    bad[7]["audio_codes"] = [[0] * 16] * 376  # 30.08 s
    _assert_problems(
        _problems(_jsonl(tmp_path / "bad.jsonl", bad)),
        [
            ("bad.jsonl:2", "audio_codes has 15 codebooks, expected 16"),
            ("bad.jsonl:3", "audio_codes outside 0..2047"),
            ("bad.jsonl:4", "audio_codes outside 0..2047"),
            ("bad.jsonl:5", "audio_codes must be a (frames, 16) list of lists of ints"),
            ("bad.jsonl:6", "audio_codes must be a (frames, 16) list of lists of ints"),
            ("bad.jsonl:7", "audio_codes must be a (frames, 16) list of lists of ints"),
            ("bad.jsonl:8", "audio_codes has 376 frames (30.1 s); at most 30 s per clip"),
        ],
    )
    mixed = json.loads(json.dumps(rows[:3]))
    del mixed[1]["audio_codes"]
    [problem] = _problems(_jsonl(tmp_path / "mixed.jsonl", mixed))
    assert "mixed.jsonl:1, mixed.jsonl:3 have audio_codes but mixed.jsonl:2 do not" in problem


# ------------------------------------------------------------------------------------------ preparing
def _write_mixed_rates(root: Path) -> Path:
    """39 clips in one raw JSONL: 13 at 24 kHz, 12 at 16 kHz, 12 at 44.1 kHz, a 44.1 kHz stereo
    WAV and a 16 kHz FLAC: two of upstream's batches (32 + 7)."""
    rows = []
    for n, rate in ((13, 24000), (12, 16000), (12, 44100)):
        paths = write_dataset(root / str(rate), n=n, rate=rate)
        rows += [json.loads(line) for line in paths["jsonl"].read_text(encoding="utf-8").splitlines()]
    ref = str(root / "24000" / "ref.wav")
    for row in rows:
        row["ref_audio"] = ref  # one reference for the set, as upstream recommends
    lines = [json.dumps(row, ensure_ascii=False) for row in rows]
    stereo = np.stack([voiced(1.3, 140.0, 44100, seed=5), voiced(1.3, 190.0, 44100, seed=6)], axis=1)
    sf.write(root / "stereo.wav", stereo, 44100, subtype="PCM_24")
    sf.write(root / "clip.flac", voiced(1.7, 125.0, 16000, seed=8), 16000)
    lines.append(json.dumps({"audio": str(root / "stereo.wav"), "text": "Two channels.", "ref_audio": ref}))
    lines.append(json.dumps({"audio": str(root / "clip.flac"), "text": "其实我真的有发现。", "ref_audio": ref}, ensure_ascii=False))
    out = root / "train_raw.jsonl"
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


def test_prepare_gives_upstreams_codes_and_file(codec_folder, tmp_path):
    raw = _write_mixed_rates(tmp_path / "data")
    checked = load_dataset(raw)
    assert len(checked.clips) == 39 > BATCH_SIZE
    assert checked.summary()["sample_rates"] == {"24000": 13, "16000": 13, "44100": 13}
    calls = []
    prepared = prepare(checked, codec_folder, tmp_path / "out" / "train_with_codes.jsonl", progress=lambda d, t: calls.append((d, t)))
    assert calls == [(0, 39), (32, 39), (39, 39)] and not prepared.reused
    job = {"folder": str(codec_folder), "input_jsonl": str(raw)}
    tensors, info = run_oracle("qwen_prepare", job, tmp_path / "oracle", keep=("codes.*",))  # a failure counts the codes that differ
    assert info["batches"] == [32, 7] and info["lines"] == 39
    assert not any(info["loading"][k] for k in ("missing_keys", "unexpected_keys", "mismatched_keys"))
    ours = [json.loads(line) for line in prepared.jsonl.read_text(encoding="utf-8").splitlines()]
    for i, row in enumerate(ours):
        codes, want = torch.tensor(row["audio_codes"]), tensors[f"codes.{i}"]
        assert codes.shape == want.shape and codes.shape[1] == 16, (i, codes.shape, want.shape)
        assert same(codes, want), f"clip {i} ({row['audio']}): {(codes != want).sum().item()} codes differ"
    codec = SpeechTokenizer.from_folder(codec_folder)  # the codes depend on the batch: one clip at a time is not upstream's
    alone = [encode_batch(codec, [Path(row["audio"])])[0] for row in ours]
    assert any(not same(a, tensors[f"codes.{i}"]) for i, a in enumerate(alone))
    upstream = (tmp_path / "oracle" / "qwen_prepare-out" / "prepared.jsonl").read_bytes()
    assert prepared.jsonl.read_bytes() == upstream  # the same file, byte for byte (the raw JSONL has absolute paths)
    summary = json.loads(summary_path(prepared.jsonl).read_text(encoding="utf-8"))
    assert summary == prepared.summary
    assert summary["clips"] == 39 and summary["frames"] == sum(len(r["audio_codes"]) for r in ours) == sum(checked.frames())
    assert summary["references"] == [{"path": str(tmp_path / "data" / "24000" / "ref.wav"), "seconds": 3.0, "sample_rate": 24000, "rows": 39}]


def test_prepare_reuses_unchanged_inputs_and_reruns_on_a_change(codec_folder, data, tmp_path):
    out = tmp_path / "out" / "train_with_codes.jsonl"
    calls = []
    first = prepare(load_dataset(data["jsonl"]), codec_folder, out, progress=lambda d, t: calls.append((d, t)))
    assert not first.reused and calls == [(0, 11), (11, 11)]
    s = first.summary
    assert (s["clips"], s["seconds"], s["frames"], s["sample_rates"], s["batch_size"]) == (11, 15.4, 195, {"24000": 11}, 32)
    assert sorted(p.name for p in out.parent.iterdir()) == ["train_with_codes.jsonl", "train_with_codes.summary.json"]
    stamp, calls[:] = out.stat().st_mtime_ns, []
    again = prepare(load_dataset(data["jsonl"]), codec_folder, out, progress=lambda d, t: calls.append((d, t)))
    assert again.reused and calls == [] and out.stat().st_mtime_ns == stamp and again.summary == first.summary
    lines = out.read_text(encoding="utf-8").splitlines()

    def rerun(label: str) -> list[str]:
        result = prepare(load_dataset(data["jsonl"]), codec_folder, out)
        assert not result.reused, label
        return out.read_text(encoding="utf-8").splitlines()

    rows = [json.loads(line) for line in data["jsonl"].read_text(encoding="utf-8").splitlines()]
    rows[3]["text"] = "A new transcript."
    _jsonl(data["jsonl"], rows)
    changed = rerun("a transcript changed")
    assert json.loads(changed[3])["text"] == "A new transcript." and json.loads(changed[3])["audio_codes"] == json.loads(lines[3])["audio_codes"]
    sf.write(data["clips"] / "utt004.wav", voiced(1.5, 300.0, 24000, seed=42), 24000)
    changed = rerun("a clip changed")
    assert json.loads(changed[4])["audio_codes"] != json.loads(lines[4])["audio_codes"]
    assert len(json.loads(changed[4])["audio_codes"]) == 19  # ceil(1.5 s * 12.5)
    config = codec_folder / "config.json"
    original = config.read_text()
    try:
        config.write_text(original + "\n")
        rerun("the codec's config changed")
    finally:
        config.write_text(original)
    assert prepare(load_dataset(data["jsonl"]), codec_folder, out).reused is False  # back to the first config
    assert prepare(load_dataset(data["jsonl"]), codec_folder, out).reused
    out.write_text(out.read_text()[:-10], encoding="utf-8")  # a prepared file edited (or cut short) since
    rerun("the prepared file changed")
    assert sorted(p.name for p in out.parent.iterdir()) == ["train_with_codes.jsonl", "train_with_codes.summary.json"]
    with pytest.raises(ValueError, match="overwrite the dataset itself"):
        prepare(load_dataset(data["jsonl"]), codec_folder, data["jsonl"])


def test_prepare_writes_a_prepared_dataset_as_is(data, tmp_path):
    prepared = random_codes_jsonl(data["jsonl"], tmp_path / "prepared.jsonl")
    result = prepare(load_dataset(prepared), tmp_path / "no-codec-needed", tmp_path / "out" / "train.jsonl")
    assert not result.reused and result.summary["kind"] == "prepared" and result.summary["device"] is None
    want = [json.loads(line) for line in prepared.read_text(encoding="utf-8").splitlines()]
    assert [json.loads(line) for line in result.jsonl.read_text(encoding="utf-8").splitlines()] == want
    assert prepare(load_dataset(prepared), tmp_path / "no-codec-needed", tmp_path / "out" / "train.jsonl").reused


def test_a_prepared_file_reads_back_as_a_prepared_dataset(codec_folder, data, tmp_path):
    result = prepare(load_dataset(data["pairs"], ref=data["ref"]), codec_folder, tmp_path / "train_with_codes.jsonl")
    back = load_dataset(result.jsonl)
    assert back.dataset.kind == "prepared" and back.summary()["frames"] == result.summary["frames"]
    assert [c.audio for c in back.clips] == [data["pairs"] / f"utt{i:03d}.wav" for i in range(11)]
    assert [c.text for c in back.clips] == TEXTS and all(c.ref_audio == data["ref"] for c in back.clips)
