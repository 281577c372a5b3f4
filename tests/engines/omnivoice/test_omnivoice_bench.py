"""`koe bench --family omnivoice --quick` on the tiny random model, koe alone: every default case
(the model's own voice at 32 and 16 unmasking steps, a clone at 32) once, each part timed."""

from __future__ import annotations

import json

from koe.bench import main
from koe.engines.omnivoice.bench import cases

PARTS = ("prompt_s", "text_s", "backbone_s", "decode_s")


def test_omnivoice_quick_bench_koe(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "omnivoice", "--quick", "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert list(per["cases"]) == list(cases.DEFAULT_CASES)
    for case, entry in per["cases"].items():
        mode, steps = cases.CASES[case]
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        assert run["mode"] == mode and run["num_step"] == steps and run["steps"] == steps, case  # one backbone forward a step
        assert run["audio_s"] > 0 and len(run["wave_sha1"]) == 40, case
        for key in ("total_s", "rtf", "text_s", "backbone_s", "ms_per_step", "decode_s", "peak_rss"):
            assert run[key] > 0, (case, key)
        if mode == "clone":  # the clone's prompt is made inside the request
            assert run["prompt_s"] > 0.001, case
        assert abs(run["other_s"] + sum(run[k] for k in PARTS) - run["total_s"]) < 1e-9 and run["other_s"] > -1e-6, case
    params = per["models"]["omnivoice"]["parameters"]
    assert params["total"] == params["lm"] + params["audio_tokenizer"] and min(params.values()) > 0
    table = capsys.readouterr().out
    assert "ms/step" in table and "backbone s" in table and "clone32" in table
