"""scripts/gpu_check.py's families part, run on the CPU (the GPU run is a lent machine's): every
registered family but Qwen3-TTS speaks one short request from its tiny fixture through the engine
contract, in fp32 and bf16, and the part records it without an error."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from koe.engines import registry

SCRIPT = Path(__file__).resolve().parents[1] / "scripts" / "gpu_check.py"


def test_every_family_speaks_through_the_gpu_checks_families_part(tmp_path, monkeypatch):
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    gpu_check = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gpu_check)
    monkeypatch.setattr(gpu_check, "DEV", "cpu")
    result = gpu_check.family_checks(tmp_path)
    assert set(result) == set(registry.families()) - {"qwen3_tts"}
    for family, entry in result.items():
        assert "error" not in entry, (family, entry.get("traceback"))
        runs = {k: v for k, v in entry.items() if "@" in k}
        assert "fp32@cpu" in runs and all(r["finite"] and r["audio_s"] > 0 for r in runs.values()), family
        assert runs["fp32@cpu"]["precision"] == "float32"
