"""`koe bench --family cosyvoice` on tiny models: koe alone (every case, and the LM in int8), and
against upstream's AutoModel in its own venv (`make oracle-cosyvoice`; a missing venv is an error,
not a skip) with the waveforms' bits compared; the accuracy tool of the opt-in precisions. The
tests share one folder of bench models (built once per module, as `koe bench` caches them).

Against upstream the bench runs v3's two cases, offline and streamed (each after a warm-up request,
so the second request's bits show that upstream's worker resets the stream hop it keeps): its code
is the same for every case. That koe's engine speaks v2 as upstream does is the end-to-end parity
test's (test_cosyvoice_end_to_end_parity.py, `test_engine_speech_equals_upstreams`; v2's stream,
which upstream races on two threads, with the LM's tokens fed in: test_cosyvoice_flow_token2wav_parity.py);
what the bench does with that race (no bits compared, the table says so) is checked here on
stand-in workers.

Until CosyVoice's spec names its benchmark (`bench = "koe.engines.cosyvoice.bench:BENCH"`), the
`declared` fixture puts the declaration among `koe bench`'s families."""

from __future__ import annotations

import json
import sys
from contextlib import contextmanager
from types import SimpleNamespace

import numpy as np
import pytest

from koe.bench import families, kit, main, parse_options
from koe.bench.accuracy import main as accuracy_main
from koe.engines.cosyvoice.bench import BENCH, cases
from koe.engines.cosyvoice.bench import run as bench_run

PARTS = ("text_s", "campplus_s", "tokenizer_s", "mel_s", "lm_s", "flow_s", "vocoder_s")


@pytest.fixture
def declared(monkeypatch):
    table = families.benches()
    if table.get("cosyvoice") is None:
        monkeypatch.setattr(families, "benches", lambda: {**table, "cosyvoice": BENCH})


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    """The bench's model folders, shared by this module's runs (each variant built by the first run that needs it)."""
    return tmp_path_factory.mktemp("cosyvoice-bench-models")


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


