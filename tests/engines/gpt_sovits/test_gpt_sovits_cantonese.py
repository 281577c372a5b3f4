"""GPT-SoVITS's cantonese front end against upstream's on the `cantonese` golden (see golden_cantonese.py for the
corpus): normalised text, phonemes and word2ph, and clean_text for `yue` (v2), each exactly."""

from __future__ import annotations

import front_end_check
import pytest
import sovits_goldens

from koe.engines.gpt_sovits.text import cantonese

golden, folder = sovits_goldens.fixtures("cantonese")


@pytest.fixture(scope="module")
def cases(golden, folder) -> list[dict]:
    return front_end_check.cases(golden)


def test_cantonese_front_end(cases):
    front_end_check.check_module(cantonese, cases)


def test_clean_text_yue(cases):
    front_end_check.check_clean_text("yue", "v2", cases)
