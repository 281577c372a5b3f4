"""`koe bench --quick` on a tiny model: runs end to end in worker processes and writes JSON of the expected shape."""

from __future__ import annotations

import json

from koe.bench import main, parse_options
from koe.bench.models import bench_model, bytes_per_frame


def test_quick_bench_writes_results(tmp_path) -> None:
    out = tmp_path / "bench.json"
    status = main(["--quick", "--threads", "1", "--case", "custom_voice", "--case", "streaming", "--models", str(tmp_path / "models"), "--out", str(out)])
    assert status == 0
    results = json.loads(out.read_text())
    assert results["options"]["frames"] == 4 and results["machine"]["threads"] == 1
    per = results["sizes"]["tiny"]
    cv = per["cases"]["custom_voice"]["koe"]
    assert cv["precision"] == "float32"
    (run,) = cv["runs"]
    assert run["frames"] == 4  # end of speech disabled: exactly --frames frames
    for key in ("load_s", "prefill_s", "ms_per_frame", "talker_ms_per_frame", "predictor_ms_per_frame", "codec_s_per_audio_s", "peak_rss"):
        assert cv["summary"][key]["median"] > 0, key
    assert cv["achieved_gbps"] > 0
    stream = per["cases"]["streaming"]["koe"]["summary"]
    assert stream["ttfa_s"]["median"] > 0
    assert per["models"]["custom_voice"]["weights_bytes"] > 0


def test_options_and_model_cache(tmp_path) -> None:
    opts, _ = parse_options(["--quick"])
    assert opts.sizes == ["tiny"] and opts.runs == 1 and not opts.bandwidth
    opts, _ = parse_options(["--size", "1.7b", "--precision", "int8", "--torch-profile"])
    assert opts.sizes == ["1.7b"] and opts.precision == "int8" and opts.profile == "torch"
    folder = bench_model("custom_voice", "tiny", tmp_path)
    assert bench_model("custom_voice", "tiny", tmp_path) == folder  # cached
    assert (folder / ".complete").exists()
    assert bytes_per_frame(folder, 1) > 0


def test_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle" in capsys.readouterr().err
