"""GPT-SoVITS's korean front end against upstream's on the `korean` golden (see golden_korean.py for the
corpus): normalised text, phonemes and word2ph, and clean_text for `ko` (v2), each exactly."""

from __future__ import annotations

import front_end_check
import pytest
import sovits_goldens

from koe.engines.gpt_sovits.text import korean

golden, folder = sovits_goldens.fixtures("korean")


@pytest.fixture(scope="module")
def cases(golden, folder) -> list[dict]:
    return front_end_check.cases(golden)


def test_korean_front_end(cases):
    front_end_check.check_module(korean, cases)


def test_clean_text_ko(cases):
    front_end_check.check_clean_text("ko", "v2", cases)


def test_g2pk2_package_never_imported(cases):
    # g2pk2's __init__ imports g2pk2.g2pk2, which downloads NLTK's CMUdict when it is missing
    import sys

    korean.g2p("읽을 리가 없다")
    assert "g2pk2.g2pk2" not in sys.modules
    assert "g2pk2" not in sys.modules or hasattr(sys.modules["g2pk2"], "G2p")
