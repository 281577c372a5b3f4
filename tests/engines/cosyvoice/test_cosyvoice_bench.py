"""`koe bench --family cosyvoice` on tiny models: koe alone (every case, and the LM in int8), and
against upstream's AutoModel in its own venv (`make oracle-cosyvoice`; a missing venv is an error,
not a skip) with the waveforms' bits compared; the accuracy tool of the opt-in precisions.

Until CosyVoice's spec names its benchmark (`bench = "koe.engines.cosyvoice.bench:BENCH"`), the
`declared` fixture puts the declaration among `koe bench`'s families."""

from __future__ import annotations

import json

import pytest

from koe.bench import families, main, parse_options
from koe.bench.accuracy import main as accuracy_main
from koe.engines.cosyvoice.bench import BENCH, cases

PARTS = ("text_s", "campplus_s", "tokenizer_s", "mel_s", "lm_s", "flow_s", "vocoder_s")


@pytest.fixture
def declared(monkeypatch):
    table = families.benches()
    if table.get("cosyvoice") is None:
        monkeypatch.setattr(families, "benches", lambda: {**table, "cosyvoice": BENCH})


def _check_run(run: dict, case: str, side: str = "koe") -> None:
    stream = cases.CASES[case][1]
    assert run["stream"] == stream and run["tokens"] > 0 and run["audio_s"] > 0, (case, side)
    for key in PARTS + ("total_s", "rtf", "front_s", "ms_per_token", "peak_rss"):
        assert run[key] > 0, (case, side, key)
    assert abs(run["front_s"] - sum(run[k] for k in PARTS[:4])) < 1e-9
    assert 0 < run["prefill_s"] < run["lm_s"] and abs(run["ms_per_token"] - 1e3 * (run["lm_s"] - run["prefill_s"]) / run["tokens"]) < 1e-9
    assert (run["ttfa_s"] is not None) == stream and (run["chunks"] > 1) == stream
    if stream:
        assert 0 < run["ttfa_s"] < run["total_s"]
    if run["other_s"] is not None:  # the parts are spans of the total (not upstream's stream: its LM thread overlaps)
        assert -1e-6 < run["other_s"] < run["total_s"]
    else:
        assert side == "upstream" and stream


def test_cosyvoice_quick_bench_koe(declared, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert main(["--family", "cosyvoice", "--quick", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    per = results["sizes"]["tiny"]
    assert set(per["cases"]) == set(cases.CASES) and set(per["models"]) == {"CosyVoice2-0.5B", "Fun-CosyVoice3-0.5B-2512"}
    for case, entry in per["cases"].items():
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        _check_run(run, case)
    for model in per["models"].values():
        params = model["parameters"]
        assert params["total"] == params["llm"] + params["flow"] + params["hift"] and min(params.values()) > 0 and model["weights_bytes"] > 0
    table = capsys.readouterr().out
    assert "ms/token" in table and "TTFA s" in table and "CAM++ s" in table and "v3_stream" in table


def test_cosyvoice_quick_bench_lm_in_int8(declared, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--family",
        "cosyvoice",
        "--quick",
        "--threads",
        "1",
        "--case",
        "v3",
        "--precision",
        "int8",
        "--models",
        str(tmp_path / "models"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    entry = json.loads(out.read_text())["sizes"]["tiny"]["cases"]["v3"]
    assert entry["koe"]["precision"] == "int8" and entry["koe"].get("kernel")
    _check_run(entry["koe"]["runs"][0], "v3")


@pytest.mark.oracle
def test_cosyvoice_quick_bench_against_upstream(declared, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "cosyvoice", "--quick", "--threads", "1", "--compare", "upstream", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    for case, entry in per["cases"].items():
        koe_run, up_run = entry["koe"]["runs"][0], entry["upstream"]["runs"][0]
        _check_run(koe_run, case)
        _check_run(up_run, case, "upstream")
        assert entry["upstream"]["precision"] == "float32" and entry["ratio"]["total_s"] > 0 and entry["ratio"]["lm_s"] > 0
        if case in cases.RACING:  # upstream's v2 stream races its two threads: its bits are not compared
            assert "wave_equal" not in entry
        else:  # same seed and upstream's CAM++ vector: the same tokens and waveform bits
            assert entry["wave_equal"], case
            assert koe_run["wave_sha1"] == up_run["wave_sha1"] and koe_run["tokens"] == up_run["tokens"]
            assert koe_run["chunks"] == up_run["chunks"]
    out_text = capsys.readouterr().out
    assert "koe/up" in out_text and "waveforms equal" in out_text and "not compared" in out_text


def test_cosyvoice_options(declared) -> None:
    opts, _ = parse_options(["--family", "cosyvoice"])
    assert opts.sizes == ["real"] and opts.cases == list(cases.CASES) and opts.precision == "fp32"
    opts, _ = parse_options(["--family", "cosyvoice", "--quick", "--case", "v2_stream", "--precision", "int4"])
    assert opts.sizes == ["tiny"] and opts.cases == ["v2_stream"] and opts.precision == "int4"
    for wrong in (["--case", "v1"], ["--size", "0.6b"], ["--upstream-precision", "bf16"], ["--variant", "CosyVoice2-0.5B"]):
        with pytest.raises(SystemExit):
            parse_options(["--family", "cosyvoice", *wrong])


def test_cosyvoice_compare_without_upstream_venv_is_a_clear_error(declared, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_COSYVOICE_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "cosyvoice", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-cosyvoice" in capsys.readouterr().err


def test_cosyvoice_accuracy_tool(declared, tmp_path, capsys) -> None:
    """bf16's error on the exact path's own steps: close (random weights make a flat distribution, so
    free-running tokens part early: only the teacher-forced measures are bounded here)."""
    out = tmp_path / "acc.json"
    argv = ["--family", "cosyvoice", "--precision", "bf16", "--variant", "Fun-CosyVoice3-0.5B-2512", "--threads", "1", "--models", str(tmp_path / "models")]
    assert accuracy_main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["precision"] == "bfloat16" and result["size"] == "tiny" and result["version"] == 3
    forced = result["teacher_forced"]
    assert forced["steps"] == result["free_running"]["exact_tokens"] + 1 > 1  # every token's step and the end's
    assert 0.999 < forced["cosine_mean"] <= 1.0 and 0.5 < forced["top1_agreement"] <= 1.0 and 0 < forced["max_abs_logp_diff"] < 1.0
    assert 0.0 <= result["free_running"]["tokens_equal"] <= 1.0
