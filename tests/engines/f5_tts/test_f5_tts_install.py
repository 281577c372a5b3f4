"""Installing F5-TTS releases: `koe models import DIR --arch NAME [--vocoder DIR]` and `koe models pull`.

A release is a checkpoint + vocab.txt with no config (the architecture is known by name) and no
vocoder (a repo of its own). The folders here are random-weight ones (tiny sizes): `ARCHS` is
pointed at the tiny arch for the tests that install one, so the config koe writes for the name
fits the checkpoint. No hub is reached: pull runs its real download code against a fake hub on a
loopback port (tests/hub_server.py), which serves these folders as hub repos.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from types import SimpleNamespace

import pytest
import yaml
from fixtures_models import model_folder
from product_helpers import clean_koe_home, folder_files, install_fake_hub, nothing_installed, one_line_error, tree
from product_helpers import run_koe as cli

import koe
from koe.engines.f5_tts import config as f5_config
from koe.engines.f5_tts.fixtures import write_random_model
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable
from koe.service.storage import Database
from koe.service.store.hub import pull_model
from koe.service.store.models import ModelStore

VARIANTS = ("F5TTS_v1_Base", "F5TTS_Base")
CHECKPOINT = {"F5TTS_v1_Base": "model_1250000.safetensors", "F5TTS_Base": "model_1200000.safetensors"}


# -- folders -------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def built(tmp_path_factory):
    """Per variant: a complete folder, its bare release (checkpoint + vocab.txt), its vocoder, its tiny `model:` section."""
    root = tmp_path_factory.mktemp("f5-install")
    out = {}
    for variant in VARIANTS:
        complete = write_random_model(root / f"{variant}-complete", variant)
        bare = root / "releases" / variant
        bare.mkdir(parents=True)
        for name in (CHECKPOINT[variant], "vocab.txt"):
            shutil.copy2(complete / name, bare / name)
        vocos = root / f"vocos-{variant}"
        shutil.copytree(complete / "vocos", vocos)
        model = yaml.safe_load((complete / "config.yaml").read_text())["model"]
        out[variant] = SimpleNamespace(complete=complete, bare=bare, vocos=vocos, model=model)
    return out


@pytest.fixture
def tiny_archs(monkeypatch, built):
    """The released names mean the tiny archs of the fixtures (the written config then fits their checkpoints)."""
    for variant in VARIANTS:
        monkeypatch.setitem(f5_config.ARCHS, variant, built[variant].model)


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


def untouched(folder: Path) -> bool:
    return not (folder / "config.yaml").exists() and not (folder / "vocos").exists()


def loads(folder: Path, variant: str) -> None:
    engine = koe.load(folder, device="cpu")
    try:
        assert engine.capabilities.family == "f5_tts" and engine.capabilities.variant == variant
    finally:
        engine.close()


# -- import ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_import_a_release_with_arch_and_vocoder(store, built, tiny_archs, variant):
    b = built[variant]
    d = store.import_model(b.bare, arch=variant, vocoder=b.vocos)
    assert d.ok and d.ref.name == variant and (d.ref.family, d.ref.variant) == ("f5_tts", variant)
    folder = store.root / variant
    assert sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*") if p.is_file()) == sorted(
        ["config.yaml", CHECKPOINT[variant], "vocab.txt", "vocos/config.yaml", "vocos/pytorch_model.bin"]
    )
    assert (folder / "config.yaml").read_text() == f5_config.arch_yaml(variant)
    assert (folder / "vocos" / "pytorch_model.bin").read_bytes() == (b.vocos / "pytorch_model.bin").read_bytes()
    assert store.get(variant).origin == str(b.bare.resolve())
    assert untouched(b.bare)  # the source is never written to
    loads(folder, variant)


def test_import_takes_the_vocoder_already_in_the_folder(store, built, tiny_archs, tmp_path):
    b = built["F5TTS_v1_Base"]
    release = tmp_path / "with-vocos"
    shutil.copytree(b.bare, release)
    shutil.copytree(b.vocos, release / "vocos")
    d = store.import_model(release, "v1", arch="F5TTS_v1_Base")
    assert d.ok and (store.root / "v1" / "config.yaml").is_file() and not (release / "config.yaml").exists()
    loads(store.root / "v1", "F5TTS_v1_Base")


def test_a_complete_folder_imports_as_before(store, built):
    b = built["F5TTS_Base"]
    assert store.import_model(b.complete, "copy").ok
    linked = store.import_model(b.complete, "linked", link=True)
    assert linked.linked and linked.ok
    assert store.import_model(b.complete, "same-arch", arch="F5TTS_Base").ok  # --arch naming the folder's own config is fine
    with pytest.raises(InvalidRequest, match="already has a config.yaml .*F5TTS_Base.*drop --arch"):
        store.import_model(b.complete, "other", arch="F5TTS_v1_Base")


@pytest.mark.parametrize(
    ("arch", "vocoder", "error", "match"),
    [
        (None, "vocos", InvalidRequest, r"without config.yaml .*pass --arch NAME, one of F5TTS_v1_Base, F5TTS_Base"),
        ("Nope", "vocos", InvalidRequest, r"unknown architecture 'Nope'; koe knows: F5TTS_v1_Base, F5TTS_Base \(F5-TTS\)"),
        ("E2TTS_Base", "vocos", InvalidRequest, r"E2-TTS .* is not supported yet"),
        ("F5TTS_Base_bigvgan", "vocos", InvalidRequest, r"BigVGAN vocoder .* is not supported yet"),
        ("F5TTS_v1_Base", None, InvalidRequest, r"no vocoder: .*--vocoder DIR.*charactr/vocos-mel-24khz.*koe models pull"),
        ("F5TTS_v1_Base", "bigvgan", InvalidRequest, r"a BigVGAN vocoder is not supported yet"),
        ("F5TTS_v1_Base", "empty", InvalidRequest, r"not the Vocos vocoder: missing config.yaml, pytorch_model.bin"),
        ("F5TTS_v1_Base", "missing", NotFound, r"vocoder folder not found"),
    ],
    ids=["no-arch", "unknown-arch", "e2tts", "bigvgan-arch", "no-vocoder", "bigvgan-vocoder", "not-vocos", "no-vocoder-folder"],
)
def test_import_errors_say_what_to_do(store, built, tiny_archs, tmp_path, arch, vocoder, error, match):
    b = built["F5TTS_v1_Base"]
    (tmp_path / "bigvgan").mkdir()
    (tmp_path / "bigvgan" / "config.json").write_text("{}")
    (tmp_path / "bigvgan" / "bigvgan_generator.pt").write_bytes(b"x")
    (tmp_path / "empty").mkdir()
    voc = {"vocos": b.vocos, None: None, "bigvgan": tmp_path / "bigvgan", "empty": tmp_path / "empty", "missing": tmp_path / "nope"}[vocoder]
    with pytest.raises(error, match=match):
        store.import_model(b.bare, arch=arch, vocoder=voc)
    assert nothing_installed(store) and untouched(b.bare)


def test_the_wrong_arch_for_a_checkpoint_is_refused_before_install(store, built):
    b = built["F5TTS_v1_Base"]  # a tiny checkpoint: the released F5TTS_v1_Base (dim 1024, depth 22) does not fit it
    with pytest.raises(
        InvalidRequest, match=r"this checkpoint has dim 64, depth 2, text_dim 32, but F5TTS_v1_Base has dim 1024, depth 22, text_dim 512: is --arch right"
    ):
        store.import_model(b.bare, arch="F5TTS_v1_Base", vocoder=b.vocos)
    assert nothing_installed(store)


def test_import_of_what_is_not_a_release(store, built, tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(InvalidRequest, match=r"is this a model folder\?.*--arch NAME.*F5TTS_v1_Base, F5TTS_Base \(F5-TTS\)"):
        store.import_model(empty)
    with pytest.raises(InvalidRequest, match="no F5-TTS checkpoint"):
        store.import_model(empty, arch="F5TTS_v1_Base", vocoder=built["F5TTS_v1_Base"].vocos)
    only_checkpoint = tmp_path / "only-checkpoint"
    only_checkpoint.mkdir()
    shutil.copy2(built["F5TTS_v1_Base"].bare / CHECKPOINT["F5TTS_v1_Base"], only_checkpoint)
    with pytest.raises(InvalidRequest, match="missing vocab.txt"):
        store.import_model(only_checkpoint, arch="F5TTS_v1_Base", vocoder=built["F5TTS_v1_Base"].vocos)
    assert nothing_installed(store)


def test_link_and_other_families(store, built, tiny_archs, session_tmp):
    b = built["F5TTS_v1_Base"]
    with pytest.raises(InvalidRequest, match=r"needs files added \(config.yaml, vocos/config.yaml, vocos/pytorch_model.bin\), so it cannot be linked"):
        store.import_model(b.bare, arch="F5TTS_v1_Base", vocoder=b.vocos, link=True)
    qwen = model_folder(session_tmp, "custom_voice")
    with pytest.raises(InvalidRequest, match="holds a Qwen3-TTS 12 Hz model; F5TTS_v1_Base is an architecture of F5-TTS"):
        store.import_model(qwen, arch="F5TTS_v1_Base")
    with pytest.raises(InvalidRequest, match=r"a separate vocoder \(--vocoder\) does not apply"):
        store.import_model(qwen, vocoder=b.vocos)
    assert nothing_installed(store)
    store.import_model(b.bare, "v1", arch="F5TTS_v1_Base", vocoder=b.vocos)
    with pytest.raises(AlreadyExists):
        store.import_model(b.bare, "v1", arch="F5TTS_v1_Base", vocoder=b.vocos)
    store.import_model(b.bare, "v1", arch="F5TTS_v1_Base", vocoder=b.vocos, overwrite=True)
    assert [m.ref.name for m in store.list()] == ["v1"]


# -- the CLI ---------------------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path, monkeypatch):
    return clean_koe_home(tmp_path, monkeypatch)


def test_cli_import_with_arch_and_vocoder(home, built, tiny_archs):
    b = built["F5TTS_v1_Base"]
    r = cli("models", "import", b.bare, "--arch", "F5TTS_v1_Base", "--vocoder", b.vocos, "--name", "f5")
    assert "installed f5" in r.stderr
    [info] = json.loads(cli("models", "list", "--json").stdout)
    assert (info["name"], info["family"], info["variant"], info["missing"]) == ("f5", "f5_tts", "F5TTS_v1_Base", [])
    assert "nfe_step" in cli("models", "info", "f5").stdout
    loads(home / "models" / "f5", "F5TTS_v1_Base")


@pytest.mark.parametrize(
    ("args", "match"),
    [
        ([], "pass --arch NAME, one of F5TTS_v1_Base, F5TTS_Base"),
        (["--arch", "Nope"], "unknown architecture 'Nope'"),
        (["--arch", "E2TTS_Base"], "is not supported yet"),
        (["--arch", "F5TTS_v1_Base"], "charactr/vocos-mel-24khz"),
        (["--arch", "F5TTS_v1_Base", "--vocoder", "{vocos}", "--link"], "cannot be linked"),
    ],
    ids=["no-arch", "unknown-arch", "e2tts", "no-vocoder", "link"],
)
def test_cli_import_errors_are_one_line(home, built, tiny_archs, args, match):
    b = built["F5TTS_v1_Base"]
    one_line_error(cli("models", "import", b.bare, *[a.replace("{vocos}", str(b.vocos)) for a in args], ok=False), match)
    assert json.loads(cli("models", "list", "--json").stdout) == []


def test_the_engine_hint_for_a_bare_release_is_the_command_that_works(home, built, tiny_archs):
    """Loading a bare release says to run `koe models import DIR --arch F5TTS_v1_Base`; that command (with the vocoder) works."""
    b = built["F5TTS_v1_Base"]
    with pytest.raises(FileNotFoundError, match=r"koe models import .* --arch F5TTS_v1_Base"):
        koe.load(b.bare)
    cli("models", "import", b.bare, "--arch", "F5TTS_v1_Base", "--vocoder", b.vocos)


# -- pull, against a fake hub ---------------------------------------------------------------------
@pytest.fixture
def hub(monkeypatch, built, tiny_archs):
    repos = {
        "SWivid/F5-TTS": {"README.md": b"# F5-TTS", "F5TTS_Base/model_1200000.pt": b"a pickle"},
        "SWivid/E2-TTS": {"E2TTS_Base/model_1200000.safetensors": b"x", "E2TTS_Base/vocab.txt": b"x"},
        "charactr/vocos-mel-24khz": {**folder_files(built["F5TTS_v1_Base"].vocos), "README.md": b"# Vocos"},
        "someone/f5-finetune": {**folder_files(built["F5TTS_Base"].bare), "README.md": b"# a fine-tune"},
    }
    for variant in VARIANTS:
        repos["SWivid/F5-TTS"].update({f"{variant}/{k}": v for k, v in folder_files(built[variant].bare).items()})
    hub = install_fake_hub(monkeypatch, repos)
    yield hub
    hub.close()
    assert hub.internet == []


@pytest.mark.parametrize(("ref", "arch"), [("SWivid/F5-TTS", "F5TTS_v1_Base"), ("SWivid/F5-TTS/F5TTS_v1_Base", None)], ids=["arch", "release-id"])
def test_pull_a_release_spanning_two_repos(store, hub, built, ref, arch):
    d = pull_model(store, ref, arch=arch)
    assert d.ok and d.ref.name == "F5TTS_v1_Base" and d.ref.variant == "F5TTS_v1_Base"
    assert hub.api_repos() == ["SWivid/F5-TTS", "charactr/vocos-mel-24khz"]
    assert hub.fetched_files("SWivid/F5-TTS") == ["F5TTS_v1_Base/model_1250000.safetensors", "F5TTS_v1_Base/vocab.txt"]
    assert hub.fetched_files("charactr/vocos-mel-24khz") == ["config.yaml", "pytorch_model.bin"]
    folder = store.root / "F5TTS_v1_Base"
    assert tree(folder) == ["config.yaml", "model_1250000.safetensors", "vocab.txt", "vocos/config.yaml", "vocos/pytorch_model.bin"]
    assert (folder / "config.yaml").read_text() == f5_config.arch_yaml("F5TTS_v1_Base")
    assert (folder / "model_1250000.safetensors").read_bytes() == (built["F5TTS_v1_Base"].bare / "model_1250000.safetensors").read_bytes()
    origin = store.get("F5TTS_v1_Base").origin
    assert origin.startswith("hub:SWivid/F5-TTS/F5TTS_v1_Base@") and " + hub:charactr/vocos-mel-24khz@" in origin
    assert sorted(p.name for p in store.root.iterdir()) == ["F5TTS_v1_Base"]  # the partial downloads are gone
    loads(folder, "F5TTS_v1_Base")


def test_pull_the_other_release_and_a_fine_tune(store, hub):
    d = pull_model(store, "SWivid/F5-TTS", arch="F5TTS_Base", name="base")
    assert d.ok and d.ref.variant == "F5TTS_Base" and "model_1200000.safetensors" in tree(store.root / "base")
    assert "model_1200000.pt" not in tree(store.root / "base")  # just the named files
    d = pull_model(store, "someone/f5-finetune", arch="F5TTS_Base")
    assert d.ok and d.ref.name == "f5-finetune"
    assert tree(store.root / "f5-finetune") == ["config.yaml", "model_1200000.safetensors", "vocab.txt", "vocos/config.yaml", "vocos/pytorch_model.bin"]
    loads(store.root / "f5-finetune", "F5TTS_Base")


def test_pull_resumes_and_verifies_checksums(store, hub):
    hub.broken.add("charactr/vocos-mel-24khz")
    with pytest.raises(Unavailable, match="run the same command again to resume"):
        pull_model(store, "SWivid/F5-TTS/F5TTS_v1_Base")
    assert store.list() == [] and not (store.root / "F5TTS_v1_Base").exists()
    hub.broken.clear()
    first = list(hub.fetched)
    assert "SWivid/F5-TTS/F5TTS_v1_Base/model_1250000.safetensors" in first
    pull_model(store, "SWivid/F5-TTS/F5TTS_v1_Base")
    assert not set(hub.fetched[len(first) :]) & set(first)  # the rerun fetched only what was missing
    store.remove("F5TTS_v1_Base")

    hub.bad_sha.add("SWivid/F5-TTS/F5TTS_v1_Base/vocab.txt")
    with pytest.raises(InvalidRequest, match="checksum mismatch for F5TTS_v1_Base/vocab.txt"):
        pull_model(store, "SWivid/F5-TTS/F5TTS_v1_Base")
    assert store.list() == [] and not (store.root / "F5TTS_v1_Base").exists()


def test_pull_errors(store, hub):
    with pytest.raises(
        InvalidRequest, match=r"SWivid/F5-TTS holds several models: pass --arch NAME \(one of F5TTS_v1_Base, F5TTS_Base\), or pull SWivid/F5-TTS/F5TTS_v1_Base"
    ):
        pull_model(store, "SWivid/F5-TTS")
    for ref, arch in (("SWivid/E2-TTS", None), ("SWivid/E2-TTS/E2TTS_Base", None), ("SWivid/F5-TTS", "E2TTS_Base")):
        with pytest.raises(InvalidRequest, match="E2-TTS .* is not supported yet"):
            pull_model(store, ref, arch=arch)
    with pytest.raises(InvalidRequest, match="BigVGAN vocoder .* is not supported yet"):
        pull_model(store, "SWivid/F5-TTS", arch="F5TTS_Base_bigvgan")
    with pytest.raises(InvalidRequest, match="unknown architecture 'F5TTS_Small'"):
        pull_model(store, "SWivid/F5-TTS", arch="F5TTS_Small")
    with pytest.raises(InvalidRequest, match="is F5TTS_Base, not F5TTS_v1_Base"):
        pull_model(store, "SWivid/F5-TTS/F5TTS_Base", arch="F5TTS_v1_Base")
    with pytest.raises(NotFound, match="no model 'someone/missing'"):
        pull_model(store, "someone/missing", arch="F5TTS_v1_Base")
    # a checkpoint repo pulled without its arch: downloaded, then refused, saying to pass --arch; nothing installed
    with pytest.raises(InvalidRequest, match=r"someone/f5-finetune: an F5-TTS checkpoint without config.yaml .*pass --arch NAME"):
        pull_model(store, "someone/f5-finetune")
    assert store.list() == [] and not (store.root / "f5-finetune").exists()
    assert {h.headers["x-file"][0] for h in hub.body_hits()} == {"someone/f5-finetune"}  # only its files came ...
    assert hub.fetched_files("someone/f5-finetune") == sorted(hub.files("someone/f5-finetune"))  # ... all of them


def test_pull_offline_says_how_to_get_the_release_by_hand(store, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(Unavailable) as info:
        pull_model(store, "SWivid/F5-TTS", arch="F5TTS_v1_Base")
    message = str(info.value)
    assert "`huggingface-cli download SWivid/F5-TTS F5TTS_v1_Base/model_1250000.safetensors F5TTS_v1_Base/vocab.txt --local-dir DIR`" in message
    assert "`huggingface-cli download charactr/vocos-mel-24khz config.yaml pytorch_model.bin --local-dir DIR/F5TTS_v1_Base/vocos`" in message
    assert "`koe models import DIR/F5TTS_v1_Base --arch F5TTS_v1_Base`" in message
    assert nothing_installed(store)


def test_cli_pull(home, hub):
    r = cli("models", "pull", "SWivid/F5-TTS", "--arch", "F5TTS_v1_Base", "--name", "f5")
    assert "installed f5" in r.stderr and "charactr/vocos-mel-24khz" in r.stderr
    [info] = json.loads(cli("models", "list", "--json").stdout)
    assert (info["name"], info["variant"], info["missing"]) == ("f5", "F5TTS_v1_Base", [])
    one_line_error(cli("models", "pull", "SWivid/F5-TTS", ok=False), "pass --arch NAME")
    one_line_error(cli("models", "pull", "SWivid/E2-TTS", ok=False), "not supported yet")
