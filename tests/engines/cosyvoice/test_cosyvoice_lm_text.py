"""CosyVoice's text tokenizer (koe.engines.cosyvoice.text) against upstream's (its
`get_qwen_tokenizer` on the folder's CosyVoice-BlankEN, in `.oracle-cosyvoice`): the same ids for
every text, CosyVoice's special tokens and v3's phone tokens included, and the same decoded text."""

from __future__ import annotations

import pytest
from oracle_harness import run_oracle

from koe.engines.cosyvoice.fixtures import VARIANTS, write_random_model
from koe.engines.cosyvoice.text import SPECIAL_TOKENS, TextTokenizer

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


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-text")
    return [write_random_model(root / variant, variant, parts=("yaml", "blank", "llm.pt", "hift.pt")) for variant in VARIANTS]


@pytest.fixture(scope="module")
def upstream(folders, tmp_path_factory):
    return run_oracle("lm_text", {"folders": [str(f) for f in folders], "texts": TEXTS}, tmp_path_factory.mktemp("text"), family="cosyvoice")[1]["folders"]


@pytest.mark.parametrize("i", range(len(VARIANTS)), ids=list(VARIANTS))
def test_ids_and_decoding_equal_upstreams(i, folders, upstream):
    found = upstream[i]
    tokenizer = TextTokenizer(folders[i], found["version"])
    assert len(tokenizer) == found["size"] == 151643 + len(SPECIAL_TOKENS[found["version"]])  # Qwen's 3 added tokens come first in the list
    for text, want, decoded in zip(TEXTS, found["ids"], found["decoded"]):
        ids = tokenizer.encode(text)
        assert ids == want, f"{text!r}: koe {ids}, upstream {want}"
        assert tokenizer.decode(ids) == decoded, text
    assert tokenizer.token_id("<|endofprompt|>") == 151646
