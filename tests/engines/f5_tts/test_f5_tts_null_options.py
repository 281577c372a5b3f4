"""F5-TTS's `sway_sampling_coef=None` (no sway: a uniform time grid, as upstream's `infer_process`)
is told from "not given" (the default, -1.0) on every way in: the options schema, `koe.load(...)
.generate`, the drop-in `F5TTS.infer`, `koe speak --opt sway_sampling_coef=null`, the server's
JSON `null`, and over a settings default. A sway of 0.0 is the same uniform grid, so None gives
its samples bit for bit (the oracle parity cases compare None with upstream itself).
"""

from __future__ import annotations

import numpy as np
import pytest
from fastapi.testclient import TestClient
from product_helpers import assert_error, koe_command, speechy, wav_bytes

import koe
from koe.compat import f5_tts as compat
from koe.engines.base import InvalidOption, Option, OptionsSchema
from koe.engines.f5_tts.fixtures import write_random_model
from koe.engines.f5_tts.spec import options_schema
from koe.server import create_app
from koe.service import KoeHome, load_settings

REF_TEXT = "A short test clip."
TEXT = "Hello there."
FAST = {"nfe_step": 2}


@pytest.fixture(scope="module")
def f5_dir(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("f5-null") / "F5TTS_v1_Base", "F5TTS_v1_Base")


@pytest.fixture(scope="module")
def clip(tmp_path_factory):
    path = tmp_path_factory.mktemp("f5-null-clip") / "clip.wav"
    path.write_bytes(wav_bytes(speechy(1.5)))
    return path


@pytest.fixture(scope="module")
def engine(f5_dir):
    tts = koe.load(f5_dir, device="cpu")
    yield tts
    tts.close()


@pytest.fixture(scope="module")
def spoken(engine, clip):
    """The samples with no sway (0.0: the uniform grid) and with the default sway, seed 3."""
    voice = engine.prepare_voice(str(clip), ref_text=REF_TEXT)
    uniform = engine.generate(TEXT, voice=voice, seed=3, sway_sampling_coef=0.0, **FAST).audio
    default = engine.generate(TEXT, voice=voice, seed=3, **FAST).audio
    assert not np.array_equal(uniform, default)  # the two grids differ, so the checks below tell them apart
    return voice, uniform, default


def test_the_schema_keeps_a_null_where_the_option_gives_it_a_meaning():
    schema = options_schema()
    assert schema.validate({"sway_sampling_coef": None}) == {"sway_sampling_coef": None}
    assert schema.validate({"nfe_step": None, "fix_duration": None}) == {}  # elsewhere None is "not given": the default
    assert schema.validate({}) == {}
    described = {o["name"]: o for o in schema.describe()}
    assert described["sway_sampling_coef"]["default"] == -1.0 and "uniform time grid" in described["sway_sampling_coef"]["null"]
    assert "null" not in described["nfe_step"]
    with pytest.raises(InvalidOption, match=r"sway_sampling_coef='none': must be a number, or null \(no sway"):
        schema.validate({"sway_sampling_coef": "none"})
    flag = OptionsSchema((Option("flag", "bool", "a flag", True, null="off, as upstream reads None"),))
    assert flag.validate({"flag": None}) == {"flag": None}
    with pytest.raises(InvalidOption, match=r"must be true or false, or null \(off"):
        flag.validate({"flag": 1})


def test_engine_settings_tell_none_from_not_given(engine):
    assert engine.engine.settings({"sway_sampling_coef": None}).sway_sampling_coef is None
    assert engine.engine.settings({}).sway_sampling_coef == -1.0
    assert engine.engine.settings({"sway_sampling_coef": None}).flow.sway_sampling_coef is None


def test_python_api_none_is_no_sway(engine, spoken):
    voice, uniform, default = spoken
    none = engine.generate(TEXT, voice=voice, seed=3, sway_sampling_coef=None, **FAST).audio
    np.testing.assert_array_equal(none, uniform)
    streamed = np.concatenate([c.samples for c in engine.stream(TEXT, voice=voice, seed=3, sway_sampling_coef=None, chunk_s=0.2, **FAST)])
    np.testing.assert_array_equal(streamed, uniform)
    request = koe.SynthesisRequest(TEXT, voice=voice, seed=3, options={"sway_sampling_coef": None, **FAST})
    np.testing.assert_array_equal(np.concatenate([c.samples for c in engine.engine.synthesize(request)]), uniform)
    # the other options' None stays "not given"
    np.testing.assert_array_equal(engine.generate(TEXT, voice=voice, seed=3, cfg_strength=None, **FAST).audio, default)


