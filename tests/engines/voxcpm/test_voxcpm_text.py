"""koe's VoxCPM text front end against upstream voxcpm 2.0.3 (LlamaTokenizerFast of transformers 4.57.3).

One oracle launch per tokenizer folder (tests/oracle_voxcpm/text_ids.py) gives upstream's
`text_tokenizer(text)` ids for every text; koe's `TextTokenizer` must give the same lists. The
folders are the fixture tokenizer in both Llama layouts (legacy normalizer, Metaspace
pre-tokenizer) and two variants whose config names special tokens tokenizer.json lacks.
"""

from __future__ import annotations

import json

import pytest
from oracle_harness import run_oracle
from tokenizers import Tokenizer

from koe.engines.base import EmptyText
from koe.engines.voxcpm.fixture_tokenizer import write_tokenizer
from koe.engines.voxcpm.text import TextTokenizer, TokenizerError, normalise_text

TEXTS = [
    # English
    "Hello world",
    "Hello, world! This is the test.",
    "the hello is a world",
    "hi",
    "HELLO World",
    # Chinese: multi-character tokens (你好 世界 中国 再见, 谢谢 with unknown characters), ▁你好 / ▁我们
    "你好世界",
    "中国人说你好",
    "我们的世界",
    "谢谢",
    "你好 我们",
    "再见，中国！",
    "说说说",
    "你好你好",
    # mixed
    "Hello 你好 world 世界",
    "我们say hello中国",
    "the中国is",
    "100 你好100",
    # digits and punctuation, some through byte fallback
    "1 2 3 100 1000 3.14",
    "a-b: (c); \"d\" 'e'",
    "@#$%^&*+=|\\/~`",
    "，。！？、",
    # emoji and other bytes
    "😀",
    "Hi 😀👍🏽 你好",
    "Café naïve",
    "Привет",
    "こんにちは",
    "𠀀",
    # whitespace
    "  leading",
    "trailing  ",
    "  both  ",
    "a  b   c",
    "a\nb",
    "\n你好\n",
    "a\tb",
    "\u3000你好",
    " ",
    "",
    # special tokens written in the text
    "<s>hi</s>",
    "<unk> hello",
    "<|im_end|>你好<|spk|>",
]


def _oracle_ids(folder, tmp_path, name):
    _, info = run_oracle("text_ids", {"model": str(folder), "texts": TEXTS}, tmp_path / name, family="voxcpm")
    return info


def _assert_same(folder, info):
    koe = TextTokenizer.load(folder)
    for text, ids in zip(TEXTS, info["ids"], strict=True):
        assert koe(text) == ids, text
    assert koe.vocab_size == info["len"]
    assert sorted(koe.multichar_tokens) == info["multichar_tokens"]
    return koe


@pytest.mark.parametrize("legacy", [True, False], ids=["legacy-normalizer", "metaspace"])
def test_ids_equal_upstream(tmp_path, legacy):
    folder = tmp_path / "model"
    write_tokenizer(folder, legacy=legacy)
    info = _oracle_ids(folder, tmp_path, "oracle")
    assert info["class"] == "LlamaTokenizerFast"
    koe = _assert_same(folder, info)
    # from_pretrained leaves the fixture as it is: the same tokens as tokenizer.json read directly
    raw = Tokenizer.from_file(str(folder / "tokenizer.json"))
    for text, tokens in zip(TEXTS, info["tokens"], strict=True):
        assert raw.encode(text, add_special_tokens=False).tokens == tokens, text
    # the split is exercised: multi-character tokens become characters, 谢 is unknown
    assert koe.tokenize("你好世界") == ["你", "好", "世", "界"]
    assert koe("谢谢") == [koe.unk_id, koe.unk_id] == [0, 0]
    assert koe.tokenize("你好 我们")[-1] == "▁我们"
    assert all(i < 1000 for text in TEXTS for i in koe(text))


def _edit_config(folder, change):
    path = folder / "tokenizer_config.json"
    config = json.loads(path.read_text())
    change(config)
    path.write_text(json.dumps(config))


def test_config_special_tokens_added_as_upstream(tmp_path):
    """Special tokens only the config names (not in tokenizer.json) are added, as from_pretrained adds them."""
    folder = tmp_path / "model"
    write_tokenizer(folder)
    _edit_config(folder, lambda c: c.update(additional_special_tokens=["<|im_end|>", "<|spk|>"], eos_token="<|im_end|>"))
    info = _oracle_ids(folder, tmp_path, "oracle")
    koe = _assert_same(folder, info)
    # the legacy normalizer prepends ▁ after the special token (▁你好), and the split drops that ▁
    assert koe.tokenize("<|im_end|>你好<|spk|>") == ["<|im_end|>", "你", "好", "<|spk|>"]


def test_special_tokens_map_legacy_path(tmp_path):
    """A config without added_tokens_decoder: special_tokens_map.json's entries win, as upstream reads them."""
    folder = tmp_path / "model"
    write_tokenizer(folder, legacy=False)
    _edit_config(folder, lambda c: c.pop("added_tokens_decoder"))
    special = json.loads((folder / "special_tokens_map.json").read_text())
    special["additional_special_tokens"] = ["<|spk|>"]
    (folder / "special_tokens_map.json").write_text(json.dumps(special))
    _assert_same(folder, _oracle_ids(folder, tmp_path, "oracle"))


def test_normalise_text():
    assert normalise_text("a\nb") == "a b"
    assert normalise_text("a \n\n b\t\tc\r\nd") == "a b c d"
    assert normalise_text("  Hello  ") == " Hello "
    assert normalise_text("你好\u3000\u3000世界") == "你好 世界"
    assert normalise_text("x\u00a0\u2003y") == "x y"
    assert normalise_text("unchanged, text.") == "unchanged, text."


@pytest.mark.parametrize("text", ["", " ", "\n\t \u3000", None, 3])
def test_normalise_text_refuses_empty(text):
    with pytest.raises(EmptyText):
        normalise_text(text)


def test_errors(tmp_path):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        TextTokenizer.load(tmp_path)
    folder = tmp_path / "model"
    write_tokenizer(folder)
    koe = TextTokenizer.load(folder)
    with pytest.raises(TokenizerError, match="string"):
        koe(b"bytes")
    assert isinstance(TokenizerError("x"), ValueError)
    _edit_config(folder, lambda c: c.update(add_prefix_space=True))
    with pytest.raises(TokenizerError, match="add_prefix_space"):
        TextTokenizer.load(folder)
    (folder / "tokenizer.json").write_text("{not json")
    _edit_config(folder, lambda c: c.pop("add_prefix_space"))
    with pytest.raises(TokenizerError, match="cannot read"):
        TextTokenizer.load(folder)
