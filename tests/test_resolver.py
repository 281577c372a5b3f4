"""The model resolver (`koe.service.store.resolve`): store name -> folder -> Hugging Face cache -> download.

The cache is a real one in a temp `HF_HUB_CACHE`, laid out as huggingface_hub lays it out
(tests/hf_cache.py) and read back by the library itself. Downloads go through the real
`pull_model` against the fake hub of tests/product_helpers.py; `HF_HUB_OFFLINE`,
`models.download` and `server.pull_models` decide whether one happens at all.
"""

from __future__ import annotations

import os
import socket

import pytest
import yaml
from fixtures_models import model_folder
from hf_cache import cache_repo, folder_files
from product_helpers import install_fake_hub

import koe
from koe.engines.f5_tts import config as f5_config
from koe.engines.f5_tts.fixtures import write_random_model as write_f5
from koe.service import KoeHome, SpeechRequest, load_settings
from koe.service.errors import InvalidRequest, NotFound, StorageError, Unavailable
from koe.service.storage import Database
from koe.service.store.models import ModelStore
from koe.service.store.resolve import cached_repo, hub_cache_dir, is_hub_id
from koe.service.synthesis.synthesizer import Synthesizer

QWEN = "Qwen/Qwen3-TTS-12Hz-0.6B-CustomVoice"
F5 = "SWivid/F5-TTS/F5TTS_v1_Base"
VOCOS = "charactr/vocos-mel-24khz"


@pytest.fixture(scope="session")
def custom_voice(session_tmp):
    return model_folder(session_tmp, "custom_voice")


@pytest.fixture(scope="session")
def f5_folder(session_tmp):
    return write_f5(session_tmp / "f5-resolver", "F5TTS_v1_Base")


@pytest.fixture
def hf(tmp_path, monkeypatch):
    """An empty Hugging Face cache as HF_HUB_CACHE, offline, and a KOE_HOME of this test's own."""
    cache = tmp_path / "hf" / "hub"
    cache.mkdir(parents=True)
    for name in ("HF_HOME", "HUGGINGFACE_HUB_CACHE", "TRANSFORMERS_OFFLINE", "HF_ENDPOINT") + tuple(k for k in os.environ if k.startswith("KOE_")):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HF_HUB_CACHE", str(cache))
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("KOE_HOME", str(tmp_path / "home"))
    return cache


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


@pytest.fixture
def tiny_f5_arch(f5_folder, monkeypatch):
    """The tiny fixture's arch stands in for the released F5TTS_v1_Base (as the compat tests do)."""
    monkeypatch.setitem(f5_config.ARCHS, "F5TTS_v1_Base", yaml.safe_load((f5_folder / "config.yaml").read_text())["model"])


def cache_f5(cache, f5_folder, vocoder: bool = True):
    ckpt = next(f5_folder.glob("model_*.safetensors"))
    cache_repo(
        cache,
        "SWivid/F5-TTS",
        {f"F5TTS_v1_Base/{ckpt.name}": ckpt.read_bytes(), "F5TTS_v1_Base/vocab.txt": (f5_folder / "vocab.txt").read_bytes(), "README.md": b"# F5-TTS"},
    )
    if vocoder:
        cache_repo(cache, VOCOS, folder_files(f5_folder / "vocos"))


@pytest.fixture
def online(monkeypatch):
    """`online(repos)`: a fake hub on a loopback port (tests/hub_server.py) serving `repos`, made the hub."""
    hubs = []

    def start(repos):
        hubs.append(install_fake_hub(monkeypatch, repos))
        return hubs[-1]

    yield start
    for hub in hubs:
        hub.close()


