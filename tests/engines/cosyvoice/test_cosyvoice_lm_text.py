"""CosyVoice's text against upstream's (its source at ace7c47 in `.oracle-cosyvoice`), one oracle run:

- the tokenizer (koe.engines.cosyvoice.text.TextTokenizer) against upstream's `get_qwen_tokenizer`
  on the folder's CosyVoice-BlankEN: the same ids for every text, CosyVoice's special tokens and
  v3's phone tokens included, and the same decoded text;
- the front end (FrontEnd) against upstream's `text_normalize`: the same pieces and the same
  normalised text, for Chinese and other text, with wetext and inflect (upstream's normalisers)
  and without wetext (upstream's fallback). Here koe's side is given the outputs upstream's
  normalisers gave for the very calls upstream's front end made (recorded by the oracle), so what
  is compared is everything around them (where they are called, the clean-up, the splitting and
  packing, the punctuation filter, the marker rule); test_cosyvoice_text_normalize.py compares
  each side with its own installed wetext and inflect (koe's dependencies).
"""

from __future__ import annotations

import pytest
from oracle_harness import run_oracle

from koe.engines.cosyvoice.fixtures import VARIANTS, write_random_model
from koe.engines.cosyvoice.text import SPECIAL_TOKENS, FrontEnd, Normalizers, TextTokenizer

pytestmark = pytest.mark.oracle

TEXTS = [
    "Hello world, this is a test of the voice.",
    "You are a helpful assistant.<|endofprompt|>希望你以后能够做的比我还好呦。",
    "收到好友从远方寄来的生日礼物，那份意外的惊喜与深深的祝福让我心中充满了甜蜜的快乐，笑容如花儿般绽放。",
    "[breath]Well,[laughter] that's <strong>really</strong> unexpected[sigh]... isn't it?",
    "<|endofsystem|>[AA1][B][ǜ][iàng] mixed [zh][ang] phones, [unknown] brackets",
    "Numbers 1234567 and 3.14, emoji 😀🎉, tabs\tand\nnew lines\r\n  spaces   end ",
    "日本語のテキストとhangul 한국어 텍스트, Ελληνικά, русский.",
    "Ｆｕｌｌ－ｗｉｄｔｈ ＡＢＣ and e\u0301 (combining) vs é",
    "",
    "<|im_start|>user<|im_end|><|endoftext|>[mn][vocalized-noise]<laughter>ha</laughter>",
]


LONG_EN = " ".join(f"Sentence number {i} is here, and it keeps going for a while to fill the piece." for i in range(1, 12))
LONG_ZH = "".join(f"这是第{i}句话，我们需要足够长的文本来测试分段的逻辑。" for i in range(1, 15))
FRONT_TEXTS = [
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
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-text")
    return [write_random_model(root / variant, variant, parts=("yaml", "blank")) for variant in VARIANTS]


@pytest.fixture(scope="module")
def upstream(folders, tmp_path_factory):
    job = {"folders": [str(f) for f in folders], "texts": TEXTS, "front_texts": FRONT_TEXTS}
    return run_oracle("lm_text", job, tmp_path_factory.mktemp("text"), family="cosyvoice")[1]


@pytest.mark.parametrize("i", range(len(VARIANTS)), ids=list(VARIANTS))
def test_ids_and_decoding_equal_upstreams(i, folders, upstream):
    found = upstream["folders"][i]
    tokenizer = TextTokenizer(folders[i], found["version"])
    assert len(tokenizer) == found["size"] == 151643 + len(SPECIAL_TOKENS[found["version"]])  # Qwen's 3 added tokens come first in the list
    for text, want, decoded in zip(TEXTS, found["ids"], found["decoded"]):
        ids = tokenizer.encode(text)
        assert ids == want, f"{text!r}: koe {ids}, upstream {want}"
        assert tokenizer.decode(ids) == decoded, text
    assert tokenizer.token_id("<|endofprompt|>") == 151646


@pytest.mark.parametrize("front_end", ["wetext", "none"])
def test_front_end_pieces_and_text_equal_upstreams(folders, upstream, front_end):
    calls = upstream["calls"]
    recorded = {k: calls[k].__getitem__ for k in ("zh", "en", "number")}
    if front_end == "none":
        recorded["zh"] = recorded["en"] = None
    front = FrontEnd(TextTokenizer(folders[0], 2), Normalizers(**recorded))
    for text, want in zip(FRONT_TEXTS, upstream["front_ends"][front_end]):
        if "error" in want:
            pytest.fail(f"upstream failed on {text!r}: {want['error']}")
        assert front.normalize(text, split=True) == want["pieces"], text
        assert front.normalize(text, split=False) == want["text"], text
    assert any(len(w["pieces"]) > 2 for w in upstream["front_ends"][front_end])  # the long texts were packed into several pieces


def test_installed_normalizers_are_optional():
    n = Normalizers.installed()
    assert all(f is None or callable(f) for f in (n.zh, n.en, n.number))
