"""IndexTTS 1.5 through the product, with the tiny random release: `koe speak --ref` (the CLI), the server
(`POST /v1/audio/speech` in a library voice made from a clip, `GET /v1/models` with the bilibili licence),
and `koe models pull IndexTeam/IndexTTS-1.5` from the tests' fake hub, which asks for the licence
(`--accept-license`) and writes the release's four files."""

from __future__ import annotations

import io

import numpy as np
import pytest
import soundfile as sf
from fastapi.testclient import TestClient
from koe_indextts.fixtures import write_random_model
from koe_indextts.spec import FILES_15, LICENSE, REPO_15
from product_helpers import folder_files, install_fake_hub, koe_command

from koe.server import create_app
from koe.service import KoeHome, load_settings

RATE = 24000
pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")


def clip_bytes(seconds: float = 2.0, rate: int = RATE) -> bytes:
    t = np.arange(int(seconds * rate)) / rate
    x = sum(np.sin(2 * np.pi * f * t) / (i + 1) for i, f in enumerate((140, 280, 420)))
    x = 0.3 * x * (0.6 + 0.4 * np.sin(2 * np.pi * 3 * t)) / np.abs(x).max()
    buf = io.BytesIO()
    sf.write(buf, x.astype(np.float32), rate, format="WAV", subtype="PCM_16")
    return buf.getvalue()


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("indextts-product") / "IndexTTS-1.5")


def test_koe_speak_with_a_reference_clip(release, tmp_path, monkeypatch):
    koe = koe_command(tmp_path, monkeypatch)
    (tmp_path / "ref.wav").write_bytes(clip_bytes())
    out = tmp_path / "out.wav"
    koe("speak", "Hello there, this is a test.", "-m", release, "--ref", tmp_path / "ref.wav", "--seed", "3", "--opt", "max_mel_tokens=20", "-o", out)
    audio, rate = sf.read(out)
    assert rate == RATE and audio.size > 0 and np.abs(audio).max() > 0
    again = tmp_path / "again.wav"
    koe("speak", "Hello there, this is a test.", "-m", release, "--ref", tmp_path / "ref.wav", "--seed", "3", "--opt", "max_mel_tokens=20", "-o", again)
    assert out.read_bytes() == again.read_bytes()  # a seed repeats the samples
    refused = koe("speak", "Hello.", "-m", release, "-o", tmp_path / "x.wav", ok=False)
    assert refused.exit_code != 0 and "cloned voice" in refused.output and "Traceback" not in refused.output


def test_the_server_speaks_in_a_voice_from_a_clip_and_lists_the_licence(release, tmp_path):
    settings = load_settings(tmp_path / "home", flags={"models": {"default": "indextts"}}, environ={})
    home = KoeHome(settings)
    home.models.import_model(release, "indextts", link=True)
    with TestClient(create_app(home)) as client:
        card = client.get("/v1/models").json()["data"][0]
        assert card["id"] == "indextts" and card["license"]["id"] == LICENSE.id and card["license"]["needs_acceptance"] is True
        r = client.post("/v1/audio/voices", data={"name": "kim"}, files={"file": ("clip.wav", clip_bytes(), "audio/wav")})
        assert r.status_code == 201, r.text
        body = {"model": "indextts", "input": "Hello there.", "voice": "kim", "response_format": "wav", "seed": 5, "options": {"max_mel_tokens": 20}}
        r = client.post("/v1/audio/speech", json=body)
        assert r.status_code == 200, r.text
        audio, rate = sf.read(io.BytesIO(r.content))
        assert rate == RATE and audio.size > 0
        assert client.post("/v1/audio/speech", json=body).content == r.content
        bad = client.post("/v1/audio/speech", json={**body, "options": {"num_beams": 0}})
        assert bad.status_code == 400 and "num_beams=0" in bad.text
        empty = client.post("/v1/audio/speech", json={**body, "input": "。，！"})
        assert empty.status_code == 400 and "only punctuation" in empty.text
        novoice = client.post("/v1/audio/speech", json={**body, "voice": "alloy"})
        assert novoice.status_code == 400


def test_pull_asks_for_the_licence_and_writes_the_four_files(release, tmp_path, monkeypatch):
    koe = koe_command(tmp_path, monkeypatch)
    files = {name: data for name, data in folder_files(release).items() if name in FILES_15}
    assert sorted(files) == sorted(FILES_15)
    hub = install_fake_hub(monkeypatch, {REPO_15: files})
    try:
        refused = koe("models", "pull", REPO_15, ok=False)
        assert refused.exit_code != 0 and "--accept-license" in refused.stderr and LICENSE.title in refused.stderr
        assert hub.hits == []
        koe("models", "pull", REPO_15, "--accept-license")
    finally:
        hub.close()
    folder = koe.home / "models" / "IndexTTS-1.5"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(FILES_15)
    assert all((folder / name).read_bytes() == data for name, data in files.items())
    info = koe("models", "info", "IndexTTS-1.5").stdout
    assert "indextts IndexTTS-1.5" in info and "license accepted: yes" in info and LICENSE.title in info
