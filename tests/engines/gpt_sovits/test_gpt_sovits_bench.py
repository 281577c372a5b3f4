"""`koe bench --family gpt_sovits` on the tiny random release: koe alone (every case, every part
timed; v4 marked slow: its folder holds the DiT at its released size), and against upstream's
`TTS.run` in the oracle's venv (`make oracle-gpt_sovits`; a goldens-only oracle: skipped where it is
not built) with the float32 and int16 samples' bits compared; the options and the folders' names."""

from __future__ import annotations

import json

import pytest

from koe.bench import families, main, parse_options
from koe.bench.accuracy import main as accuracy_main
from koe.engines.gpt_sovits import fixtures, spec
from koe.engines.gpt_sovits.bench import BENCH, cases, models

PARTS = ("reference_s", "ar_s", "sovits_s")


def _check_run(run: dict, case: str, side: str = "koe") -> None:
    assert run["tokens"] > 0 and run["batches"] >= 1 and run["audio_s"] > 0, (case, side)
    for key in PARTS + ("total_s", "rtf", "ms_per_token", "peak_rss"):
        assert run[key] > 0, (case, side, key)
    assert abs(run["ms_per_token"] - 1e3 * run["ar_s"] / run["tokens"]) < 1e-9
    assert -1e-6 < run["other_s"] < run["total_s"] and abs(run["other_s"] + sum(run[k] for k in PARTS) - run["total_s"]) < 1e-9
    assert abs(run["audio_s"] - run["audio_samples"] / cases.SAMPLE_RATES[cases.CASES[case][0]]) < 1e-12


def test_gpt_sovits_quick_bench_koe(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "gpt_sovits", "--quick", "--case", "v2", "--case", "v2_zh", "--warmup", "0", "--threads", "1"]
    assert main([*argv, "--models", str(tmp_path / "models"), "--out", str(out)]) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert list(per["cases"]) == ["v2", "v2_zh"] and list(per["models"]) == ["GPT-SoVITS-v2"]
    for case, entry in per["cases"].items():
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        _check_run(run, case)
    params = per["models"]["GPT-SoVITS-v2"]["parameters"]
    assert list(params) == ["gpt", "sovits", "hubert", "bert", "total"] and params["total"] == sum(v for k, v in params.items() if k != "total")
    table = capsys.readouterr().out
    assert "ms/token" in table and "AR s" in table and "SoVITS s" in table and "v2_zh" in table


@pytest.mark.slow
def test_gpt_sovits_v4_quick_bench_koe(tmp_path, capsys) -> None:
    """v4's case: its folder (the pretrained model, a LoRA over it and the vocoder) read as v4, the
    CFM and the vocoder timed as its SoVITS part, 48 kHz audio, the vocoder's parameters counted."""
    out, root = tmp_path / "bench.json", tmp_path / "models"
    argv = ["--family", "gpt_sovits", "--quick", "--case", "v4", "--warmup", "0", "--threads", "1"]
    assert main([*argv, "--models", str(root), "--out", str(out)]) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert list(per["cases"]) == ["v4"] and list(per["models"]) == ["GPT-SoVITS-v4"]
    (run,) = per["cases"]["v4"]["koe"]["runs"]
    _check_run(run, "v4")
    layout = spec.find_layout(root / models.model_name("GPT-SoVITS-v4", "tiny", 0))
    gpt, sovits = cases.FILES["GPT-SoVITS-v4"]
    assert layout.version == "v4" and layout.gpt == layout.folder / gpt and layout.sovits == layout.folder / sovits == layout.folder / fixtures.V4_LORA
    params = per["models"]["GPT-SoVITS-v4"]["parameters"]
    assert list(params) == ["gpt", "sovits", "hubert", "bert", "vocoder", "total"] and params["sovits"] > 300e6  # the DiT at its released size
    assert "vocoder" in capsys.readouterr().out


