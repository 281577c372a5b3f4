"""The GPT-SoVITS engine's own edges: the folder it reads (and refuses), the pull of a release from
the hub's layout, reference clips outside upstream's 3-10 s window, a language the version cannot
speak, text with nothing to speak, voice prompts saved and loaded (with an auxiliary reference).
Parity with upstream is test_gpt_sovits_engine_infer.py's."""

from __future__ import annotations

import shutil

import numpy as np
import pytest
import torch
from product_helpers import folder_files, install_fake_hub

from koe.engines.base import EmptyText, SynthesisRequest, UnsupportedVoice, VoiceReference
from koe.engines.gpt_sovits import spec
from koe.engines.gpt_sovits.engine import GPTSoVITSEngine
from koe.engines.gpt_sovits.fixtures import write_random_model
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice
from koe.engines.spec import RANDOM_WEIGHTS_FILE, SpecError
from koe.service.storage import Database
from koe.service.store.hub import pull_model
from koe.service.store.models import ModelStore


def tone(seconds: float, rate: int = 24000) -> tuple[np.ndarray, int]:
    t = np.arange(int(seconds * rate)) / rate
    return (0.3 * np.sin(2 * np.pi * 160 * t * (1 + 0.05 * np.sin(2 * np.pi * 3 * t)))).astype(np.float32), rate


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("gpt_sovits") / "model", seed=1)


@pytest.fixture(scope="module")
def engine(folder):
    e = GPTSoVITSEngine.load(folder)
    yield e
    e.close()


def test_the_folder_is_told_apart_and_described(folder):
    assert spec.SPEC.probe(folder).variant == "GPT-SoVITS-v2"
    d = spec.SPEC.describe(folder)
    assert d.missing == () and d.extra["version"] == "v2" and d.random_weights
    assert d.required_files[:2] == tuple(f"{spec.RELEASES['v2'][0]}/{name}" for name in spec.RELEASES["v2"][1:])


def test_a_folder_with_two_gpt_files_is_refused_naming_them(folder, tmp_path):
    copy = tmp_path / "two"
    shutil.copytree(folder, copy)
    sub, gpt, _ = spec.RELEASES["v2"]
    shutil.copyfile(copy / sub / gpt, copy / "mine-e15.ckpt")
    assert spec.SPEC.probe(copy) is None
    with pytest.raises(SpecError, match="one GPT file.*mine-e15.ckpt"):
        spec.SPEC.describe(copy)


def test_v1_speaks_no_korean_or_cantonese():
    assert {"ko", "yue", "all_ko", "all_yue", "auto_yue"}.isdisjoint(spec.capabilities("v1").languages)
    assert {"ko", "yue"} <= set(spec.capabilities("v2").languages)


@pytest.mark.parametrize("seconds", [2.5, 10.5])
def test_a_reference_outside_upstreams_window_is_refused(engine, seconds):
    with pytest.raises(UnsupportedVoice, match="3 to 10 seconds"):
        engine.build_voice(VoiceReference(tone(seconds), "A clip."))


def test_text_with_nothing_to_speak_is_an_empty_text_error(engine):
    voice = engine.prepare_voice(VoiceReference(tone(3.5)))
    with pytest.raises(EmptyText):
        list(engine.synthesize(SynthesisRequest("。。。……", voice=voice, language="en", seed=1)))


def test_a_voice_with_an_auxiliary_reference_is_saved_and_loaded(engine, tmp_path):
    voice = engine.add_references(engine.prepare_voice(VoiceReference(tone(3.5), "A clip."), prompt_lang="en"), [tone(4.0, 16000)])
    assert len(voice.specs) == 2 and voice.has_transcript
    voice.save(tmp_path / "v")
    again = engine.load_voice(tmp_path / "v")
    assert isinstance(again, GPTSoVITSVoice) and again.phones == voice.phones and again.norm_text == voice.norm_text
    assert torch.equal(again.semantic, voice.semantic) and torch.equal(again.bert, voice.bert)
    assert all(torch.equal(a, b) for a, b in zip(again.specs, voice.specs, strict=True))
    free = engine.prepare_voice(VoiceReference(tone(3.5)))
    free.save(tmp_path / "free")
    assert not engine.load_voice(tmp_path / "free").has_transcript


def test_pull_fetches_the_v2_release_from_the_hubs_layout(folder, tmp_path, monkeypatch):
    files = {k: b for k, b in folder_files(folder).items() if k != RANDOM_WEIGHTS_FILE}
    hub_files = {k: b for k, b in files.items() if k.split("/")[0] in (spec.HUBERT, spec.BERT, spec.RELEASES["v2"][0])}
    hub_files |= {"s2G488k.pth": b"v1", "gsv-v4-pretrained/s2Gv4.pth": b"v4", "README.md": b"# GPT-SoVITS"}  # other releases' files stay on the hub
    hub = install_fake_hub(monkeypatch, {spec.REPO: hub_files})
    try:
        store = ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))
        d = pull_model(store, f"{spec.REPO}/GPT-SoVITS-v2")
        assert d.ok and (d.ref.family, d.ref.variant) == ("gpt_sovits", "GPT-SoVITS-v2") and d.missing == []
        pulled = store.root / d.ref.name
        wanted = {k for k in hub_files if k.split("/")[0] in (spec.HUBERT, spec.BERT, spec.RELEASES["v2"][0])}
        assert {k for k in folder_files(pulled) if not k.startswith(".")} >= wanted
        assert not (pulled / "s2G488k.pth").exists() and not (pulled / "README.md").exists()
    finally:
        hub.close()
    assert hub.internet == []
