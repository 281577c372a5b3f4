"""The family kit, shown end to end by a toy family in a package of its own (tests/plugins/koe_sine).

The package is installed for real (pip, into a folder put on PYTHONPATH: `toy_family`) and found
through the `koe.families` entry point alone: no file of koe's names it. It then goes through
`koe speak` (its option as a flag), `koe models info`, `koe voices` (a voice cloned from a clip,
added, prepared, listed and spoken with), a real `koe serve` (/v1/models, /v1/audio/speech),
`koe bench --quick --family sine` and the engine contract (tests/engines/test_engine_contract.py,
which runs over every registered family). The web page's model list: tests/test_web_toy_family.py.
"""

from __future__ import annotations

import ast
import io
import json
import re

import httpx
import numpy as np
import pytest
import soundfile as sf
from safetensors.numpy import load_file
from toy_family import HUM_HZ, koe, peak_hz, run, start_sine_serve, write_hum

from koe.engines import registry

pytest_plugins = ["toy_family"]  # sine_site, sine_model
pytestmark = pytest.mark.slow  # pip, and koe in real processes


@pytest.fixture(scope="module")
def home(tmp_path_factory):
    return tmp_path_factory.mktemp("sine-home") / "home"


@pytest.fixture(scope="module")
def server(sine_site, sine_model, tmp_path_factory):
    s = start_sine_serve(sine_site, sine_model, tmp_path_factory.mktemp("sine-serve"))
    yield s
    s.stop()


def test_the_family_comes_from_the_installed_package_alone(sine_site, home):
    assert "sine" not in registry.families()  # not in this process: koe itself knows nothing of it
    code = "from koe.engines import registry; print(list(registry.families())); print(registry.families()['sine'])"
    out = run(sine_site, home, "-c", code).stdout.splitlines()
    names = ast.literal_eval(out[0])
    plugins = [f for f in registry.families() if f not in registry.FAMILIES]  # the ones installed here (IndexTTS's package)
    assert names[: len(registry.FAMILIES)] == list(registry.FAMILIES)  # the built-ins first
    assert sorted(names[len(registry.FAMILIES) :]) == sorted([*plugins, "sine"]) and out[1] == "koe_sine.spec:SPEC"


def test_koe_speak_takes_the_family_option_as_a_flag(sine_site, sine_model, home, tmp_path):
    def speak(name: str, *flags: str) -> tuple[np.ndarray, int]:
        koe(sine_site, home, "speak", "Hello.", "-m", sine_model, "--voice", "low", "--seed", "4", "-o", tmp_path / name, *flags)
        return sf.read(tmp_path / name, dtype="float32")

    plain, rate = speak("plain.wav")
    octave, _ = speak("octave.wav", "--pitch-shift", "12")
    assert rate == 16000 and len(plain) == len(octave) == 3200  # one word: 0.2 s at 16 kHz
    assert peak_hz(octave, rate) / peak_hz(plain, rate) == pytest.approx(2.0, rel=0.05)  # twelve semitones up
    bad = koe(sine_site, home, "speak", "Hello.", "-m", sine_model, "--voice", "low", "--pitch-shift", "30", "-o", tmp_path / "x.wav", check=False)
    assert bad.returncode != 0 and "pitch_shift" in bad.stderr and "[-24, 24]" in bad.stderr


def test_koe_models_info_shows_what_the_spec_describes(sine_site, sine_model, home):
    koe(sine_site, home, "models", "import", sine_model, "--name", "sine", "--link")
    out = koe(sine_site, home, "models", "info", "sine").stdout
    assert re.search(r"model: sine base", out) and "random weights" in out
    assert "speakers: low, high" in out and "clone_without_transcript, preset" in out and "precisions: fp32" in out
    assert "in float32 (CPU, exact)" in out and "bfloat16" not in out  # the memory it needs in the precisions it runs
    assert "pitch_shift" in out and "semitones every tone is moved" in out
    assert "license: koe-sine Tone Terms 1.0 (LicenseRef-koe-sine-Tone-Terms-1.0) — TERMS.md in the model folder" in out  # the spec's licence
    assert "license accepted: not yet" in out  # it needs acceptance, and nothing accepted it in this home


