"""`koe bench --quick` runs for every registered family that declares a benchmark (koe alone, no
oracle), and a family that declares none is listed by `--family` and refused with a clear message."""

from __future__ import annotations

import json

import pytest

from koe.bench import families, main, parse_options
from koe.bench.cli import parser


@pytest.mark.parametrize("family", families.runnable())
def test_quick_bench_runs_for_every_family(family, tmp_path, capsys) -> None:
    """Each family's declaration runs through `koe bench --quick` (its workers, model writer, run and
    table) on its first default case, no warm-up; without --case it would run every default case,
    which the family's own bench tests run (tests/test_bench*.py, tests/engines/<family>/test_*bench*.py)."""
    bench = families.family_bench(family)
    assert parse_options(["--family", family, "--quick"])[0].cases == list(bench.default_cases)
    case = bench.default_cases[0]
    out = tmp_path / "bench.json"
    argv = ["--family", family, "--quick", "--case", case, "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    assert results["family"] == family and results["options"]["runs"] == 1 and results["options"]["warmup"] == 0
    per = results["sizes"][bench.quick_size]
    assert set(per["cases"]) == {case}
    (run,) = per["cases"][case]["koe"]["runs"]
    assert per["cases"][case]["koe"]["summary"]["load_s"]["median"] > 0 and run["peak_rss"] > 0
    assert capsys.readouterr().out.strip()  # the table


def test_every_registered_family_is_listed() -> None:
    choices = next(a.choices for a in parser()._actions if a.dest == "family")
    assert list(choices) == list(families.benches())


def test_a_family_without_a_benchmark_is_refused(monkeypatch, capsys) -> None:
    declared = families.benches()
    monkeypatch.setattr(families, "benches", lambda: {**declared, "silent": None})
    assert "silent" in next(a.choices for a in parser()._actions if a.dest == "family")
    with pytest.raises(SystemExit):
        parse_options(["--family", "silent", "--quick"])
    assert "--family silent declares no benchmark" in capsys.readouterr().err


def test_a_family_that_declares_only_its_cases_runs_through_the_contract(monkeypatch, tmp_path, capsys) -> None:
    """No `run`, `table` or `worker` of its own: `koe.bench.contract` speaks each case's request through
    `Engine.synthesize` (whole, and streamed), with the family's sizes and model writer."""
    from dataclasses import replace

    declared = families.benches()
    requests = {
        "spoken": {"text": "A short sentence.", "voice": "ryan", "max_segment_s": 0.4},
        "streamed": {"text": "A short sentence.", "voice": "ryan", "max_segment_s": 0.4, "stream": True},
    }
    plain = replace(
        declared["qwen3_tts"], run="", table="", worker="", flags=(), columns=(), requests=requests, cases=tuple(requests), default_cases=tuple(requests)
    )
    monkeypatch.setattr(families, "benches", lambda: {**declared, "qwen3_tts": plain})
    out = tmp_path / "bench.json"
    argv = ["--family", "qwen3_tts", "--quick", "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert per["models"]["qwen3_tts"]["variant"] == "custom_voice"
    for case in requests:
        (run,) = per["cases"][case]["koe"]["runs"]
        assert run["audio_s"] > 0 and run["total_s"] > 0 and len(run["wave_sha1"]) == 40, case
    assert per["cases"]["streamed"]["koe"]["runs"][0]["ttfa_s"] > 0 and "ttfa_s" not in per["cases"]["spoken"]["koe"]["runs"][0]
    assert "s/audio s" in capsys.readouterr().out


def test_a_declaration_that_does_not_import_is_refused_by_name(monkeypatch, capsys) -> None:
    from koe.engines import registry

    family = families.runnable()[-1]
    monkeypatch.setattr(registry.spec(family), "bench", "koe.nowhere:BENCH")
    assert family not in families.runnable() and family in families.benches()  # still listed
    with pytest.raises(SystemExit):
        parse_options(["--family", family])
    assert "does not import: ModuleNotFoundError" in capsys.readouterr().err
