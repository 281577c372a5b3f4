"""GPT-SoVITS v2's Chinese front end against upstream's (`text/chinese2.py`) on the `chinese` golden:
the normaliser, g2p given upstream's own G2PW readings, the G2PW converter and network on the stand-in
model folder, and the whole chain, each exactly (see golden_chinese.py for the corpus and fixtures)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import sovits_goldens
import torch

from koe.engines.gpt_sovits.g2pw import G2PW
from koe.engines.gpt_sovits.text import chinese
from koe.engines.gpt_sovits.text.zh_norm import normalize

golden, folder = sovits_goldens.fixtures("chinese")


@pytest.fixture(scope="module")
def cases(golden) -> list[dict]:
    return json.loads(str(golden["cases"]))


@pytest.fixture(scope="module")
def g2pw(folder) -> G2PW:
    torch.set_num_threads(1)
    return G2PW(folder / "G2PWModel", folder / "bert")


def test_normalize(cases):
    for case in cases:
        assert normalize(case["text"]) == case["norm"], case["text"]


def test_g2p_with_upstreams_g2pw_readings(cases):
    # tone sandhi, segmentation, erhua, the polyphone dictionary and the symbol table, G2PW aside
    for case in cases:
        readings = {json.dumps(b["batch"], ensure_ascii=False): b["pinyin"] for b in case["g2pw"]}
        phones, word2ph = chinese.g2p(case["norm"], lambda batch, readings=readings: readings[json.dumps(batch, ensure_ascii=False)])
        assert (phones, word2ph) == (case["phones"], case["word2ph"]), case["norm"]


def test_g2pw_network_labels(golden, g2pw):
    calls = sorted({k.split(".")[0] for k in golden if k.startswith("call")}, key=lambda c: int(c[4:]))
    assert calls, "the golden recorded no G2PW call"
    for call in calls:
        inputs = [
            torch.from_numpy(golden[f"{call}.{name}"]) for name in ("input_ids", "token_type_ids", "attention_mask", "phoneme_mask", "char_ids", "position_ids")
        ]
        with torch.inference_mode():
            probs = g2pw.net(*inputs)
        assert np.array_equal(probs.argmax(dim=-1).numpy(), golden[f"{call}.label"]), call


def test_g2pw_converter(cases, g2pw):
    for case in cases:
        for b in case["g2pw"]:
            assert g2pw(b["batch"]) == b["pinyin"], b["batch"]


def test_chinese_front_end(cases, g2pw):
    for case in cases:
        norm = normalize(case["text"])
        assert chinese.g2p(norm, g2pw) == (case["phones"], case["word2ph"]), case["text"]
