"""Installing CosyVoice releases: `koe models pull FunAudioLLM/CosyVoice2-0.5B` (and v3), `koe models
import DIR`, then `koe speak` and `koe convert` on the result.

A pull fetches what koe and upstream's `AutoModel` read (the yaml, `llm.pt`, `flow.pt`, `hift.pt`,
the ONNX parts, `CosyVoice-BlankEN/` with its Qwen2 weights, `spk2info.pt` where the repo has it),
not the repo's TensorRT/JIT exports or example audio. No hub is reached: pull runs its real download
code against a fake hub on a loopback port (tests/hub_server.py) serving random-weight folders.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from product_helpers import clean_koe_home, folder_files, install_fake_hub, tree
from product_helpers import run_koe as cli

import koe
from koe.engines.cosyvoice.fixtures import write_random_model
from koe.engines.cosyvoice.spec import REPOS, VARIANTS
from koe.engines.spec import RANDOM_WEIGHTS_FILE
from koe.service.storage import Database
from koe.service.store.hub import pull_model
from koe.service.store.models import ModelStore

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off:UserWarning")

EXTRAS = {"README.md": b"# CosyVoice", "asset/zero_shot_prompt.wav": b"RIFF", "flow.encoder.fp32.zip": b"jit", "configuration.json": b"{}"}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict[int, Path]:
    root = tmp_path_factory.mktemp("cosyvoice-install")
    folders = {v: write_random_model(root / VARIANTS[v], VARIANTS[v]) for v in VARIANTS}
    torch.save({"Alice": {"embedding": torch.randn(1, 192, generator=torch.Generator().manual_seed(0))}}, folders[2] / "spk2info.pt")
    return folders


@pytest.fixture
def store(tmp_path):
    return ModelStore(tmp_path / "models", Database(tmp_path / "koe.db"))


@pytest.fixture
def hub(monkeypatch, built):
    repos = {REPOS[v]: {**{k: b for k, b in folder_files(built[v]).items() if k != RANDOM_WEIGHTS_FILE}, **EXTRAS} for v in VARIANTS}
    hub = install_fake_hub(monkeypatch, repos)
    yield hub
    hub.close()
    assert hub.internet == []


@pytest.mark.parametrize("version", [2, 3])
def test_pull_fetches_what_the_model_reads(store, hub, built, version):
    repo = REPOS[version]
    d = pull_model(store, repo)
    assert d.ok and (d.ref.family, d.ref.variant) == ("cosyvoice", VARIANTS[version]) and d.missing == []
    folder = store.root / d.ref.name
    wanted = sorted(k for k in folder_files(built[version]) if k != RANDOM_WEIGHTS_FILE)
    assert tree(folder) == wanted  # the release's files (spk2info.pt where the repo has it), none of the extras
    assert ("spk2info.pt" in wanted) == (version == 2)
    for name in wanted:
        assert (folder / name).read_bytes() == (built[version] / name).read_bytes()
    tts = koe.load(folder, device="cpu")
    try:
        assert tts.engine.capabilities.speakers == (("Alice",) if version == 2 else ())
        clip = (0.3 * np.sin(2 * np.pi * 150 * np.arange(36000) / 24000)).astype(np.float32)
        voice = tts.prepare_voice((clip, 24000), "A clip.")
        assert len(tts.generate("Hello.", voice=voice, seed=1, max_tokens=4).audio) == 4 * 960
    finally:
        tts.close()


@pytest.fixture
def home(tmp_path, monkeypatch):
    return clean_koe_home(tmp_path, monkeypatch)


def test_cli_import_speak_and_convert(home, built, tmp_path):
    r = cli("models", "import", built[3], "--name", "cosy3")
    assert "installed cosy3" in r.stderr
    info = cli("models", "info", "cosy3").stdout
    assert "max_tokens" in info and "conversion" in info
    t = np.arange(48000) / 24000
    sf.write(tmp_path / "ref.wav", (0.3 * np.sin(2 * np.pi * 150 * t)).astype(np.float32), 24000)
    sf.write(tmp_path / "source.wav", (0.3 * np.sin(2 * np.pi * 220 * t[:36000])).astype(np.float32), 24000)
    cli("speak", "Hello there.", "-m", "cosy3", "--ref", tmp_path / "ref.wav", "--ref-text", "A clip.", "--seed", "1", "-o", tmp_path / "out.wav")
    assert sf.info(tmp_path / "out.wav").samplerate == 24000
    cli("convert", tmp_path / "source.wav", "-m", "cosy3", "--ref", tmp_path / "ref.wav", "--seed", "2", "-o", tmp_path / "converted.wav")
    converted, rate = sf.read(tmp_path / "converted.wav")
    assert rate == 24000 and len(converted) > 0
