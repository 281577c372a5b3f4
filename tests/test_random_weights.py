"""Random-weight models are marked everywhere: koe's fixture writers leave a marker file (which upstream's strict
loaders never read), every family's describe reads it, and `koe doctor`, `koe speak`, `koe models` and `koe demo`
say so; sizes come from the parameter count. `koe demo --family NAME` tries every family offline and writes its
noise at a safe level. (`/v1/models` and the page: tests/test_server_voices_list.py, tests/test_web_page.py.)"""

from __future__ import annotations

import io
import json
import re
import shutil

import numpy as np
import pytest
import soundfile as sf

from koe.cli.demo import SAFE_PEAK_DBFS, demo_model_name
from koe.engines.registry import FAMILIES, describe, write_fixture
from koe.engines.spec import RANDOM_WEIGHTS_FILE
from koe.service.store.models import size_label

pytest_plugins = ["cli_fixtures"]  # cv_model, home, koe
pytestmark = pytest.mark.filterwarnings("ignore:.*cut off:UserWarning")
FAST = ("--max-new-tokens", "8", "--seed", "1")


@pytest.fixture
def real_cv(cv_model, tmp_path):
    """The tiny CustomVoice folder as a real release would be: without the marker."""
    folder = shutil.copytree(cv_model, tmp_path / "release")
    (folder / RANDOM_WEIGHTS_FILE).unlink()
    return folder


@pytest.mark.parametrize("family", ["f5_tts", "voxcpm"])
def test_every_fixture_writer_marks_its_folder_and_describe_reads_it(family, tmp_path, cv_model):
    folder = write_fixture(tmp_path / family, family)
    assert (folder / RANDOM_WEIGHTS_FILE).is_file() and (cv_model / RANDOM_WEIGHTS_FILE).is_file()
    for i, f in enumerate((folder, cv_model)):
        assert describe(f).random_weights is True
        copy = shutil.copytree(f, tmp_path / f"copy{i}")
        (copy / RANDOM_WEIGHTS_FILE).unlink()
        assert describe(copy).random_weights is False  # the rest of the folder says nothing of its weights


def test_size_labels_come_from_the_parameter_count():
    assert [size_label(n) for n in (0, 950, 229_604, 11_256_571, 905_788_672, 1_916_676_352, 2_000_000_000)] == [
        "",
        "950",
        "230K",
        "11M",
        "0.9B",
        "1.9B",
        "2B",
    ]


@pytest.mark.parametrize(
    "tag, parameters, label",
    [
        ("0b6", 905_788_672, "0.6B"),  # the released 0.6B CustomVoice, codec included: its own name
        ("1b7", 1_916_676_352, "1.7B"),
        ("0b6", 11_256_571, "11M"),  # a tiny folder in the 0.6B layout: the count, never "0.6B"
        ("2B", 2_300_000_000, "2B"),
        ("base", 336_000_000, "336M"),  # no size in the tag: the count
        ("0b6", 0, "0.6B"),  # weights not counted: the release's name, never the raw tag
    ],
)
def test_a_size_is_the_releases_own_name_only_where_the_weights_agree(tag, parameters, label):
    from pathlib import Path

    from koe.service.store.models import ModelDetails, ModelRef

    details = ModelDetails(ModelRef("m", Path("m"), "qwen3_tts", "custom_voice", tag), 0, parameters, "float32", [], [], [])
    assert details.size == label


def test_doctor_flags_a_random_weight_model(koe, home, cv_model, real_cv, monkeypatch):
    koe("models", "import", cv_model, "--name", "cv", "--link")
    koe("models", "import", real_cv, "--name", "real", "--link")
    monkeypatch.setenv("KOE_MODELS__DEFAULT", "cv")
    out = " ".join(koe("doctor").stdout.split())  # the table's rows, unwrapped
    rows = dict(re.findall(r"(model \w+|default model) (.*?)(?= model \w+ (?:ok|warn|fail) | default model | hub cache )", out))
    assert rows["model cv"].startswith("warn RANDOM weights") and "11M parameters" in rows["model cv"]
    assert rows["model real"].startswith("ok custom_voice, 11M parameters") and "RANDOM" not in rows["model real"]
    assert rows["default model"].startswith("warn cv -> ") and "RANDOM weights" in rows["default model"]
    assert "0b6" not in out  # never the config's size tag


def test_speak_without_model_says_it_picked_a_random_weight_model(koe, home, cv_model, real_cv, tmp_path):
    koe("models", "import", cv_model, "--name", "cv", "--link")  # the only model: `koe speak` takes it
    r = koe("speak", "Hello.", *FAST, "-o", tmp_path / "a.wav")
    said = r.stderr.replace("\n", " ")
    assert "model cv has RANDOM weights" in said and "model cv (random weights)" in said
    r = koe("speak", "Hello.", "-m", "cv", *FAST, "-o", tmp_path / "b.wav")  # named: its line still says so
    assert "RANDOM" not in r.stderr and "model cv (random weights)" in r.stderr.replace("\n", " ")
    r = koe("speak", "Hello.", "-m", real_cv, *FAST, "-o", tmp_path / "c.wav")
    assert "RANDOM" not in r.stderr and "random weights" not in r.stderr


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_demo_family_tries_every_family_offline_at_a_safe_level(family, koe, home, tmp_path, monkeypatch):
    monkeypatch.setenv("KOE_DEMO_OFFLINE", "1")  # nothing is downloaded either way
    out = tmp_path / "demo.wav"
    r = koe("demo", "--family", family, "--text", "Hi there.", "-o", out, *FAST)
    said = r.stderr.replace("\n", " ")
    name = demo_model_name(family)
    assert f"{name} has RANDOM weights" in said and f"model {name} (" in said and ", random weights)" in said
    assert "safe" in said and "loaded " in said and f"built {name}" in said  # each step said
    samples, _rate = sf.read(io.BytesIO(out.read_bytes()), dtype="float32")
    assert len(samples) > 0 and np.abs(samples).max() <= 10 ** (SAFE_PEAK_DBFS / 20) + 1e-4
    listed = {m["name"]: m for m in json.loads(koe("models", "list", "--json").stdout)}
    assert listed[name]["random_weights"] is True


def test_demo_says_why_a_random_models_speech_is_cut_off(koe, home, tmp_path):
    r = koe("demo", "--family", "qwen3_tts", "--text", "Hi there.", "-o", tmp_path / "d.wav", "--max-new-tokens", "4")
    said = r.stderr.replace("\n", " ")
    assert "speech was cut off" in said and "expected with random weights: they seldom predict the end of speech" in said


def test_demo_family_refuses_what_it_cannot_do(koe, home):
    r = koe("demo", "--family", "nope", ok=False)
    assert r.exit_code == 2 and "unknown model family 'nope'" in r.stderr and "qwen3_tts" in r.stderr
    r = koe("demo", "--family", "voxcpm", "--model", "x", ok=False)
    assert r.exit_code == 2 and "give --model or --family, not both" in r.stderr
