"""G2PW's model folder as koe reads it: the stand-in's weights back from its ONNX file exactly, and
config.py read as data (never run) and checked against the released configuration."""

from __future__ import annotations

import pytest
import torch

from koe.engines.gpt_sovits.fixtures_g2pw import CONFIG_PY, polyphonic_pairs, random_g2pw, write_g2pw_folder
from koe.engines.gpt_sovits.g2pw import G2PWConfig, G2PWFolderError, labels_of
from koe.engines.gpt_sovits.g2pw_model import G2PWWeightsError, read_g2pw_onnx


@pytest.fixture(scope="module")
def model_folder(tmp_path_factory):
    return write_g2pw_folder(tmp_path_factory.mktemp("g2pw") / "G2PWModel", seed=5)


def test_weights_read_back_exactly(model_folder):
    labels, readings = labels_of(polyphonic_pairs())
    net = read_g2pw_onnx(model_folder / "g2pW.onnx", len(labels), len(readings))
    want = random_g2pw(5).state_dict()
    got = net.state_dict()
    assert want.keys() == got.keys()
    for k in want:
        assert torch.equal(want[k], got[k]), k


def test_tables_must_match_the_network(model_folder):
    labels, readings = labels_of(polyphonic_pairs())
    with pytest.raises(G2PWWeightsError, match="second_order_descriptor|char_descriptor"):
        read_g2pw_onnx(model_folder / "g2pW.onnx", len(labels), len(readings) + 1)


def test_labels_and_readings():
    labels, readings = labels_of([("行", "ㄒㄧㄥ2"), ("行", "ㄏㄤ2"), ("長", "ㄔㄤ2"), ("長", "ㄓㄤ3")])
    assert labels == sorted(["ㄒㄧㄥ2", "ㄏㄤ2", "ㄔㄤ2", "ㄓㄤ3"])
    assert readings == {"行": [labels.index("ㄒㄧㄥ2"), labels.index("ㄏㄤ2")], "長": [labels.index("ㄔㄤ2"), labels.index("ㄓㄤ3")]}


def test_config_is_read_not_run(tmp_path):
    path = tmp_path / "config.py"
    path.write_text(CONFIG_PY + "root = './cpp_dataset/'\ntrain_sent_path = root + 'train.sent'\nimport os\nos.remove('nothing')\n")
    config = G2PWConfig.from_file(path)
    config.check(path)
    assert config == G2PWConfig()


@pytest.mark.parametrize(
    "change",
    ["use_char_phoneme = True", "use_mask = False", "param_conditional = {'affect_location': 'emb'}", "param_conditional = {'fix_mode': 'count_distr:char'}"],
)
def test_other_configurations_refused(tmp_path, change):
    path = tmp_path / "config.py"
    path.write_text(CONFIG_PY + change + "\n")
    with pytest.raises(G2PWFolderError):
        G2PWConfig.from_file(path).check(path)
