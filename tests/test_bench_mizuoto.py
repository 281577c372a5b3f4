"""`koe bench --compare mizuoto`: the peer runtime mizuoto 0.2.16 in its own venv and process (`make
peer-mizuoto`; a missing venv is an error, not a skip), driven as its host drives it, on the tiny
model: same codes as koe in every exact fp32 case; a three-way run with upstream in one session; and
the table and ratio code on results made by hand."""

from __future__ import annotations

import json
import os
import platform
import sys

import pytest

from koe.bench import main, parse_options
from koe.bench.cli import format_table, ratio_legend
from koe.bench.runner import BenchError, BenchOptions, compare_sides, compared

RUN_KEYS = ("load_s", "call_s", "prefill_s", "ms_per_frame", "talker_ms_per_frame", "predictor_ms_per_frame", "codec_s_per_audio_s", "frames_per_s", "peak_rss")
CODE_CASES = ("custom_voice", "voice_design", "clone_xvector", "clone_icl", "batch8")


def test_quick_bench_against_mizuoto(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert main(["--quick", "--threads", "1", "--compare", "mizuoto", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    assert results["options"]["compare"] == ["mizuoto"]
    per = results["sizes"]["tiny"]
    for case in CODE_CASES:
        entry = per["cases"][case]
        assert entry["codes_equal_to"] == {"mizuoto": True}, case  # same seed, same codes as koe (fp32, tiny model)
        assert "upstream" not in entry and "ratio" not in entry and "codes_equal" not in entry
        peer = entry["mizuoto"]
        assert peer["precision"] == "float32"
        (run,) = peer["runs"]
        assert run["frames"] == 4 and run["batch"] == (8 if case == "batch8" else 1)  # end of speech disabled: exactly --frames frames
        for key in RUN_KEYS:
            assert peer["summary"][key]["median"] > 0, (case, key)
        assert set(entry["ratios"]) == {"mizuoto"} and entry["ratios"]["mizuoto"]["ms_per_frame"] > 0
    for case in ("clone_xvector", "clone_icl"):
        assert per["cases"][case]["mizuoto"]["summary"]["prompt_s"]["median"] > 0
    assert per["cases"]["clone_icl"]["mizuoto"]["runs"][0]["variant"] == "base"
    assert per["cases"]["custom_voice"]["mizuoto"]["runs"][0]["variant"] == "custom_voice_lite"  # the tiny model says 0.6B
    stream = per["cases"]["streaming"]["mizuoto"]
    assert stream["summary"]["ttfa_s"]["median"] > 0 and "unsupported" not in stream
    assert "batch8_speedup" in per and per["batch8_speedup"]["mizuoto"] > 0
    load = per["models"]["custom_voice"]["load"]["mizuoto"]
    assert load["torch_before_settings"] is False and load["load_s"] > 0 and load["threads"] == 1
    if sys.platform.startswith("linux") and platform.libc_ver()[0] == "glibc":  # its host's CPU defaults ("auto"), as it applies them
        assert load["cpu_settings"]["THP_MEM_ALLOC_ENABLE"] == "1" and "glibc.malloc.mmap_threshold" in load["cpu_settings"]["GLIBC_TUNABLES"]
        if not any(v in os.environ for v in ("OMP_PLACES", "OMP_PROC_BIND", "GOMP_CPU_AFFINITY", "KMP_AFFINITY")):
            assert load["cpu_settings"]["OMP_PLACES"] == "cores" and load["cpu_settings"]["OMP_PROC_BIND"] == "close"
    table = capsys.readouterr().out
    assert "koe/peer" in table and "= koe" in table and "DIFFERENT" not in table and "call s" in table


def test_three_way_run_in_one_session(tmp_path, capsys) -> None:
    """`--compare upstream --compare mizuoto`: all three interleaved; the upstream side keeps its JSON shape."""
    out = tmp_path / "bench.json"
    argv = [
        "--quick",
        "--threads",
        "1",
        "--case",
        "custom_voice",
        "--compare",
        "upstream",
        "--compare",
        "mizuoto",
        "--models",
        str(tmp_path / "models"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    entry = json.loads(out.read_text())["sizes"]["tiny"]["cases"]["custom_voice"]
    assert entry["codes_equal"] is True and entry["codes_equal_to"] == {"upstream": True, "mizuoto": True}
    assert entry["ratio"] == entry["ratios"]["upstream"] and set(entry["ratios"]) == {"upstream", "mizuoto"}
    for side in ("koe", "upstream", "mizuoto"):
        (run,) = entry[side]["runs"]
        assert run["frames"] == 4 and entry[side]["summary"]["call_s"]["median"] > 0, side
    table = capsys.readouterr().out
    assert "size tiny, case custom_voice, prec float32" in table  # one size, case and precision: said once
    first = table.split("\n\n")[0].splitlines()  # the first of the tables the measures are split into to fit the terminal
    rows = [line.split()[0] for line in first[first.index(next(line for line in first if line.startswith("side"))) + 1 :]]
    assert rows == ["koe", "upstream", "mizuoto", "koe/up", "koe/peer"]
    assert "koe/up, koe/peer: koe's median over upstream's / mizuoto's" in table


def test_compare_without_peer_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_PEER_MIZUOTO_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--quick", "--compare", "mizuoto", "--models", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "make peer-mizuoto" in err and "KOE_PEER_MIZUOTO_PYTHON" in err


def test_compare_options() -> None:
    opts, _ = parse_options(["--compare", "mizuoto", "--compare", "upstream", "--compare", "mizuoto"])
    assert opts.compare == ["mizuoto", "upstream"] and compared(opts) == ["mizuoto", "upstream"]
    assert parse_options([])[0].compare is None and compared(BenchOptions()) == []
    assert compared(BenchOptions(compare="upstream")) == ["upstream"]  # one name, as before --compare was repeatable
    with pytest.raises(BenchError, match="--compare takes"):
        compared(BenchOptions(compare=["elsewhere"]))
    for family in ("f5_tts", "voxcpm"):
        with pytest.raises(SystemExit):
            parse_options(["--family", family, "--compare", "mizuoto"])
    with pytest.raises(SystemExit):
        parse_options(["--compare", "koe"])


def _summary(**medians) -> dict:
    return {k: {"median": v, "min": v * 0.9, "n": 2} for k, v in medians.items()}


def test_compare_sides_ratios_and_codes() -> None:
    koe = {"summary": _summary(ms_per_frame=100.0, call_s=2.0, frames_per_s=10.0)}
    up = {"summary": _summary(ms_per_frame=200.0, call_s=4.0, frames_per_s=5.0)}
    peer = {"summary": _summary(ms_per_frame=50.0, call_s=1.0)}
    entry = {"koe": koe, "upstream": up, "mizuoto": peer}
    samples = {"koe": [{"codes_sha1": "a"}] * 2, "upstream": [{"codes_sha1": "a"}] * 2, "mizuoto": [{"codes_sha1": "a"}, {"codes_sha1": "b"}]}
    compare_sides(entry, samples, ["upstream", "mizuoto"])
    assert entry["ratio"] == entry["ratios"]["upstream"] == {"ms_per_frame": 0.5, "call_s": 0.5, "frames_per_s": 2.0}
    assert entry["ratios"]["mizuoto"] == {"ms_per_frame": 2.0, "call_s": 2.0}  # a key one side lacks has no ratio
    assert entry["codes_equal"] is True and entry["codes_equal_to"] == {"upstream": True, "mizuoto": False}
    only_peer = {"koe": koe, "mizuoto": peer}
    compare_sides(only_peer, {"koe": [{"codes_sha1": "a"}], "mizuoto": [{"case": "streaming"}]}, ["mizuoto"])
    assert "codes_equal_to" not in only_peer and "ratio" not in only_peer and "codes_equal" not in only_peer  # no codes: no verdict


def _results(cases: dict) -> dict:
    machine = {"cpu": "Test CPU", "cores": 2, "torch": "2.13.0"}
    return {"machine": machine, "options": {"threads": 2}, "sizes": {"0.6b": {"cases": cases, "models": {}}}}


def test_table_rows_per_side_ratios_and_codes() -> None:
    side = lambda ms, call: {"summary": _summary(ms_per_frame=ms, call_s=call), "precision": "float32"}  # noqa: E731
    entry = {
        "koe": side(100.0, 2.0),
        "upstream": side(200.0, 4.0),
        "mizuoto": side(80.0, 1.6),
        "ratios": {"upstream": {"ms_per_frame": 0.5, "call_s": 0.5}, "mizuoto": {"ms_per_frame": 1.25, "call_s": 1.25}},
        "codes_equal_to": {"upstream": True, "mizuoto": False},
    }
    stream = {"koe": {"summary": _summary(ttfa_s=1.5)}, "upstream": {"summary": {}, "unsupported": "no streaming API"}}
    table = format_table(_results({"custom_voice": entry, "streaming": stream}), width=200)
    lines = table.splitlines()
    assert lines[1] == "size 0.6b, prec float32"  # one size, one precision: said once, not on every row
    header = [h.strip() for h in lines[2].split("  ") if h.strip()]
    assert header == ["case", "side", "call s", "ms/frame", "TTFA s", "codes"]  # no column without a value
    rows = {(line.split()[0], line.split()[1]): line for line in lines[3:] if line.startswith(("custom_voice", "streaming"))}
    assert rows[("custom_voice", "upstream")].rstrip().endswith("= koe") and rows[("custom_voice", "mizuoto")].rstrip().endswith("DIFFERENT")
    assert rows[("custom_voice", "koe")].split()[2:4] == ["2", "100"] and "1.8" not in table and "90" not in table  # medians only
    assert "0.50x" in rows[("custom_voice", "koe/up")] and "1.25x" in rows[("custom_voice", "koe/peer")]
    assert ("streaming", "koe/up") not in rows and "0.6b streaming: upstream: unsupported (no streaming API)" in lines
    old = {"koe": side(100.0, 2.0), "upstream": side(200.0, 4.0), "ratio": {"ms_per_frame": 0.5}, "codes_equal": True}
    old_lines = format_table(_results({"custom_voice": old}), width=200).splitlines()
    assert old_lines[1] == "size 0.6b, case custom_voice, prec float32" and old_lines[2].startswith("side")  # one case: no case column
    old_rows = old_lines[3:]
    assert [r.split()[0] for r in old_rows] == ["koe", "upstream", "koe/up"] and old_rows[1].rstrip().endswith("= koe")  # results from before


def test_ratio_legend() -> None:
    assert ratio_legend("qwen3_tts", ["upstream"]) == "koe/up: koe's median over upstream's; below 1 is faster, except frames/s where above 1 is faster"
    assert ratio_legend("qwen3_tts", ["mizuoto"]).startswith("koe/peer: koe's median over mizuoto's;")
    assert ratio_legend("f5_tts", ["upstream"]).endswith("except GFLOP/s where above 1 is faster")
    assert ratio_legend("voxcpm", ["upstream"]) == "koe/up: koe's median over upstream's; below 1 is faster"