# -- the cache, as huggingface_hub reads it ------------------------------------------------------
def test_the_test_cache_is_one_huggingface_hub_reads(hf, custom_voice):
    from huggingface_hub import scan_cache_dir, snapshot_download, try_to_load_from_cache

    snapshot = cache_repo(hf, QWEN, folder_files(custom_voice))
    assert snapshot_download(QWEN, cache_dir=hf, local_files_only=True) == str(snapshot)
    assert try_to_load_from_cache(QWEN, "speech_tokenizer/model.safetensors", cache_dir=hf) == str(snapshot / "speech_tokenizer" / "model.safetensors")
    (repo,) = scan_cache_dir(hf).repos
    assert repo.repo_id == QWEN and set(repo.refs) == {"main"}
    assert {f.file_name for rev in repo.revisions for f in rev.files} >= {"config.json", "model.safetensors"}
    assert (snapshot / "config.json").is_symlink() and (snapshot / "config.json").read_bytes() == (custom_voice / "config.json").read_bytes()
    hit = cached_repo(QWEN)
    assert hit is not None and hit.folder == snapshot and hit.sha == snapshot.name


def test_the_cache_folder_is_read_from_the_environment_at_call_time(monkeypatch, tmp_path):
    for name in ("HF_HUB_CACHE", "HUGGINGFACE_HUB_CACHE", "HF_HOME", "XDG_CACHE_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert hub_cache_dir() == tmp_path / ".cache" / "huggingface" / "hub"
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert hub_cache_dir() == tmp_path / "xdg" / "huggingface" / "hub"
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hfhome"))
    assert hub_cache_dir() == tmp_path / "hfhome" / "hub"
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "explicit"))
    assert hub_cache_dir() == tmp_path / "explicit"
    assert hub_cache_dir(tmp_path / "given") == tmp_path / "given"  # a drop-in's cache_dir=


def test_hub_ids():
    for good in (QWEN, F5, "a/b", "openbmb/VoxCPM2"):
        assert is_hub_id(good)
    for bad in ("cv", "./a/b", "/a/b", "~/a/b", "a/../b", "a\\b", "a//b", "a/b/", ".a/b", "a/b c", ""):
        assert not is_hub_id(bad), bad


# -- the order -----------------------------------------------------------------------------------
def test_store_name_then_folder_then_cache(hf, store, custom_voice, tmp_path, monkeypatch):
    """A store name wins over a same-named folder; an existing folder is used as it is, before the
    hub; a hub id is read from the cache's snapshot in place (no copy, nothing installed)."""
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(custom_voice, tmp_path / "cv")
    store.import_model(custom_voice, "cv", link=True)
    assert store.resolve("cv").installed and store.resolve("cv").path == store.root / "cv"
    assert store.resolve("./cv").path.resolve() == tmp_path / "cv"
    with pytest.raises(Unavailable):
        store.resolve(QWEN)  # offline and not cached
    snapshot = cache_repo(hf, QWEN, folder_files(custom_voice))
    ref = store.resolve(QWEN)
    assert ref.path == snapshot and ref.name == "Qwen3-TTS-12Hz-0.6B-CustomVoice" and not ref.installed
    assert (ref.family, ref.variant, ref.size) == ("qwen3_tts", "custom_voice", "0b6")
    assert ref.key == store.resolve(QWEN).key and ref.key.startswith("Qwen3-TTS-12Hz-0.6B-CustomVoice-")
    assert [d.ref.name for d in store.list()] == ["cv"]  # used in place
    local = tmp_path / "Qwen" / "Qwen3-TTS-12Hz-0.6B-CustomVoice"
    shutil.copytree(custom_voice, local)
    assert store.resolve(QWEN).path.resolve() == local  # a folder of that name here comes first
    with pytest.raises(NotFound, match="model folder not found"):
        store.resolve("./nope")
    with pytest.raises(NotFound, match="no model named 'nope'"):
        store.resolve("nope")


def test_a_model_pulled_from_the_id_comes_before_the_cache(hf, store, custom_voice):
    cache_repo(hf, QWEN, folder_files(custom_voice))
    store.import_model(custom_voice, "mine")
    store.register("mine", f"hub:{QWEN}@{'a' * 40}")
    ref = store.resolve(QWEN)
    assert ref.name == "mine" and ref.installed


