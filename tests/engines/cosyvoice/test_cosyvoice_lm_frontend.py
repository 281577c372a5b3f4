"""CosyVoice's text front end (koe.engines.cosyvoice.text.FrontEnd) against upstream's
`text_normalize` (its source at ace7c47 in `.oracle-cosyvoice`): the same pieces and the same
normalised text, for Chinese and other text, with wetext and inflect (upstream's normalisers) and
without wetext (upstream's fallback).

koe's runtime does not ship wetext or inflect, so koe's side is given the outputs upstream's
normalisers gave for the very calls upstream's front end made (recorded by the oracle): what is
compared is everything around them (where they are called, the clean-up, the splitting and
packing, the punctuation filter, the marker rule).
"""

from __future__ import annotations

import pytest
from oracle_harness import run_oracle

from koe.engines.cosyvoice.fixtures import write_random_model
from koe.engines.cosyvoice.text import FrontEnd, Normalizers, TextTokenizer

pytestmark = pytest.mark.oracle

LONG_EN = " ".join(f"Sentence number {i} is here, and it keeps going for a while to fill the piece." for i in range(1, 12))
LONG_ZH = "".join(f"这是第{i}句话，我们需要足够长的文本来测试分段的逻辑。" for i in range(1, 15))
TEXTS = [
    "Hello world, this is a test of the voice.",
    "  I have 3 apples and 1,234 oranges on 2024-05-06; the total is $12.50! Right?  ",
    "收到好友从远方寄来的生日礼物，那份意外的惊喜与深深的祝福让我心中充满了甜蜜的快乐，笑容如花儿般绽放。",
    "今天是2024年5月6日，气温25°C，面积100m²，体积3m³. 价格是¥12.5元 - 很便宜",
    "（括号）【方括号】——破折号 `代码` and English words 在 中 文 里",
    "她说：“你好。”然后走了。他说“再见！”",
    'He said "hello." Then "bye!" And left...',
    LONG_EN,
    LONG_ZH,
    "You are a helpful assistant.<|endofprompt|>Say it slowly.",
    "...!!!",
    "，，，",
    "Line one\nline two\nline three",  # (wetext 0.1.8 fails on an empty line: "\n\n" raises in its English normaliser)
    "中文,,、",
    "Numbers: ٣٤٥ and ３４ and 7.",
    "",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return write_random_model(tmp_path_factory.mktemp("cosyvoice-front") / "v2", "CosyVoice2-0.5B", parts=("yaml", "blank"))


@pytest.fixture(scope="module")
def upstream(folder, tmp_path_factory):
    return run_oracle("lm_frontend", {"folder": str(folder), "texts": TEXTS}, tmp_path_factory.mktemp("front"), family="cosyvoice")[1]


@pytest.mark.parametrize("front_end", ["wetext", "none"])
def test_pieces_and_text_equal_upstreams(folder, upstream, front_end):
    calls = upstream["calls"]
    recorded = {k: calls[k].__getitem__ for k in ("zh", "en", "number")}
    if front_end == "none":
        recorded["zh"] = recorded["en"] = None
    front = FrontEnd(TextTokenizer(folder, 2), Normalizers(**recorded))
    for text, want in zip(TEXTS, upstream["front_ends"][front_end]):
        if "error" in want:
            pytest.fail(f"upstream failed on {text!r}: {want['error']}")
        assert front.normalize(text, split=True) == want["pieces"], text
        assert front.normalize(text, split=False) == want["text"], text
    assert any(len(w["pieces"]) > 2 for w in upstream["front_ends"][front_end])  # the long texts were packed into several pieces


def test_installed_normalizers_are_optional():
    n = Normalizers.installed()
    assert all(f is None or callable(f) for f in (n.zh, n.en, n.number))
