"""CosyVoice's text front end with the normalisers koe installs (wetext and inflect, koe's
dependencies), against upstream's `CosyVoiceFrontEnd.text_normalize` with its own (its source at
ace7c47 in `.oracle-cosyvoice`, oracle script tests/oracle_cosyvoice/lm_text.py): the same pieces
(split=True) and the same normalised text (split=False) for numbers, dates, times, money, Chinese
with digits, mixed scripts, marks and quotes, long texts that split, and `<|...|>` markers
(test_cosyvoice_lm_text compares the same front end given the outputs upstream's normalisers
recorded; this test runs both sides' own).

And where upstream fails: wetext's English normaliser raises on some runs of blanks (a blank line
between paragraphs), so upstream's front end raises; koe's normalises such text paragraph by
paragraph (koe.engines.cosyvoice.text's docstring) and speaks it.
"""

from __future__ import annotations

import pytest
from oracle_harness import run_oracle

from koe.engines.cosyvoice.fixtures import write_random_model
from koe.engines.cosyvoice.text import FrontEnd, Normalizers, TextTokenizer

LONG_EN = " ".join(f"Chapter {i} begins on page {i * 12}, and the reader turns it slowly before going on." for i in range(1, 9))
LONG_ZH = "".join(f"第{i}章从第{i * 12}页开始，读者慢慢地翻过这一页，然后继续往下读。" for i in range(1, 9))
TEXTS = [
    "I have 3 apples, 12 pears and 1,234,567 grains of rice.",
    "The meeting is on 2024-05-06 at 3:30 pm; bring $12.50 or €7.",
    "It costs 50% more: 1/2 of 10kg is 5kg, and -3 is below zero.",
    "Dr. Smith lives at 221B Baker St. since 1999, the 1st of May.",
    "Call 555-0123 or +1 (800) 555-0199 before 9am!",
    "今天是2024年5月6日，下午3点30分，气温25°C，湿度60%。",
    "我有3个iPhone 15和2台MacBook，一共花了12000元。",
    "电话是13800138000，房间号是1203，面积100m²。",
    "她说：“你好。”然后走了。他说“再见！”",
    'He said "hello." Then "bye!" And left... right?',
    "Wait - what? No; yes: maybe!",
    LONG_EN,
    LONG_ZH,
    "You are a helpful assistant.<|endofprompt|>Say it with 3 smiles.",
    "<|en|>A marker: 12 numbers stay as they are.",
    "[laughter] That is 2 funny [breath] really.",
    "Line one\nline two has 2 words\nline three",
    "  padded text with 7 spaces around  ",
    "中文和English混在一起，还有123。",
    "...?!",
]
PARAGRAPHS = ["Hello.\n\nWorld.", "Paragraph one has 3 words.\n\n\nParagraph two, 4.\r\n\r\nThree.", "a  b", "Tabs\t\tbetween 2 words."]


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    folder = write_random_model(tmp_path_factory.mktemp("cosyvoice-text") / "v2", "CosyVoice2-0.5B", parts=("yaml", "blank"))
    return folder, FrontEnd(TextTokenizer(folder, 2), Normalizers.installed())


@pytest.fixture(scope="module")
def upstream(front, tmp_path_factory):
    job = {"folders": [str(front[0])], "texts": [], "front_texts": TEXTS + PARAGRAPHS}
    return run_oracle("lm_text", job, tmp_path_factory.mktemp("text"), family="cosyvoice")[1]["front_ends"]["wetext"]


@pytest.mark.oracle
@pytest.mark.parametrize("i", range(len(TEXTS)), ids=lambda i: TEXTS[i][:24])
def test_front_end_equals_upstreams_with_the_installed_normalisers(front, upstream, i):
    want = upstream[i]
    assert "error" not in want, want
    assert front[1].normalize(TEXTS[i], split=True) == want["pieces"]
    assert front[1].normalize(TEXTS[i], split=False) == want["text"]


@pytest.mark.oracle
def test_the_texts_cover_splitting(upstream):
    assert max(len(upstream[i]["pieces"]) for i in range(len(TEXTS))) >= 3


@pytest.mark.oracle
@pytest.mark.parametrize("i", range(len(PARAGRAPHS)))
def test_upstream_fails_on_runs_of_blanks_and_koe_speaks_them(front, upstream, i):
    """Each of these raises in upstream's front end (wetext's AssertionError); koe gives the
    paragraphs' own normalisations, joined by a space."""
    assert upstream[len(TEXTS) + i]["error"].startswith("AssertionError"), upstream[len(TEXTS) + i]
    pieces = front[1].normalize(PARAGRAPHS[i])
    assert pieces and all("\n" not in p and "  " not in p for p in pieces), pieces


def test_blank_lines_are_normalised_paragraph_by_paragraph(front):
    frontend = front[1]
    assert frontend.normalize("Hello.\n\nWorld.") == ["Hello. World."]
    assert frontend.normalize("Paragraph one has 3 words.\n\n\nParagraph two, 4.", split=False) == "Paragraph one has three words. Paragraph two, four."
    assert frontend.normalize("Tabs\t\tbetween 2 words.") == ["Tabs between two words."]


def test_a_normaliser_is_called_whole_first_and_per_paragraph_only_when_it_refuses(front):
    calls = []

    def picky(text: str) -> str:
        calls.append(text)
        if "\n\n" in text:
            raise AssertionError
        return text.upper()

    frontend = FrontEnd(front[1].tokenizer, Normalizers(zh=picky, en=picky))
    assert frontend.normalize("one\ntwo.", split=False) == "ONE\nTWO." and calls == ["one\ntwo."]
    calls.clear()
    assert frontend.normalize("one.\n\n  two.", split=False) == "ONE. TWO." and calls == ["one.\n\n  two.", "one.", "two."]
    calls.clear()
    assert frontend.normalize("一。\n\n二。", split=False) == "一。二。" and calls == ["一。\n\n二。", "一。", "二。"]

    def broken(text: str) -> str:
        raise AssertionError("no")

    with pytest.raises(AssertionError):  # nothing to cut: the normaliser's own error
        FrontEnd(front[1].tokenizer, Normalizers(en=broken)).normalize("one paragraph")