def test_a_release_over_two_repos_is_assembled_from_the_cache(hf, store, f5_folder, tiny_f5_arch):
    """F5-TTS: the checkpoint repo's subfolder and the Vocos repo, both cached, make one store
    folder (hard links to the cache's blobs, the arch's config.yaml written), with its origin."""
    with pytest.raises(Unavailable) as info:
        store.resolve(F5)
    assert "SWivid/F5-TTS/F5TTS_v1_Base" in str(info.value) and "HF_HUB_OFFLINE" in str(info.value)
    cache_f5(hf, f5_folder, vocoder=False)
    with pytest.raises(Unavailable, match=f"no {VOCOS}"):
        store.resolve(F5)  # all its repos must be there
    cache_f5(hf, f5_folder)
    ref = store.resolve(F5)
    assert ref.installed and ref.name == "F5TTS_v1_Base" and ref.family == "f5_tts"
    folder = store.root / "F5TTS_v1_Base"
    names = sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file())
    assert names == ["config.yaml", "model_1250000.safetensors", "vocab.txt", "vocos/config.yaml", "vocos/pytorch_model.bin"]
    ckpt = folder / "model_1250000.safetensors"
    blob = (cached_repo("SWivid/F5-TTS").folder / "F5TTS_v1_Base" / "model_1250000.safetensors").resolve()
    assert os.path.samefile(ckpt, blob)  # a hard link (or a link) to the cached blob, not a copy
    origin = store.get("F5TTS_v1_Base").origin
    sha_ckpt, sha_vocos = cached_repo("SWivid/F5-TTS").sha, cached_repo(VOCOS).sha
    assert origin == f"hub:SWivid/F5-TTS/F5TTS_v1_Base@{sha_ckpt} + hub:{VOCOS}@{sha_vocos}"
    assert store.resolve(F5).path == ref.path and [d.ref.name for d in store.list()] == ["F5TTS_v1_Base"]  # found by origin next time
    with pytest.raises(InvalidRequest, match="holds several models"):
        store.resolve("SWivid/F5-TTS")


def test_a_cache_link_that_points_outside_the_cache_is_never_read_linked_or_copied(hf, store, custom_voice, f5_folder, tiny_f5_arch, tmp_path):
    """A snapshot whose file links to a file outside the repo's cache folder (a hostile or damaged
    cache): the release is refused, used in place or assembled, and the outside file is not in the store."""
    victim = tmp_path / "secret.bin"
    victim.write_bytes(b"the user's own file")

    def redirect(snapshot, path):
        (snapshot / path).unlink()
        (snapshot / path).symlink_to(victim)

    redirect(cache_repo(hf, QWEN, folder_files(custom_voice)), "config.json")
    with pytest.raises(StorageError, match="config.json linking outside the cache") as info:
        store.resolve(QWEN)
    assert info.value.hint
    cache_f5(hf, f5_folder)
    redirect(cached_repo(VOCOS).folder, "pytorch_model.bin")
    with pytest.raises(StorageError, match="pytorch_model.bin linking outside the cache"):
        store.resolve(F5)
    assert store.list() == [] and not [p for p in store.root.rglob("*") if p.is_file() and os.path.samefile(p, victim)]
    assert victim.read_bytes() == b"the user's own file"


# -- downloads -------------------------------------------------------------------------------------
def test_download_when_not_cached_and_online(hf, store, custom_voice, online):
    hub = online({QWEN: folder_files(custom_voice)})
    progress = []
    store.on_progress = lambda done, total: progress.append((done, total))
    ref = store.resolve(QWEN)
    assert ref.installed and ref.name == "Qwen3-TTS-12Hz-0.6B-CustomVoice" and ref.path == store.root / ref.name
    assert hub.fetched_files(QWEN) == sorted(folder_files(custom_voice)) and progress and progress[-1][0] == progress[-1][1]
    assert store.get(ref.name).origin == f"hub:{QWEN}@{hub.refs[QWEN]['main']}"
    listings = len(hub.api_repos())
    assert store.resolve(QWEN).path == ref.path and len(hub.api_repos()) == listings  # found in the store next time, by its origin


