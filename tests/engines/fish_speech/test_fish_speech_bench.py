"""`koe bench --family fish_speech` on the tiny random release (cases clone, own and dialogue): koe
alone (every part timed), and against upstream's server engine in the oracle's venv
(`make oracle-fish_speech`; a goldens-only oracle: skipped where it is not built) with the codes' and
waveforms' bits compared, interleaved and in turn; the options and the real folder's name."""

from __future__ import annotations

import json

import pytest
from koe_fish_speech.bench import BENCH, cases, models

from koe.bench import main, parse_options

QUICK_FRAMES = 6  # --quick's --frames: 5 frames kept a batch
ALL_CASES = ["--case", "clone", "--case", "own", "--case", "dialogue"]
BATCHES = {"clone": 1, "own": 1, "dialogue": 3}  # the dialogue's 7 turns at upstream's 200 bytes and 5 turns a batch


def _check_run(run: dict, case: str, side: str = "koe") -> None:
    assert run["batches"] == BATCHES[case] and run["steps"] == run["frames"] == (QUICK_FRAMES - 1) * run["batches"], (case, side)
    assert run["audio_samples"] == 2048 * run["frames"] and abs(run["audio_s"] - run["audio_samples"] / cases.SAMPLE_RATE) < 1e-12
    assert (run["reference_s"] > 0) == bool(cases.CASES[case][1]), (case, side)
    for key in ("prefill_s", "steps_s", "codec_s", "total_s", "rtf", "ms_per_frame", "peak_rss"):
        assert run[key] > 0, (case, side, key)
    assert abs(run["ms_per_frame"] - 1e3 * run["steps_s"] / run["steps"]) < 1e-9 and abs(run["lm_s"] - run["prefill_s"] - run["steps_s"]) < 1e-12
    assert -1e-6 < run["other_s"] < run["total_s"] and abs(run["other_s"] + sum(run[k] for k in cases.PARTS) - run["total_s"]) < 1e-9


def test_fish_speech_quick_bench_koe(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "fish_speech", "--quick", *ALL_CASES, "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    assert results["options"]["frames"] == QUICK_FRAMES and results["options"]["in_turn"] is False
    per = results["sizes"]["tiny"]
    assert list(per["cases"]) == ["clone", "own", "dialogue"] and per["models"]["s2-pro"]["layers"] is None
    for case, entry in per["cases"].items():
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        _check_run(run, case)
    params = per["models"]["s2-pro"]["parameters"]
    assert list(params) == ["slow", "fast", "codec", "total"] and params["total"] == params["slow"] + params["fast"] + params["codec"]
    assert (tmp_path / "models" / "fish_speech-tiny-s2-pro-seed0" / "sizes.json").is_file()
    table = capsys.readouterr().out
    assert "ms/frame" in table and "prefill s" in table and "codec s" in table and "dialogue" in table


@pytest.mark.oracle
@pytest.mark.goldens_oracle("fish_speech")
@pytest.mark.parametrize("which", [["--case", "clone", "--case", "dialogue"], ["--case", "own", "--in-turn"]])
def test_fish_speech_quick_bench_against_upstream(tmp_path, capsys, which) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "fish_speech", "--quick", *which, "--threads", "1", "--compare", "upstream", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert list(per["cases"]) == [w for w in which[1::2] if not w.startswith("--")]
    assert set(per["models"]["s2-pro"]["load"]) == {"koe", "upstream"}
    for case, entry in per["cases"].items():
        koe_run, up_run = entry["koe"]["runs"][0], entry["upstream"]["runs"][0]
        _check_run(koe_run, case)
        _check_run(up_run, case, "upstream")
        assert entry["upstream"]["precision"] == "float32" and entry["ratio"]["total_s"] > 0 and entry["ratio"]["ms_per_frame"] > 0
        assert entry["codes_equal"] and entry["wave_equal"], case  # same seed: upstream's reference codes, batches' codes and audio, bit for bit
        assert koe_run["codes_sha1"] == up_run["codes_sha1"] and koe_run["wave_sha1"] == up_run["wave_sha1"]
    text = capsys.readouterr().out
    assert "koe/up" in text and "waveforms equal" in text and "codes (reference and every batch) equal" in text


def test_fish_speech_bench_options() -> None:
    opts, _ = parse_options(["--family", "fish_speech"])
    assert opts.sizes == ["real"] and opts.cases == ["clone", "own"] and opts.frames == 100 and opts.layers == models.DEFAULT_LAYERS == 8
    assert opts.in_turn is False and opts.precision == "fp32" and opts.upstream_precision == "fp32"
    opts, _ = parse_options(["--family", "fish_speech", "--quick", "--case", "dialogue", "--frames", "20", "--layers", "4", "--in-turn"])
    assert opts.sizes == ["tiny"] and opts.cases == ["dialogue"] and opts.frames == 20 and opts.layers == 4 and opts.in_turn is True
    assert BENCH.sides["upstream"].venv == ".oracle-fish_speech" and BENCH.sides["upstream"].worker == "tests/oracle_fish_speech/bench_worker.py"
    assert BENCH.cases == ("clone", "own", "dialogue") and BENCH.compare_precisions == ("fp32", "bf16")
    for wrong in (["--case", "en"], ["--size", "4B"], ["--frames", "1"], ["--layers", "0"], ["--upstream-precision", "int8"]):
        with pytest.raises(SystemExit):
            parse_options(["--family", "fish_speech", *wrong])


def test_fish_speech_bench_folders_say_their_depth() -> None:
    assert models.model_name("s2-pro", "real", 0) == "fish_speech-real-s2-pro-L8-seed0"
    assert models.model_name("s2-pro", "real", 3, layers=4) == "fish_speech-real-s2-pro-L4-seed3"
    assert models.model_name("s2-pro", "tiny", 0, layers=4) == "fish_speech-tiny-s2-pro-seed0"  # the tiny model has its own 2 layers
    with pytest.raises(ValueError, match="unknown Fish Speech model"):
        models.model_name("s1-mini", "real", 0)


def test_fish_speech_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_FISH_SPEECH_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "fish_speech", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-fish_speech" in capsys.readouterr().err
