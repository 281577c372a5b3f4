"""Installing VoxCPM releases: `koe models import DIR` and `koe models pull openbmb/VoxCPM2` (and 1.5).

A VoxCPM release repo is a complete model folder (config.json, the LM/DiT weights, the AudioVAE,
the tokenizer files), so a pull fetches the repo whole, as upstream's `snapshot_download` does,
and nothing is assembled: `--arch` and `--vocoder` do not apply. The folders are random-weight ones
(tiny sizes). No hub is reached: pull runs its real download code against a fake hub on a loopback
port (tests/hub_server.py, as in the F5-TTS install tests), which serves these folders as repos.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from product_helpers import clean_koe_home, folder_files, install_fake_hub, nothing_installed, one_line_error, tree
from product_helpers import run_koe as cli
from safetensors.torch import load_file

import koe
from koe.engines.spec import RANDOM_WEIGHTS_FILE
from koe.engines.voxcpm.fixtures import write_random_model
from koe.service.errors import AlreadyExists, InvalidRequest, NotFound, Unavailable
from koe.service.storage import Database
from koe.service.store.hub import pull_model
from koe.service.store.models import ModelStore

VARIANTS = ("VoxCPM2", "VoxCPM1.5")
RELEASE_FILES = ["audiovae.safetensors", "config.json", "model.safetensors", "special_tokens_map.json", "tokenizer.json", "tokenizer_config.json"]


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vox-install")
    return {v: write_random_model(root / v, v) for v in VARIANTS}


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


def speaks(folder: Path, variant: str, reference: Path | None = None) -> np.ndarray:
    """Load the folder, check it is `variant`, speak a seeded sentence (equal to `reference`'s when given)."""
    engine = koe.load(folder, device="cpu")
    try:
        assert engine.capabilities.family == "voxcpm" and engine.capabilities.variant == variant
        audio = engine.generate("Hello there.", seed=1).audio
    finally:
        engine.close()
    if reference is not None:
        other = koe.load(reference)
        try:
            assert np.array_equal(audio, other.generate("Hello there.", seed=1).audio)
        finally:
            other.close()
    return audio


# -- import ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("variant", VARIANTS)
def test_import_a_release_folder(store, built, variant):
    d = store.import_model(built[variant])
    assert d.ok and d.ref.name == variant and (d.ref.family, d.ref.variant) == ("voxcpm", variant) and d.missing == []
    assert d.ref.size == {"VoxCPM2": "2B", "VoxCPM1.5": "0.8B"}[variant]  # the release's size, named by the variant
    folder = store.root / variant
    assert tree(folder) == sorted([*RELEASE_FILES, RANDOM_WEIGHTS_FILE])  # the release's files, and koe's marker: these weights are random
    assert store.get(variant).origin == str(built[variant].resolve())
    assert d.capabilities.sample_rate == {"VoxCPM2": 48000, "VoxCPM1.5": 44100}[variant]
    speaks(folder, variant, reference=built[variant])
    linked = store.import_model(built[variant], f"{variant}-link", link=True)
    assert linked.linked and linked.ok
    with pytest.raises(AlreadyExists):
        store.import_model(built[variant])
    assert store.import_model(built[variant], overwrite=True).ok


def test_import_takes_upstreams_other_weight_formats(store, built, tmp_path):
    """upstream also reads `pytorch_model.bin` and `audiovae.pth` (a state dict, or one under "state_dict"); so does koe."""
    folder = tmp_path / "pth-release"
    shutil.copytree(built["VoxCPM1.5"], folder)
    torch.save(load_file(folder / "model.safetensors"), folder / "pytorch_model.bin")
    torch.save({"state_dict": load_file(folder / "audiovae.safetensors")}, folder / "audiovae.pth")
    (folder / "model.safetensors").unlink()
    (folder / "audiovae.safetensors").unlink()
    d = store.import_model(folder, "pth")
    assert d.ok and d.ref.variant == "VoxCPM1.5" and "pytorch_model.bin" in tree(store.root / "pth")
    speaks(store.root / "pth", "VoxCPM1.5", reference=built["VoxCPM1.5"])


@pytest.mark.parametrize(
    ("remove", "missing"),
    [
        (["audiovae.safetensors"], "missing audiovae.safetensors"),
        (["model.safetensors"], "missing model.safetensors"),
        (["tokenizer.json"], "missing tokenizer.json"),
        (["tokenizer.json", "audiovae.safetensors"], "missing tokenizer.json, audiovae.safetensors"),
    ],
)
def test_an_incomplete_folder_is_refused_naming_what_is_missing(store, built, tmp_path, remove, missing):
    folder = tmp_path / "partial"
    shutil.copytree(built["VoxCPM2"], folder)
    for name in remove:
        (folder / name).unlink()
    with pytest.raises(InvalidRequest, match=f"is not a complete model folder: {missing}"):
        store.import_model(folder)
    with pytest.raises(InvalidRequest, match=missing):
        store.import_model(folder, "linked", link=True)
    assert nothing_installed(store)


def test_arch_and_vocoder_do_not_apply(store, built):
    """A VoxCPM folder is complete as released: `--arch` (no config to write) and `--vocoder` (the AudioVAE is in it) are refused."""
    with pytest.raises(InvalidRequest, match=r"unknown architecture 'VoxCPM2'; koe knows: F5TTS_v1_Base, F5TTS_Base \(F5-TTS\)"):
        store.import_model(built["VoxCPM2"], arch="VoxCPM2")
    with pytest.raises(InvalidRequest, match="holds a VoxCPM model; F5TTS_v1_Base is an architecture of F5-TTS"):
        store.import_model(built["VoxCPM2"], arch="F5TTS_v1_Base")
    with pytest.raises(InvalidRequest, match=r"VoxCPM model folders hold their own decoder: a separate vocoder \(--vocoder\) does not apply"):
        store.import_model(built["VoxCPM2"], vocoder=built["VoxCPM1.5"])
    assert nothing_installed(store)


def test_a_broken_config_is_refused(store, built, tmp_path):
    folder = tmp_path / "broken"
    shutil.copytree(built["VoxCPM2"], folder)
    raw = json.loads((folder / "config.json").read_text())
    del raw["lm_config"]["hidden_size"]
    (folder / "config.json").write_text(json.dumps(raw))
    with pytest.raises(InvalidRequest, match="hidden_size"):
        store.import_model(folder)
    assert nothing_installed(store)


# -- the CLI ---------------------------------------------------------------------------------------
@pytest.fixture
def home(tmp_path, monkeypatch):
    return clean_koe_home(tmp_path, monkeypatch)


def test_cli_import_info_and_speak(home, built, tmp_path):
    r = cli("models", "import", built["VoxCPM2"], "--name", "vox")
    assert "installed vox" in r.stderr and "VoxCPM2 480K, random weights" in r.stderr  # its own parameter count, not the release's 2B
    [info] = json.loads(cli("models", "list", "--json").stdout)
    assert (info["name"], info["family"], info["variant"], info["missing"]) == ("vox", "voxcpm", "VoxCPM2", [])
    assert "cfg_value" in cli("models", "info", "vox").stdout
    cli("speak", "Hello there.", "-m", "vox", "--seed", "1", "-o", tmp_path / "out.wav")
    assert (tmp_path / "out.wav").stat().st_size > 1000
    one_line_error(cli("models", "import", built["VoxCPM1.5"], "--arch", "VoxCPM1.5", ok=False), "unknown architecture 'VoxCPM1.5'")
    one_line_error(cli("models", "import", built["VoxCPM1.5"], "--vocoder", built["VoxCPM2"], ok=False), "does not apply")
    assert [m["name"] for m in json.loads(cli("models", "list", "--json").stdout)] == ["vox"]


# -- pull, against a fake hub ---------------------------------------------------------------------
def release_files(folder: Path) -> dict[str, bytes]:
    """What the hub's repo holds: the fixture's files without koe's random-weights marker (no release has it), a README."""
    files = {k: v for k, v in folder_files(folder).items() if k != RANDOM_WEIGHTS_FILE}
    return {**files, "README.md": b"# VoxCPM", ".gitattributes": b"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"}


@pytest.fixture
def hub(monkeypatch, built):
    repos = {f"openbmb/{v}": release_files(built[v]) for v in VARIANTS}
    hub = install_fake_hub(monkeypatch, repos)
    yield hub
    hub.close()
    assert hub.internet == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_pull_a_release_fetches_the_repo_whole(store, hub, built, variant):
    repo = f"openbmb/{variant}"
    d = pull_model(store, repo)
    assert d.ok and d.ref.name == variant and (d.ref.family, d.ref.variant) == ("voxcpm", variant)
    assert hub.api_repos() == [repo] and hub.fetched_files(repo) == sorted(hub.files(repo))  # the whole repo, as upstream's snapshot_download
    folder = store.root / variant
    assert tree(folder) == sorted([*RELEASE_FILES, "README.md", ".gitattributes"])  # no .cache, nothing added
    for name in RELEASE_FILES:
        assert (folder / name).read_bytes() == (built[variant] / name).read_bytes()
    assert store.get(variant).origin.startswith(f"hub:{repo}@")
    assert sorted(p.name for p in store.root.iterdir()) == [variant]  # the partial download is gone
    speaks(folder, variant, reference=built[variant])


def test_pull_with_a_name_resumes_and_verifies_checksums(store, hub):
    hub.broken.add("openbmb/VoxCPM2")
    with pytest.raises(Unavailable, match="run the same command again to resume"):
        pull_model(store, "openbmb/VoxCPM2", name="vox")
    assert store.list() == [] and not (store.root / "vox").exists()
    hub.broken.clear()
    d = pull_model(store, "openbmb/VoxCPM2", name="vox")
    assert d.ok and d.ref.name == "vox"
    with pytest.raises(AlreadyExists):
        pull_model(store, "openbmb/VoxCPM2", name="vox")
    store.remove("vox")

    hub.bad_sha.add("openbmb/VoxCPM1.5/model.safetensors")
    with pytest.raises(InvalidRequest, match="checksum mismatch for model.safetensors"):
        pull_model(store, "openbmb/VoxCPM1.5")
    assert store.list() == [] and not (store.root / "VoxCPM1.5").exists()


def test_pull_errors(store, hub):
    with pytest.raises(InvalidRequest, match="unknown architecture 'VoxCPM2'"):
        pull_model(store, "openbmb/VoxCPM2", arch="VoxCPM2")
    with pytest.raises(NotFound, match="no model 'openbmb/VoxCPM9'"):
        pull_model(store, "openbmb/VoxCPM9")
    hub.repos["someone/half-voxcpm"] = {k: v for k, v in hub.repos["openbmb/VoxCPM2"].items() if k != "audiovae.safetensors"}
    with pytest.raises(InvalidRequest, match="missing audiovae.safetensors"):
        pull_model(store, "someone/half-voxcpm")
    assert store.list() == [] and not (store.root / "half-voxcpm").exists()


def test_pull_offline_says_how_to_get_the_release_by_hand(store, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    for variant in (*VARIANTS, "VoxCPM-0.5B"):
        with pytest.raises(Unavailable) as info:
            pull_model(store, f"openbmb/{variant}")
        message = str(info.value)
        assert f"`huggingface-cli download openbmb/{variant} --local-dir DIR`" in message and "`koe models import DIR`" in message
    assert nothing_installed(store)


def test_cli_pull(home, hub):
    r = cli("models", "pull", "openbmb/VoxCPM2", "--name", "vox")
    assert "installed vox" in r.stderr and "openbmb/VoxCPM2" in r.stderr
    cli("models", "pull", "openbmb/VoxCPM1.5")
    listed = {m["name"]: m for m in json.loads(cli("models", "list", "--json").stdout)}
    assert {n: (m["variant"], m["missing"]) for n, m in listed.items()} == {"vox": ("VoxCPM2", []), "VoxCPM1.5": ("VoxCPM1.5", [])}
    one_line_error(cli("models", "pull", "openbmb/VoxCPM2", "--name", "vox", ok=False), "already installed")
    one_line_error(cli("models", "pull", "openbmb/VoxCPM2", "--arch", "VoxCPM2", "--name", "v2", ok=False), "unknown architecture")
