"""`koe bench --family f5_tts` on a tiny model: koe alone, and against upstream f5-tts 1.1.22 in its
own venv (`make oracle-f5`; a missing venv is an error, not a skip), bits compared."""

from __future__ import annotations

import json

import pytest

from koe.bench import main, parse_options
from koe.bench.models import bench_model
from koe.engines.f5_tts.bench.models import dit_forward_flops, parameter_counts

F5_KEYS = ("load_s", "prompt_s", "total_s", "rtf", "text_s", "dit_s", "ms_per_step", "vocoder_s", "dit_gflops", "peak_rss")


def test_f5_quick_bench_koe(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert main(["--family", "f5_tts", "--quick", "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["family"] == "f5_tts" and results["options"]["runs"] == 1
    per = results["sizes"]["tiny"]
    assert set(per["cases"]) == {"nfe32", "nfe16"}
    for case, steps in (("nfe32", 32), ("nfe16", 16)):
        koe = per["cases"][case]["koe"]
        assert "upstream" not in per["cases"][case] and koe["precision"] == "float32"
        (run,) = koe["runs"]
        assert run["dit_steps"] == steps and run["nfe"] == steps and run["batches"] == 1 and run["threads"] == 1
        assert 3.0 < run["audio_s"] < 8.0  # two sentences
        assert run["dit_s"] <= run["total_s"] and run["text_s"] + run["dit_s"] + run["vocoder_s"] <= run["total_s"]
        for key in F5_KEYS:
            assert koe["summary"][key]["median"] > 0, key
    assert per["models"]["f5_tts"]["parameters"]["dit"] > 0 and per["models"]["f5_tts"]["weights_bytes"] > 0
    table = capsys.readouterr().out
    assert "ms/step" in table and "nfe16" in table


def test_f5_quick_bench_against_upstream(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--family",
        "f5_tts",
        "--quick",
        "--threads",
        "1",
        "--case",
        "nfe16",
        "--case",
        "long",
        "--compare",
        "upstream",
        "--models",
        str(tmp_path / "models"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    per = results["sizes"]["tiny"]
    for case in ("nfe16", "long"):
        entry = per["cases"][case]
        assert entry["wave_equal"], case  # same seed, same waveform bits as upstream
        for side in ("koe", "upstream"):
            (run,) = entry[side]["runs"]
            assert run["dit_steps"] == (16 if case == "nfe16" else 16 * run["batches"])
            for key in F5_KEYS:
                assert entry[side]["summary"][key]["median"] > 0, (case, side, key)
        assert entry["koe"]["runs"][0]["batches"] == entry["upstream"]["runs"][0]["batches"] == (1 if case == "nfe16" else 2)
        assert entry["ratio"]["total_s"] > 0
    assert per["exact_1thread"]["wave_equal"] and per["exact_1thread"]["case"] == "nfe16"
    assert per["exact_1thread"]["same_bits_as_threads"] == {"koe": True, "upstream": True}  # --threads 1: the warm-up is the same request
    assert "koe/up" in capsys.readouterr().out


def test_f5_options(tmp_path) -> None:
    opts, _ = parse_options(["--family", "f5_tts"])
    assert opts.sizes == ["real"] and opts.cases == ["nfe32", "nfe16"] and opts.variant == "F5TTS_v1_Base" and opts.exact_check
    opts, _ = parse_options(["--family", "f5_tts", "--quick", "--case", "long", "--variant", "F5TTS_Base", "--no-exact-check"])
    assert opts.sizes == ["tiny"] and opts.cases == ["long"] and opts.variant == "F5TTS_Base" and not opts.exact_check and not opts.bandwidth
    assert parse_options(["--family", "f5_tts", "--nfe", "4"])[0].nfe == 4
    for wrong in (["--case", "custom_voice"], ["--size", "0.6b"], ["--precision", "int8"]):
        with pytest.raises(SystemExit):
            parse_options(["--family", "f5_tts", *wrong])
    opts, _ = parse_options([])  # the default family is unchanged
    assert opts.family == "qwen3_tts" and opts.sizes == ["0.6b"] and "nfe32" not in opts.cases
    with pytest.raises(SystemExit):
        parse_options(["--case", "nfe32"])


def test_f5_model_cache_and_counts(tmp_path) -> None:
    folder = bench_model("f5_tts", "F5TTS_v1_Base", "tiny", tmp_path)
    assert bench_model("f5_tts", "F5TTS_v1_Base", "tiny", tmp_path) == folder and (folder / ".complete").exists()
    counts = parameter_counts(folder)
    assert counts["dit"] > counts["vocos"] > 0
    assert dit_forward_flops(folder, 200, 2) == 2 * dit_forward_flops(folder, 200, 1) > dit_forward_flops(folder, 100, 2) > 0


def test_f5_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_F5_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "f5_tts", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-f5" in capsys.readouterr().err
