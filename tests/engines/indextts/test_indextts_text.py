"""IndexTTS's text front end against upstream's (golden `text`): the normalised text of releases 1.5
and 2 (with a glossary), the tokens, their ids and the segments at several limits, all equal; and the
errors for text there is nothing to speak in and for a missing or broken bpe.model."""

from __future__ import annotations

import json
import time

import numpy as np
import pytest
from goldens import check_recorded, load_golden, written
from koe_indextts.text import TextNormalizer, read_glossary, uses_chinese
from koe_indextts.text_fst import english_normalizer
from koe_indextts.text_tokenizer import START_TEXT, STOP_TEXT, BpeModelError, TextError, TextTokenizer, split_cjk, split_segments


@pytest.fixture(scope="module")
def front(tmp_path_factory):
    folder = written("text")
    golden = load_golden("text")
    check_recorded(golden, folder)
    v15 = TextNormalizer()
    v2 = TextNormalizer(glossary=read_glossary(folder / "glossary.yaml"))
    spec = json.loads((folder / "texts.json").read_text(encoding="utf-8"))
    return folder, golden, spec, TextTokenizer(folder / "bpe.model", v15), TextTokenizer(folder / "bpe.model", v2)


def strings(a: np.ndarray) -> list[str]:
    return [str(x) for x in a.tolist()]


def test_english_fsts_are_weTextProcessing_ones():
    """koe's English normaliser reads WeTextProcessing's FSTs (wetext's read some text otherwise)."""
    assert english_normalizer().tagger.path.endswith("tn/en_tn_tagger.fst")


def test_model_facts(front):
    folder, golden, spec, tok, _ = front
    assert tok.vocab_size == int(golden["vocab_size"]) and tok.unk_id == int(golden["unk_id"])
    assert tok.pieces([START_TEXT, STOP_TEXT]) == ["<s>", "</s>"]
    assert int(golden["count"]) == len(spec["texts"])


def test_normalized(front):
    _, golden, spec, tok, tok2 = front
    for i, text in enumerate(spec["texts"]):
        assert str(golden[f"{i}.text"]) == text
        assert tok.normalizer.normalize(text) == str(golden[f"{i}.normalized"]), (i, text)
        assert tok2.normalizer.normalize(text) == str(golden[f"{i}.normalized_v2"]), (i, text)


def test_tokens_and_ids(front):
    _, golden, spec, tok, tok2 = front
    for i, text in enumerate(spec["texts"]):
        tokens = tok.tokenize(text)
        assert tokens == strings(golden[f"{i}.tokens"]), (i, text)
        assert tok2.tokenize(text) == strings(golden[f"{i}.tokens_v2"]), (i, text)
        assert np.array_equal(np.array(tok.ids(tokens), dtype=np.int64), golden[f"{i}.ids"]), (i, text)


def test_segments(front):
    _, golden, spec, tok, _ = front
    cases = [(m, 0, f"seg{m}") for m in spec["limits"]] + [(m, q, f"seg{m}q{q}") for m, q in spec["quick"]]
    for i, text in enumerate(spec["texts"]):
        tokens = strings(golden[f"{i}.tokens"])
        for limit, quick, key in cases:
            segs = split_segments(tokens, limit, quick)
            assert [t for s in segs for t in s] == strings(golden[f"{i}.{key}.tokens"]), (i, key, text)
            assert np.array_equal(np.array([len(s) for s in segs], dtype=np.int64), golden[f"{i}.{key}.lengths"]), (i, key, text)


def test_segments_ids_as_upstream_cuts(front):
    *_, tok, _ = front
    text = "你好。今天天气很好，我们出去走走吧！Hello world, this is a test."
    tokens = tok.tokenize(text)
    assert tok.segments(text, 16) == [tok.ids(s) for s in split_segments(tokens, 16)]


@pytest.mark.parametrize("text", ["", "   ", "\t\n", "😀🎉", "😀"])
def test_nothing_to_speak(front, text):
    *_, tok, _ = front
    with pytest.raises(TextError):
        tok.segments(text)


def test_missing_or_broken_bpe_model(tmp_path):
    with pytest.raises(BpeModelError, match="no SentencePiece model"):
        TextTokenizer(tmp_path / "bpe.model")
    (tmp_path / "bpe.model").write_bytes(b"not a model")
    with pytest.raises(BpeModelError, match="not a SentencePiece model"):
        TextTokenizer(tmp_path / "bpe.model")


def test_detection_and_cjk_split():
    assert uses_chinese("ni3 hao3") and uses_chinese("a@b.com") and uses_chinese("123") and uses_chinese("中文 text")
    assert not uses_chinese("beta1 test") and not uses_chinese("hello world")
    assert split_cjk(" 你好world 的中文 ") == "你 好 WORLD 的 中 文"


def test_normaliser_loads_fast():
    """The FSTs are read, not built (upstream's first load builds them for seconds)."""
    from koe_indextts import text_fst

    text_fst.chinese_normalizer.cache_clear()
    text_fst.english_normalizer.cache_clear()
    start = time.perf_counter()
    TextNormalizer().load()
    assert time.perf_counter() - start < 3.0