def test_cosyvoice_quick_bench_koe(declared, models, tmp_path, capsys) -> None:
    """Every case once (no warm-up)."""
    out = tmp_path / "bench.json"
    argv = ["--family", "cosyvoice", "--quick", "--warmup", "0", "--threads", "1", "--models", str(models), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
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


def test_cosyvoice_quick_bench_lm_in_int8(declared, models, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--family",
        "cosyvoice",
        "--quick",
        "--warmup",
        "0",
        "--threads",
        "1",
        "--case",
        "v3",
        "--precision",
        "int8",
        "--models",
        str(models),
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    entry = json.loads(out.read_text())["sizes"]["tiny"]["cases"]["v3"]
    assert entry["koe"]["precision"] == "int8" and entry["koe"].get("kernel")
    _check_run(entry["koe"]["runs"][0], "v3")


@pytest.mark.oracle
def test_cosyvoice_quick_bench_against_upstream(declared, models, tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "cosyvoice", "--quick", "--case", "v3", "--case", "v3_stream", "--threads", "1", "--compare", "upstream"]
    assert main([*argv, "--models", str(models), "--out", str(out)]) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert list(per["cases"]) == ["v3", "v3_stream"] and set(per["models"]["Fun-CosyVoice3-0.5B-2512"]["load"]) == {"koe", "upstream"}
    for case, entry in per["cases"].items():
        koe_run, up_run = entry["koe"]["runs"][0], entry["upstream"]["runs"][0]
        _check_run(koe_run, case)
        _check_run(up_run, case, "upstream")
        assert entry["upstream"]["precision"] == "float32" and entry["ratio"]["total_s"] > 0 and entry["ratio"]["lm_s"] > 0
        assert entry["wave_equal"], case  # same seed and upstream's CAM++ vector: the same tokens and waveform bits
        assert koe_run["wave_sha1"] == up_run["wave_sha1"] and koe_run["tokens"] == up_run["tokens"]
        assert koe_run["chunks"] == up_run["chunks"]
    out_text = capsys.readouterr().out
    assert "koe/up" in out_text and "v3_stream: waveforms equal" in out_text


class _StandIn:
    """A worker of either side that answers without a model: upstream's CAM++ vector, and per run a
    result of `cases.result`'s shape whose waveform is the same on every call, but for upstream's v2
    stream (its racing threads: other bits each call)."""

    PARTS = dict.fromkeys(("text_s", "campplus_s", "tokenizer_s", "mel_s", "lm_s", "flow_s", "vocoder_s"), 0.01)

    def __init__(self, side: str) -> None:
        self.side, self.commands = side, []

    def call(self, **cmd) -> dict:
        self.commands.append(cmd)
        if cmd["op"] == "embedding":
            return {"embedding": [0.5] * 192}
        stream = cases.CASES[cmd["case"]][1]
        racing = self.side == "upstream" and cmd["case"] in cases.RACING
        samples = np.full(4800, 0.1 * (len(self.commands) if racing else 1), np.float32)
        overlapped = self.side == "upstream" and stream
        return cases.result(kit.wire, 0.2, samples, 0.05 if stream else None, self.PARTS, 10, 0.001, stream, overlapped, chunks=3 if stream else 1)


def test_cosyvoice_bench_leaves_upstreams_racing_stream_uncompared(declared, tmp_path, monkeypatch) -> None:
    """The family's run with --compare upstream on stand-in workers (every case, a warm-up each): koe's
    runs get upstream's CAM++ vector; the waveforms' bits are compared for every case but v2_stream,
    and the table says which."""
    made: list[dict] = []

    @contextmanager
    def loaded_workers(opts, sides, folder, logs, label, progress):
        made.append({side: _StandIn(side) for side in sides})
        yield made[-1], {side: {"load_s": 1.0, "precision": "float32"} for side in sides}

    def bench_model(family, variant, size, root, seed=0):
        (tmp_path / variant).mkdir(exist_ok=True)
        return tmp_path / variant

    stand_in_kit = SimpleNamespace(**{name: getattr(kit, name) for name in kit.__all__})
    stand_in_kit.loaded_workers, stand_in_kit.bench_model = loaded_workers, bench_model
    monkeypatch.setattr(bench_run, "parameter_counts", lambda folder: {"llm": 1, "flow": 1, "hift": 1, "total": 3})
    monkeypatch.setenv("KOE_ORACLE_COSYVOICE_PYTHON", sys.executable)  # the venv's python must exist; the stand-ins start nothing
    opts, _ = parse_options(["--family", "cosyvoice", "--quick", "--threads", "1", "--compare", "upstream", "--out", str(tmp_path / "bench.json")])
    results = bench_run.run(stand_in_kit, opts)
    per = results["sizes"]["tiny"]
    assert list(per["cases"]) == list(cases.CASES) and [list(w) for w in made] == [["koe", "upstream"]] * 2
    for workers in made:
        runs = [c for c in workers["koe"].commands if c["op"] == "run"]
        assert len(runs) == 4 and all(c["embedding"] == [0.5] * 192 for c in runs)  # two cases, a warm-up and a run each
        assert [c["op"] for c in workers["upstream"].commands][0] == "embedding"
        assert not any("embedding" in c for c in workers["upstream"].commands if c["op"] == "run")
    for case, entry in per["cases"].items():
        assert entry["ratio"]["total_s"] == 1.0
        if case in cases.RACING:
            assert not {"wave_equal", "codes_equal"} & set(entry) and "upstream" not in entry.get("codes_equal_to", {}), case
        else:
            assert entry["wave_equal"] is True and entry["codes_equal"] is True, case
    table = bench_run.table(stand_in_kit, results, width=200)
    assert "tiny v2_stream: waveforms not compared" in table and "tiny v2: waveforms equal" in table and "tiny v3_stream: waveforms equal" in table
    assert "tiny v2_stream: waveforms equal" not in table


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


def test_cosyvoice_accuracy_tool(declared, models, tmp_path, capsys) -> None:
    """bf16's error on the exact path's own steps: close (random weights make a flat distribution, so
    free-running tokens part early: only the teacher-forced measures are bounded here)."""
    out = tmp_path / "acc.json"
    argv = ["--family", "cosyvoice", "--precision", "bf16", "--variant", "Fun-CosyVoice3-0.5B-2512", "--threads", "1", "--models", str(models)]
    assert accuracy_main([*argv, "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert result["precision"] == "bfloat16" and result["size"] == "tiny" and result["version"] == 3
    forced = result["teacher_forced"]
    assert forced["steps"] == result["free_running"]["exact_tokens"] + 1 > 1  # every token's step and the end's
    assert 0.999 < forced["cosine_mean"] <= 1.0 and 0.5 < forced["top1_agreement"] <= 1.0 and 0 < forced["max_abs_logp_diff"] < 1.0
    assert 0.0 <= result["free_running"]["tokens_equal"] <= 1.0
