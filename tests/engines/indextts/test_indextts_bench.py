"""`koe bench --family indextts` on the tiny random release: koe alone (both cases, every part
timed), and against upstream's `IndexTTS.infer` in the oracle's venv (`make oracle-indextts`; a
missing venv is an error, not a skip) with the codes' and waveforms' bits compared; and the KV
cache's reorder that the benchmark's profile made cheaper."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from koe_indextts.bench import BENCH, cases
from koe_indextts.gpt import KVCache

from koe.bench import main, parse_options

QUICK_CODES = 8  # --quick's --codes


def _check_run(run: dict, case: str, side: str = "koe") -> None:
    assert run["segments"] == 1 and run["codes"] == QUICK_CODES and run["audio_s"] > 0, (case, side)
    assert run["audio_samples"] == QUICK_CODES * 1024  # random weights at the tiny size reach the cap: 1024 samples a code
    for key in cases.PARTS + ("total_s", "rtf", "ms_per_code", "peak_rss"):
        assert run[key] > 0, (case, side, key)
    assert abs(run["ms_per_code"] - 1e3 * run["search_s"] / run["codes"]) < 1e-9
    assert -1e-6 < run["other_s"] < run["total_s"] and abs(run["other_s"] + sum(run[k] for k in cases.PARTS) - run["total_s"]) < 1e-9


def test_indextts_quick_bench_koe(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert main(["--family", "indextts", "--quick", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    assert results["options"]["codes"] == QUICK_CODES
    per = results["sizes"]["tiny"]
    assert set(per["cases"]) == set(cases.CASES)
    for case, entry in per["cases"].items():
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        _check_run(run, case)
    params = per["models"]["indextts"]["parameters"]
    assert params["total"] == sum(params[k] for k in ("gpt", "conditioning", "bigvgan", "speaker_encoder")) and min(params.values()) > 0
    table = capsys.readouterr().out
    assert "ms/code" in table and "GPT s" in table and "vocoder s" in table and "zh" in table


@pytest.mark.oracle
def test_indextts_quick_bench_against_upstream(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "indextts", "--quick", "--threads", "1", "--compare", "upstream", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    for case, entry in per["cases"].items():
        koe_run, up_run = entry["koe"]["runs"][0], entry["upstream"]["runs"][0]
        _check_run(koe_run, case)
        _check_run(up_run, case, "upstream")
        assert entry["upstream"]["precision"] == "float32" and entry["ratio"]["total_s"] > 0 and entry["ratio"]["search_s"] > 0
        assert entry["codes_equal"] and entry["wave_equal"], case  # same seed: upstream's codes and waveform, bit for bit
        assert koe_run["codes_sha1"] == up_run["codes_sha1"] and koe_run["wave_sha1"] == up_run["wave_sha1"]
    out_text = capsys.readouterr().out
    assert "koe/up" in out_text and "waveforms equal" in out_text and "codes equal" in out_text


def test_indextts_bench_options() -> None:
    opts, _ = parse_options(["--family", "indextts"])
    assert opts.sizes == ["real"] and opts.cases == ["en", "zh"] and opts.codes == 150 and opts.precision == "fp32"
    opts, _ = parse_options(["--family", "indextts", "--quick", "--case", "zh", "--codes", "20"])
    assert opts.sizes == ["tiny"] and opts.cases == ["zh"] and opts.codes == 20
    assert BENCH.sides["upstream"].venv == ".oracle-indextts"
    for wrong in (["--case", "ja"], ["--size", "2"], ["--precision", "bf16"], ["--codes", "0"], ["--variant", "IndexTTS-2"]):
        with pytest.raises(SystemExit):
            parse_options(["--family", "indextts", *wrong])


def test_indextts_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_INDEXTTS_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "indextts", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-indextts" in capsys.readouterr().err


@pytest.mark.parametrize("beams", [1, 2, 3, 4])
def test_kv_cache_reorder_is_the_gather_it_replaces(beams) -> None:
    """The search's cache reorder (made cheaper after this benchmark's profile: only the rows that
    change are copied, cycles through a row set aside) gives `keys[:, rows]` for every choice of
    rows, and leaves the positions past the cache's length alone."""
    for rows in itertools.product(range(beams), repeat=beams):
        cache = KVCache(2, beams, 2, 3, 10, torch.float32)
        cache.keys.normal_()
        cache.values.normal_()
        cache.length = 7
        keys, values = cache.keys.clone(), cache.values.clone()
        order = torch.tensor(rows)
        cache.reorder(order)
        assert torch.equal(cache.keys[:, :, :, :7], keys[:, order, :, :7]) and torch.equal(cache.values[:, :, :, :7], values[:, order, :, :7]), rows
        assert torch.equal(cache.keys[:, :, :, 7:], keys[:, :, :, 7:]) and torch.equal(cache.values[:, :, :, 7:], values[:, :, :, 7:])