def test_the_drop_in_passes_none_as_upstream(f5_dir, clip, monkeypatch):
    import yaml

    monkeypatch.setitem(compat.ARCHS, "F5TTS_v1_Base", yaml.safe_load((f5_dir / "config.yaml").read_text())["model"])
    ckpt = next(f5_dir.glob("model_*"))
    tts = compat.F5TTS(ckpt_file=str(ckpt), vocab_file=str(f5_dir / "vocab.txt"), vocoder_local_path=str(f5_dir / "vocos"), device="cpu")
    none, _, _ = tts.infer(str(clip), REF_TEXT, TEXT, seed=3, sway_sampling_coef=None, **FAST)
    zero, _, _ = tts.infer(str(clip), REF_TEXT, TEXT, seed=3, sway_sampling_coef=0.0, **FAST)
    default, _, _ = tts.infer(str(clip), REF_TEXT, TEXT, seed=3, **FAST)
    np.testing.assert_array_equal(none, zero)
    assert not np.array_equal(none, default)


def test_cli_opt_null_is_no_sway(f5_dir, clip, tmp_path, monkeypatch):
    koe_cli = koe_command(tmp_path, monkeypatch)
    base = ["--model", f5_dir, "--ref", clip, "--ref-text", REF_TEXT, "--opt", "nfe_step=2", "--seed", "3"]
    for name, opt in (("null", "sway_sampling_coef=null"), ("zero", "sway_sampling_coef=0"), ("default", "nfe_step=2")):
        koe_cli("speak", TEXT, *base, "--opt", opt, "-o", tmp_path / f"{name}.wav")
    null = (tmp_path / "null.wav").read_bytes()
    assert null == (tmp_path / "zero.wav").read_bytes() and null != (tmp_path / "default.wav").read_bytes()
    r = koe_cli("speak", TEXT, *base, "--opt", "sway_sampling_coef=none", "-o", tmp_path / "bad.wav", ok=False)
    assert r.exit_code != 0 and "or null (no sway" in r.output


def test_server_json_null_is_no_sway_even_over_a_settings_default(tmp_path, f5_dir, clip):
    settings = load_settings(tmp_path, flags={"models": {"default": "f5"}, "synthesis": {"options": {"sway_sampling_coef": -0.5}}}, environ={})
    home = KoeHome(settings)
    home.models.import_model(f5_dir, "f5", link=True)
    with TestClient(create_app(home)) as client:
        r = client.post("/v1/audio/voices", data={"name": "kim", "transcript": REF_TEXT}, files={"file": ("clip.wav", clip.read_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text

        def speak(options: dict, **flat) -> bytes:
            body = {"model": "f5", "input": TEXT, "voice": "kim", "response_format": "pcm", "seed": 3, "options": {**FAST, **options}, **flat}
            r = client.post("/v1/audio/speech", json=body)
            assert r.status_code == 200, r.text
            return r.content

        null, zero, half, given = speak({"sway_sampling_coef": None}), speak({"sway_sampling_coef": 0.0}), speak({}), speak({"sway_sampling_coef": -0.5})
        assert null == zero  # an explicit null is upstream's None, over the settings default
        assert half == given and null != half  # left out: the settings default (-0.5)
        assert speak({}, sway_sampling_coef=None) == null  # a flat field too
        card = {o["name"]: o for o in client.get("/v1/models/f5").json()["options"]}
        assert "uniform time grid" in card["sway_sampling_coef"]["null"]
        bad = client.post("/v1/audio/speech", json={"model": "f5", "input": TEXT, "voice": "kim", "options": {"sway_sampling_coef": "none"}})
        assert_error(bad, 400, "or null (no sway", param="sway_sampling_coef")
    home.close()