def test_a_pull_of_the_familys_release_asks_for_its_licence_once(sine_site, sine_model, tmp_path, monkeypatch):
    """The licence flow is the kit's: `koe models pull` of the plugin's release (on a fake hub) refuses off a terminal
    until `--accept-license`, records it, and `koe models info` says it was accepted."""
    from product_helpers import folder_files, install_fake_hub

    hub = install_fake_hub(monkeypatch, {"koe-sine/tones": folder_files(sine_model)})  # HF_ENDPOINT: the subprocesses' too
    try:
        home = tmp_path / "home"
        refused = koe(sine_site, home, "models", "pull", "koe-sine/tones", check=False)
        assert refused.returncode != 0 and "--accept-license" in refused.stderr and "koe-sine Tone Terms 1.0" in refused.stderr
        assert hub.hits == [] and not (home / "models" / "tones").exists()  # nothing looked up, nothing written
        koe(sine_site, home, "models", "pull", "koe-sine/tones", "--accept-license")
        out = koe(sine_site, home, "models", "info", "tones").stdout
        assert "license accepted: yes" in out and "(pull of koe-sine/tones)" in out
        koe(sine_site, home, "models", "pull", "koe-sine/tones", "--name", "again")  # accepted once: not asked again
    finally:
        hub.close()


def test_koe_voices_clones_a_voice_from_a_clip_prepares_lists_and_speaks_it(sine_site, sine_model, home, tmp_path):
    koe(sine_site, home, "voices", "add", "hum", "--ref", write_hum(tmp_path / "hum.wav"))
    assert re.search(r"^hum\s+clip\s+3\.0", koe(sine_site, home, "voices", "list").stdout, re.MULTILINE)
    koe(sine_site, home, "speak", "Hello.", "-m", sine_model, "--voice", "hum", "--seed", "1", "-o", tmp_path / "hum-says.wav")
    samples, rate = sf.read(tmp_path / "hum-says.wav", dtype="float32")
    assert peak_hz(samples, rate) == pytest.approx(HUM_HZ, abs=3)  # the clip's pitch is the voice
    r = koe(sine_site, home, "voices", "prepare", tmp_path / "hum.wav", "-o", tmp_path / "prompt", "-m", sine_model)  # a clip alone: no transcript asked
    assert "from the clip alone" in r.stderr
    assert json.loads((tmp_path / "prompt" / "prompt.json").read_text())["family"] == "sine"
    assert float(load_file(str(tmp_path / "prompt" / "prompt.safetensors"))["pitch"][0]) == pytest.approx(HUM_HZ, abs=1)
    code = f"import koe; e = koe.load({str(sine_model)!r}); print(e.load_voice({str(tmp_path / 'prompt')!r}).pitch)"  # the engine reads it back
    assert float(run(sine_site, home, "-c", code).stdout) == pytest.approx(HUM_HZ, abs=1)


def test_koe_serve_lists_the_model_and_speaks_with_its_voices_and_option(server):
    models = httpx.get(f"{server.url}/v1/models", timeout=10).json()["data"]
    assert [m["id"] for m in models if m["id"] == "sine"] == ["sine"]

    def speech(**body) -> tuple[np.ndarray, int]:
        r = httpx.post(f"{server.url}/v1/audio/speech", json={"model": "sine", "input": "Hello.", "response_format": "wav", **body}, timeout=60)
        assert r.status_code == 200, r.text
        return sf.read(io.BytesIO(r.content), dtype="float32")

    alloy, rate = speech(voice="alloy", seed=2)  # OpenAI's names map to the preset speakers (the spec's openai_voice)
    assert rate == 16000 and len(alloy) == 3200
    np.testing.assert_array_equal(speech(voice="alloy", seed=2)[0], alloy)  # the seed decides the noise
    assert not np.array_equal(speech(voice="alloy", seed=3)[0], alloy)
    shifted, _ = speech(voice="alloy", seed=2, pitch_shift=12)  # the option, flat in the body
    assert peak_hz(shifted, rate) / peak_hz(alloy, rate) == pytest.approx(2.0, rel=0.05)
    hum, _ = speech(voice="hum", seed=2)  # a library voice, prepared by the server with this model
    assert peak_hz(hum, rate) == pytest.approx(HUM_HZ, abs=3)
    bad = httpx.post(f"{server.url}/v1/audio/speech", json={"model": "sine", "input": "Hi.", "voice": "alloy", "pitch_shift": 99}, timeout=30)
    assert bad.status_code == 400 and "pitch_shift" in bad.text


def test_koe_bench_quick_times_the_family_through_the_contract(sine_site, home, tmp_path):
    r = koe(sine_site, home, "bench", "--quick", "--family", "sine", "--out", tmp_path / "bench.json", timeout=300)
    results = json.loads((tmp_path / "bench.json").read_text())
    assert results["family"] == "sine" and set(results["sizes"]["tiny"]["cases"]) == {"sentence", "stream"}
    assert re.search(r"^sentence\s", r.stdout, re.MULTILINE) and re.search(r"^stream\s", r.stdout, re.MULTILINE)


