"""One precision layer (koe.runtime.precision): the vocabulary and its parser, what each model says it
runs (`Capabilities.precisions`), a precision a model cannot run refused before loading (the service
with 400, the CLI with one line, `koe.load` with the names it can), VoxCPM's int8 with its error
bounded, and bf16 on every family."""

from __future__ import annotations

import json

import numpy as np
import pytest
from fastapi.testclient import TestClient
from product_helpers import assert_error, speechy, strict_koe_command, wav_bytes
from shared_folders import fixture as shared_fixture

import koe
from koe.engines import registry
from koe.engines.base import SynthesisRequest, VoiceReference
from koe.engines.registry import load_engine
from koe.runtime import precision
from koe.runtime.precision import UnsupportedPrecision
from koe.service import KoeHome, load_settings
from koe.service.errors import InvalidRequest
from koe.service.synthesis.requests import SpeechRequest

OFFERED = {"qwen3_tts": ("fp32", "bf16", "int8", "int4"), "voxcpm": ("fp32", "bf16", "int8"), "f5_tts": ("fp32", "bf16")}


@pytest.fixture(scope="module")
def folders() -> dict[str, object]:
    return {family: shared_fixture(family) for family in OFFERED}


# -- the vocabulary -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("typed", "name"),
    [("fp32", "fp32"), ("float32", "fp32"), ("exact", "fp32"), (" BF16", "bf16"), ("bfloat16", "bf16"), ("int8", "int8"), ("INT4", "int4"), (None, None)],
)
def test_the_parser_takes_the_names_users_type(typed, name):
    assert precision.parse(typed) == name


def test_an_unknown_precision_names_the_vocabulary():
    with pytest.raises(UnsupportedPrecision, match=r"unknown precision 'fp8'; use fp32 \(exact\), bf16, int8 or int4"):
        precision.parse("fp8")
    with pytest.raises(ValueError, match=r"precision='int4' is not offered for F5-TTS: use fp32 \(exact\) or bf16") as e:
        precision.check("int4", ("fp32", "bf16"), "F5-TTS")
    assert e.value.offered == ("fp32", "bf16")
    assert precision.check("bfloat16", ("fp32", "bf16")) == "bf16"


def test_the_vocabulary_is_torch_free():
    import subprocess
    import sys

    code = "import sys, koe.runtime.precision as p; p.check('bf16', p.PRECISIONS); print('torch' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"


# -- what each model runs --------------------------------------------------------------------------
@pytest.mark.parametrize("family", list(OFFERED))
def test_each_model_declares_its_precisions(folders, family):
    caps = registry.describe(folders[family]).capabilities
    assert caps.precisions == OFFERED[family] and caps.to_dict()["precisions"] == list(OFFERED[family])


@pytest.mark.parametrize("family", list(OFFERED))
def test_koe_load_refuses_a_precision_the_model_does_not_run(folders, family):
    for mode in set(precision.PRECISIONS) - set(OFFERED[family]):
        with pytest.raises(UnsupportedPrecision, match="is not offered for .*: use fp32 .exact.") as e:
            koe.load(folders[family], device="cpu", precision=mode)
        assert e.value.offered == OFFERED[family]


# -- the service, the CLI, HTTP --------------------------------------------------------------------
def _home(tmp_path, folder, mode: str) -> KoeHome:
    home = KoeHome(load_settings(tmp_path / "home", flags={"models": {"precision": mode}}, environ={}))
    home.models.import_model(folder, "m", link=True)
    return home


def test_the_service_refuses_before_loading(folders, tmp_path):
    from koe.service.synthesis.synthesizer import Synthesizer

    synth = Synthesizer(_home(tmp_path, folders["voxcpm"], "int4"))
    with pytest.raises(InvalidRequest, match=r"model 'm' cannot run precision 'int4' .*it runs fp32, bf16, int8") as e:
        synth.planner.plan(SpeechRequest(text="hello", model="m"))
    assert e.value.status == 400 and e.value.param == "model"
    assert synth.cache.loaded() == [] and synth.cache.failures() == []  # nothing loaded, nothing remembered as broken


