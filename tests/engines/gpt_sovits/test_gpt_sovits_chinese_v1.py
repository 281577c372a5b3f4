"""GPT-SoVITS's chinese_v1 front end against upstream's on the `chinese_v1` golden (see golden_chinese_v1.py for the
corpus): normalised text, phonemes and word2ph, and clean_text for `zh` (v1), each exactly."""

from __future__ import annotations

import front_end_check
import pytest
import sovits_goldens

from koe.engines.gpt_sovits.text import chinese_v1

golden, folder = sovits_goldens.fixtures("chinese_v1")


@pytest.fixture(scope="module")
def cases(golden, folder) -> list[dict]:
    return front_end_check.cases(golden)


def test_chinese_v1_front_end(cases):
    front_end_check.check_module(chinese_v1, cases)


def test_clean_text_zh(cases):
    front_end_check.check_clean_text("zh", "v1", cases)