def test_the_engine_contract_runs_over_the_installed_family(sine_site, home):
    r = run(sine_site, home, "-m", "pytest", "-q", "-p", "no:randomly", "tests/engines/test_engine_contract.py", "-k", "sine", timeout=600, check=False)
    tail = r.stdout[-3000:]
    assert r.returncode == 0, tail + r.stderr[-2000:]
    passed = re.search(r"(\d+) passed", tail)
    assert passed and int(passed.group(1)) >= 10 and "skipped" not in tail and "failed" not in tail, tail


def test_koe_convert_says_speech_again_in_a_cloned_voice(sine_site, sine_model, home, tmp_path):
    """Voice conversion (`Capabilities.conversion`): the toy carries the source's loudness on a tone at
    the voice's pitch, so the output is as long as the source and at the voice's pitch."""
    koe(sine_site, home, "models", "import", sine_model, "--name", "sine", "--link", check=False)  # kept from an earlier test, or added here
    koe(sine_site, home, "voices", "add", "hum", "--ref", write_hum(tmp_path / "hum.wav"), "--overwrite")
    t = np.arange(16000 * 2) / 16000
    source = tmp_path / "speech.wav"
    sf.write(source, (0.5 * np.sin(2 * np.pi * 440 * t) * (t < 1.2)).astype(np.float32), 16000)
    assert "conversion: yes" in koe(sine_site, home, "models", "info", "sine").stdout
    koe(sine_site, home, "convert", source, "-m", "sine", "--voice", "hum", "--seed", "3", "-o", tmp_path / "hum.flac")
    out, rate = sf.read(tmp_path / "hum.flac", dtype="float32")
    assert rate == 16000 and len(out) == len(t) and peak_hz(out, rate) == pytest.approx(HUM_HZ, abs=3)
    rms = [float(np.sqrt(np.mean(part**2))) for part in (out[: int(1.1 * rate)], out[int(1.3 * rate) :])]
    assert rms[0] > 5 * rms[1]  # the source's pause stays a pause (the model's own noise under it)
    koe(sine_site, home, "convert", source, "-m", "sine", "--ref", tmp_path / "hum.wav", "--seed", "3", "--stream", "-o", tmp_path / "streamed.wav")
    streamed, _ = sf.read(tmp_path / "streamed.wav", dtype="float32")
    np.testing.assert_array_equal(streamed, sf.read(tmp_path / "hum.flac", dtype="float32")[0])  # the same voice, seed and chunks joined
    speaker = koe(sine_site, home, "convert", source, "-m", "sine", "--voice", "low", "-o", tmp_path / "x.wav", check=False)
    assert speaker.returncode != 0 and "cloned from a clip" in speaker.stderr and not (tmp_path / "x.wav").exists()
    nothing = koe(sine_site, home, "convert", source, "-m", "sine", "-o", tmp_path / "x.wav", check=False)
    assert nothing.returncode != 0 and "the voice to convert into" in nothing.stderr
    history = koe(sine_site, home, "history", "list").stdout
    assert "hum" in history


def test_koe_serve_converts_speech_and_refuses_what_it_cannot(server, tmp_path):
    t = np.arange(16000 * 4) / 16000  # 4 s: 128 KB, past a speech request's body limit
    speech = io.BytesIO()
    sf.write(speech, (0.5 * np.sin(2 * np.pi * 440 * t)).astype(np.float32), 16000, format="WAV")

    def convert(files: dict, **form) -> httpx.Response:
        return httpx.post(f"{server.url}/v1/audio/conversions", files=files, data={"model": "sine", **form}, timeout=60)

    r = convert({"file": ("speech.wav", speech.getvalue(), "audio/wav")}, voice="hum", seed="5", response_format="wav")
    assert r.status_code == 200, r.text
    out, rate = sf.read(io.BytesIO(r.content), dtype="float32")
    assert len(out) == len(t) and peak_hz(out, rate) == pytest.approx(HUM_HZ, abs=3) and r.headers["X-Koe-Seed"] == "5"
    clip = io.BytesIO()
    sf.write(clip, (0.4 * np.sin(2 * np.pi * 300 * t)).astype(np.float32), 16000, format="WAV")
    streamed = convert({"file": ("s.wav", speech.getvalue()), "reference": ("r.wav", clip.getvalue())}, stream_format="audio", response_format="pcm")
    assert streamed.status_code == 200 and peak_hz(np.frombuffer(streamed.content, "<i2") / 32768.0, 16000) == pytest.approx(300, abs=3)
    missing = convert({}, voice="hum")
    assert missing.status_code == 400 and missing.json()["error"]["param"] == "file"
    preset = convert({"file": ("s.wav", speech.getvalue())}, voice="low")
    assert preset.status_code == 400 and "cloned from a clip" in preset.text
    bad_options = convert({"file": ("s.wav", speech.getvalue())}, voice="hum", options="[1]")
    assert bad_options.status_code == 400 and bad_options.json()["error"]["param"] == "options"