def test_the_http_api_answers_400_naming_what_the_model_runs(folders, tmp_path):
    from koe.server import create_app

    home = _home(tmp_path, folders["voxcpm"], "int4")
    with TestClient(create_app(home)) as c:  # the start-up preload refuses it too, without remembering the model as broken
        assert c.app.state.koe.synthesizer.cache.failures() == []
        info = c.get("/v1/models/m")
        assert info.status_code == 200 and info.json()["capabilities"]["precisions"] == ["fp32", "bf16", "int8"]
        r = c.post("/v1/audio/speech", json={"model": "m", "input": "Hello there.", "voice": "alloy"})  # the model's own voice
        assert_error(r, 400, "cannot run precision 'int4'", "it runs fp32, bf16, int8", param="model")


def test_the_cli_says_which_precisions_a_model_runs(folders, tmp_path, monkeypatch):
    koe_cli = strict_koe_command(tmp_path, monkeypatch)
    clip = tmp_path / "clip.wav"
    clip.write_bytes(wav_bytes(speechy(2.0)))
    r = koe_cli(
        "speak",
        "Hello there.",
        "--model",
        folders["f5_tts"],
        "--ref",
        clip,
        "--ref-text",
        "A clip.",
        "--precision",
        "int8",
        "-o",
        tmp_path / "out.wav",
        ok=False,
    )
    assert r.exit_code == 2 and "cannot run precision 'int8'" in r.stderr and "it runs fp32, bf16" in r.stderr
    info = koe_cli("models", "info", folders["voxcpm"], ok=True)
    assert "precisions: fp32, bf16, int8" in info.stdout
    assert json.loads(koe_cli("models", "info", folders["qwen3_tts"], "--json", ok=True).stdout)["capabilities"]["precisions"] == list(OFFERED["qwen3_tts"])


def test_settings_take_the_aliases():
    settings = load_settings(None, flags={"models": {"precision": "bfloat16"}}, environ={})
    assert settings.models.precision == "bf16"


# -- the modes run ---------------------------------------------------------------------------------
def _speak(engine, family: str):
    voice = engine.capabilities.speakers[0] if engine.capabilities.speakers else None
    if family == "f5_tts":
        voice = engine.prepare_voice(VoiceReference((speechy(2.0), 24000), "A short clip."))
    options = {"qwen3_tts": {"max_new_tokens": 8}, "voxcpm": {"max_len": 8}, "f5_tts": {"nfe_step": 4}}[family]  # random weights: a few steps
    chunks = list(engine.synthesize(SynthesisRequest(text="Hello there.", voice=voice, seed=1, options=options)))
    return np.concatenate([c.samples for c in chunks]), chunks[-1].metadata


@pytest.mark.filterwarnings("ignore:speech was cut off")
@pytest.mark.parametrize("family", list(OFFERED))
def test_bf16_runs_on_every_family(folders, family):
    engine = load_engine(folders[family], device="cpu", precision="bfloat16")
    samples, meta = _speak(engine, family)
    assert engine.precision == meta["precision"] == "bfloat16" and len(samples) > 0 and np.isfinite(samples).all()


@pytest.mark.filterwarnings("ignore:speech was cut off")
def test_voxcpm_int8_runs_with_its_error_bounded(folders):
    from koe.bench import kit
    from koe.engines.voxcpm.bench.accuracy import measure

    engine = load_engine(folders["voxcpm"], device="cpu", precision="int8")
    samples, meta = _speak(engine, "voxcpm")
    assert meta["precision"] == "int8" and meta["kernel"] == engine.kernel and len(samples) > 0 and np.isfinite(samples).all()
    error = measure(kit, folders["voxcpm"], "int8", patches=8)
    assert error["precision"] == "int8"
    assert error["dit_condition"]["cosine_min"] > 0.99 and error["stop"]["agreement"] == 1.0
    assert error["patch_snr_db"] > 25 and error["waveform_snr_db"] > 25  # measured: 35.6 and 34.7 dB on this fixture