@pytest.mark.oracle
@pytest.mark.goldens_oracle("gpt_sovits")
@pytest.mark.parametrize("case_args", [("v2", "v2_zh"), pytest.param(("v4",), marks=pytest.mark.slow)], ids=["v2", "v4"])
def test_gpt_sovits_quick_bench_against_upstream(case_args, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "gpt_sovits", "--quick", *(a for case in case_args for a in ("--case", case)), "--threads", "1", "--compare", "upstream"]
    assert main([*argv, "--models", str(tmp_path / "models"), "--out", str(out)]) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert list(per["cases"]) == list(case_args) and all(set(model["load"]) == {"koe", "upstream"} for model in per["models"].values())
    for case, entry in per["cases"].items():
        koe_run, up_run = entry["koe"]["runs"][0], entry["upstream"]["runs"][0]
        _check_run(koe_run, case)
        _check_run(up_run, case, "upstream")
        assert entry["upstream"]["precision"] == "float32" and entry["ratio"]["total_s"] > 0 and entry["ratio"]["ar_s"] > 0
        assert entry["wave_equal"] and entry["int16_equal"], case  # same seed, a reference neither has seen: upstream's samples, bit for bit
        assert koe_run["wave_sha1"] == up_run["wave_sha1"] and koe_run["tokens"] == up_run["tokens"] and koe_run["batches"] == up_run["batches"]
    text = capsys.readouterr().out
    assert "koe/up" in text and "waveforms (float32 and int16) equal" in text


def test_gpt_sovits_bench_options() -> None:
    opts, _ = parse_options(["--family", "gpt_sovits"])
    assert opts.sizes == ["real"] and opts.cases == ["v2"] and opts.precision == "fp32" and opts.upstream_precision == "fp32"
    opts, _ = parse_options(["--family", "gpt_sovits", "--quick", "--case", "v2_zh"])
    assert opts.sizes == ["tiny"] and opts.cases == ["v2_zh"]
    assert families.benches()["gpt_sovits"] is BENCH  # the spec names it
    assert BENCH.sides["upstream"].venv == ".oracle-gpt_sovits" and BENCH.sides["upstream"].worker == "scripts/bench_gpt_sovits_upstream_worker.py"
    assert parse_options(["--family", "gpt_sovits", "--precision", "int8"])[0].precision == "int8"
    assert parse_options(["--family", "gpt_sovits", "--case", "v4"])[0].cases == ["v4"]
    for wrong in (["--case", "v3"], ["--size", "base"], ["--precision", "bf16"], ["--upstream-precision", "int8"]):
        with pytest.raises(SystemExit):
            parse_options(["--family", "gpt_sovits", *wrong])


def test_gpt_sovits_accuracy_tool(tmp_path) -> None:
    """int8's error on the exact path's own steps: close (random weights make a flat distribution, so
    free-running tokens part early: only the teacher-forced measures are bounded here)."""
    out = tmp_path / "acc.json"
    argv = ["--family", "gpt_sovits", "--precision", "int8", "--size", "tiny", "--threads", "1", "--models", str(tmp_path / "models")]
    assert accuracy_main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["precision"] == "int8" and result["kernel"] and result["size"] == "tiny" and result["version"] == "v2" and result["case"] == "v2"
    forced, free = result["teacher_forced"], result["free_running"]
    assert forced["steps"] == free["exact_tokens"] + 1 > 1  # every kept token's step and the end's
    assert 0.999 < forced["cosine_mean"] <= 1.0 and 0.5 < forced["top1_agreement"] <= 1.0 and 0 < forced["max_abs_logp_diff"] < 1.0
    assert 0.0 <= free["tokens_equal"] <= 1.0 and free["mode_tokens"] > 0 and -1.0 <= free["waveform_cosine"] <= 1.0


def test_gpt_sovits_bench_folders() -> None:
    assert models.model_name("GPT-SoVITS-v2", "real", 0) == "gpt_sovits-real-GPT-SoVITS-v2-seed0"
    assert models.model_name("GPT-SoVITS-v4", "tiny", 1) == "gpt_sovits-tiny-GPT-SoVITS-v4-seed1"
    with pytest.raises(ValueError, match="unknown GPT-SoVITS model"):
        models.model_name("GPT-SoVITS-v3", "real", 0)
    for variant, (gpt, sovits) in cases.FILES.items():  # the upstream side's files: the release's paths (v4: its LoRA, as the fixtures name it)
        version = spec.version_of_variant(variant)
        assert gpt == spec.RELEASES[version][0] and sovits == (fixtures.V4_LORA if version == "v4" else spec.RELEASES[version][1])


def test_gpt_sovits_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_GPT_SOVITS_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "gpt_sovits", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-gpt_sovits" in capsys.readouterr().err
