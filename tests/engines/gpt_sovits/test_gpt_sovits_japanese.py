"""GPT-SoVITS's japanese front end against upstream's on the `japanese` golden (see golden_japanese.py for the
corpus): normalised text, phonemes and word2ph, and clean_text for `ja` (v2), each exactly."""

from __future__ import annotations

import front_end_check
import pytest
import sovits_goldens

from koe.engines.gpt_sovits.text import japanese

golden, folder = sovits_goldens.fixtures("japanese")


@pytest.fixture(scope="module")
def cases(golden, folder) -> list[dict]:
    return front_end_check.cases(golden)


def test_japanese_front_end(cases):
    front_end_check.check_module(japanese, cases)


def test_clean_text_ja(cases):
    front_end_check.check_clean_text("ja", "v2", cases)
