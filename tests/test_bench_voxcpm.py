"""`koe bench --family voxcpm` on a tiny model: koe alone, and against upstream voxcpm 2.0.3 in its
own venv (`make oracle-voxcpm`; a missing venv is an error, not a skip), waveform bits compared."""

from __future__ import annotations

import json

import pytest

from koe.bench import main, parse_options
from koe.bench.models import bench_model
from koe.engines.voxcpm.bench.models import parameter_counts

PART_KEYS = ("ms_per_patch", "base_lm_ms", "residual_lm_ms", "dit_ms", "locenc_ms", "vae_ms")


def _check_run(run: dict, case: str, patches: int, side: str = "koe") -> None:
    assert run["patches"] == run["dit_calls"] == patches  # min_len = max_len: exactly `patches`, on both sides
    assert run["base_calls"] == patches - (side == "koe")  # koe does not feed the last patch back; upstream steps both LMs once more
    assert abs(run["audio_s"] - patches * 0.16) < 1e-6  # VoxCPM2: 4 latent frames x 1920 samples at 48 kHz per patch
    for key in PART_KEYS + ("total_s", "rtf", "prefill_s", "peak_rss"):
        assert run[key] > 0, (case, key)
    parts = sum(run[k] for k in PART_KEYS[1:])
    assert abs(parts - run["ms_per_patch"]) < 1e-6 * max(1.0, parts)
    assert (run["first_chunk_s"] is not None) == (case == "stream") and (run["prompt_s"] > 0) == (case == "clone")


def test_voxcpm_quick_bench_koe(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    assert main(["--family", "voxcpm", "--quick", "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0
    results = json.loads(out.read_text())
    assert results["family"] == "voxcpm" and results["options"]["patches"] == 4 and results["options"]["variant"] == "VoxCPM2"
    per = results["sizes"]["tiny"]
    assert set(per["cases"]) == {"short", "clone", "stream"}
    for case, entry in per["cases"].items():
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        _check_run(run, case, 4)
    assert per["models"]["voxcpm"]["parameters"]["total"] > per["models"]["voxcpm"]["parameters"]["audio_vae"] > 0
    table = capsys.readouterr().out
    assert "ms/patch" in table and "base LM" in table and "stream" in table


def test_voxcpm_quick_bench_against_upstream(tmp_path, capsys) -> None:
    out = tmp_path / "bench.json"
    argv = [
        "--family",
        "voxcpm",
        "--quick",
        "--threads",
        "1",
        "--patches",
        "5",
        "--compare",
        "upstream",
        "--models",
        str(tmp_path / "models"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    for case, entry in per["cases"].items():
        assert entry["wave_equal"], case  # same seed, same waveform bits as upstream
        assert entry["koe"]["runs"][0]["wave_sha1"] == entry["upstream"]["runs"][0]["wave_sha1"]
        for side in ("koe", "upstream"):
            assert entry[side]["precision"] == "float32"
            _check_run(entry[side]["runs"][0], case, 5, side)
        assert entry["ratio"]["total_s"] > 0 and entry["ratio"]["dit_ms"] > 0
    assert "koe/up" in capsys.readouterr().out


def test_voxcpm15_quick_clone_against_upstream(tmp_path, capsys) -> None:
    """VoxCPM 1.5 (AudioVAE V1, 44.1 kHz; upstream reads the prompt with torchaudio.load)."""
    out = tmp_path / "bench.json"
    argv = [
        "--family",
        "voxcpm",
        "--variant",
        "VoxCPM1.5",
        "--quick",
        "--threads",
        "1",
        "--case",
        "clone",
        "--case",
        "stream",
        "--compare",
        "upstream",
        "--models",
        str(tmp_path / "models"),
        "--out",
        str(out),
    ]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert per["models"]["voxcpm"]["variant"] == "VoxCPM1.5"
    for case, entry in per["cases"].items():
        assert entry["wave_equal"], case
        assert entry["koe"]["runs"][0]["patches"] == entry["upstream"]["runs"][0]["patches"] == 4


def test_voxcpm_options() -> None:
    opts, _ = parse_options(["--family", "voxcpm"])
    assert opts.sizes == ["real"] and opts.cases == ["short", "clone", "stream"] and opts.variant == "VoxCPM2"
    assert opts.patches == 16 and opts.timesteps == 10 and opts.precision == "fp32"
    opts, _ = parse_options(["--family", "voxcpm", "--quick", "--case", "clone", "--variant", "VoxCPM1.5", "--precision", "bf16"])
    assert opts.sizes == ["tiny"] and opts.cases == ["clone"] and opts.variant == "VoxCPM1.5" and opts.precision == "bf16"
    assert opts.patches == 4 and opts.timesteps == 2 and not opts.bandwidth
    for wrong in (["--case", "nfe32"], ["--size", "0.6b"], ["--precision", "int8"], ["--variant", "F5TTS_Base"], ["--patches", "0"]):
        with pytest.raises(SystemExit):
            parse_options(["--family", "voxcpm", *wrong])
    assert parse_options(["--family", "f5_tts"])[0].variant == "F5TTS_v1_Base"  # the other families are unchanged
    with pytest.raises(SystemExit):
        parse_options(["--family", "f5_tts", "--variant", "VoxCPM2"])


def test_voxcpm_model_cache_and_counts(tmp_path) -> None:
    folder = bench_model("voxcpm", "VoxCPM2", "tiny", tmp_path)
    assert bench_model("voxcpm", "VoxCPM2", "tiny", tmp_path) == folder and (folder / ".complete").exists()
    counts = parameter_counts(folder)
    assert counts["base_lm"] > 0 and counts["feat_decoder"] > 0 and counts["total"] == sum(v for k, v in counts.items() if k != "total")


def test_voxcpm_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_VOXCPM_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "voxcpm", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-voxcpm" in capsys.readouterr().err