def test_koe_load_downloads_a_hub_id_with_a_byte_bar(hf, custom_voice, online, capsys, monkeypatch):
    """The Python API's first use of a hub id downloads it into KOE_HOME's store with a byte bar on
    stderr (as huggingface_hub draws its own; HF_HUB_DISABLE_PROGRESS_BARS=1 turns it off)."""
    online({QWEN: folder_files(custom_voice)})
    engine = koe.load(QWEN, device="cpu")
    assert engine.capabilities.family == "qwen3_tts"
    engine.close()
    err = capsys.readouterr().err
    total = sum(len(b) for b in folder_files(custom_voice).values())
    assert "downloading" in err and f"{total / 1e6:.1f}M" in err.replace("MB", "M"), err[-500:]
    monkeypatch.setenv("HF_HUB_DISABLE_PROGRESS_BARS", "1")
    koe.load(QWEN, device="cpu").close()  # from the store now: no download, no bar
    assert "downloading" not in capsys.readouterr().err


def test_offline_or_downloads_off_is_one_clear_message(hf, store, custom_voice, online, monkeypatch, tmp_path):
    hub = online({QWEN: folder_files(custom_voice)})
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(Unavailable) as info:
        store.resolve(QWEN)
    message = str(info.value)
    assert "HF_HUB_OFFLINE is set" in message and f"koe models pull {QWEN}" in message and str(hf) in message
    assert "koe models import" in message and info.value.param == "model"
    monkeypatch.delenv("HF_HUB_OFFLINE")
    home = KoeHome(load_settings(tmp_path / "h1", environ={"KOE_MODELS__DOWNLOAD": "false"}))
    with pytest.raises(Unavailable, match=r"downloads are off \(models.download = false"):
        Synthesizer(home).plan(SpeechRequest(text="Hello.", model=QWEN))
    monkeypatch.setenv("KOE_HOME", str(tmp_path / "h2"))
    monkeypatch.setenv("KOE_MODELS__DOWNLOAD", "false")
    with pytest.raises(Unavailable, match="models.download = false"):
        koe.load(QWEN)
    assert hub.hits == []  # nothing asked of the hub


def test_an_unreachable_hub_says_so_fast(hf, store, monkeypatch):
    monkeypatch.delenv("HF_HUB_OFFLINE")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    monkeypatch.setenv("HF_ENDPOINT", f"http://127.0.0.1:{port}")
    with pytest.raises(Unavailable, match="the hub cannot be reached"):
        store.resolve(QWEN)
    assert store.list() == []


# -- the server: names and hub ids only; downloads only with server.pull_models ---------------------
@pytest.mark.parametrize("spec", ["../cv", "/etc", "~/models/cv", "./cv", "a\\b", "cv/../../x", "a/b/../c"])
def test_a_client_cannot_name_a_folder(hf, store, spec):
    with pytest.raises(InvalidRequest, match="not a folder path") as info:
        store.resolve(spec, allow_paths=False)
    assert info.value.param == "model"


def test_a_client_name_never_opens_a_folder(hf, store, custom_voice, tmp_path, monkeypatch):
    import shutil

    monkeypatch.chdir(tmp_path)
    shutil.copytree(custom_voice, tmp_path / "here")
    assert store.resolve("here").path.resolve() == tmp_path / "here"  # the CLI's way
    with pytest.raises(NotFound, match="no model named 'here'"):
        store.resolve("here", allow_paths=False)
    (tmp_path / "Qwen").mkdir()
    shutil.copytree(custom_voice, tmp_path / "Qwen" / "Qwen3-TTS-12Hz-0.6B-CustomVoice")
    with pytest.raises(Unavailable):
        store.resolve(QWEN, allow_paths=False)  # the folder of that name here is not looked at


def test_the_server_downloads_only_with_pull_models_and_only_listed_releases(hf, custom_voice, online, tmp_path):
    hub = online({QWEN: folder_files(custom_voice), "someone/qwen-copy": folder_files(custom_voice)})
    closed = KoeHome(load_settings(tmp_path / "closed", environ={}))
    with pytest.raises(Unavailable, match=r"server.pull_models = false") as info:
        Synthesizer(closed, allow_model_paths=False).plan(SpeechRequest(text="Hello.", model=QWEN))
    assert f"on the server, `koe models pull {QWEN}`" in info.value.hint and "--model DIR" not in info.value.hint  # the operator's move
    assert hub.hits == []
    home = KoeHome(load_settings(tmp_path / "open", flags={"server": {"pull_models": True}}, environ={}))
    synth = Synthesizer(home, allow_model_paths=False)
    with pytest.raises(NotFound, match="only download a release koe lists") as info:
        synth.plan(SpeechRequest(text="Hello.", model="someone/qwen-copy"))
    assert info.value.param == "model" and hub.hits == []
    plan = synth.plan(SpeechRequest(text="Hello.", model=QWEN))
    assert plan.model.installed and hub.api_repos() == [QWEN] and hub.fetched_files("someone/qwen-copy") == []
    cache_repo(hf, "someone/qwen-copy", folder_files(custom_voice))
    assert synth.plan(SpeechRequest(text="Hello.", model="someone/qwen-copy")).model.path == cached_repo("someone/qwen-copy").folder  # cached: fine


def test_the_http_server_refuses_paths(tmp_path, session_tmp):
    from fastapi.testclient import TestClient
    from test_server import assert_error, make_home

    from koe.server import create_app

    with TestClient(create_app(make_home(tmp_path / "home", session_tmp))) as client:
        for model in ("../cv", "/etc/passwd", "~/cv", "./cv"):
            r = client.post("/v1/audio/speech", json={"model": model, "input": "Hi.", "voice": "alloy", "max_new_tokens": 4})
            assert_error(r, 400, param="model")


def test_the_http_server_takes_hub_ids(hf, custom_voice, tmp_path, session_tmp):
    """A cached hub id speaks (200); a listed release that is not here is the operator's 503 (no
    download without server.pull_models); an id no family lists and no cache holds is a 404."""
    from fastapi.testclient import TestClient
    from test_server import assert_error, make_home

    from koe.server import create_app

    cache_repo(hf, QWEN, folder_files(custom_voice))
    with TestClient(create_app(make_home(tmp_path / "home", session_tmp))) as client:
        r = client.post("/v1/audio/speech", json={"model": QWEN, "input": "Hi.", "voice": "ryan", "max_new_tokens": 4, "seed": 0})
        assert r.status_code == 200, r.text
        assert len(r.content) > 0
        r = client.post("/v1/audio/speech", json={"model": "Qwen/Qwen3-TTS-12Hz-1.7B-CustomVoice", "input": "Hi.", "voice": "ryan"})
        assert r.status_code == 503 and "server.pull_models" in r.json()["error"]["message"], r.text
        assert str(hf) not in r.text  # the server's paths are redacted
        r = client.post("/v1/audio/speech", json={"model": "someone/unknown-model", "input": "Hi.", "voice": "ryan"})
        assert_error(r, 404, param="model")


# -- koe.load ------------------------------------------------------------------------------------
def test_koe_load_takes_a_store_name_and_a_hub_id(hf, custom_voice):
    home = KoeHome.open()
    home.models.import_model(custom_voice, "cv17", link=True)
    home.close()
    engine = koe.load("cv17", device="cpu")
    assert engine.capabilities.family == "qwen3_tts" and engine.engine.folder.resolve() == custom_voice.resolve()
    engine.close()
    snapshot = cache_repo(hf, QWEN, folder_files(custom_voice))
    engine = koe.load(QWEN, device="cpu")
    assert engine.engine.folder == snapshot
    engine.close()
    with pytest.raises(NotFound, match="no model named 'nope'"):
        koe.load("nope")
