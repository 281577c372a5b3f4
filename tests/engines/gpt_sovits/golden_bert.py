"""Inputs of the `bert` golden (koe's side): a tiny `chinese-roberta-wwm-ext-large` (fixtures_bert,
3 layers so that `hidden_states[-3]` is a layer's output), the tokenizer's tricky texts, and
texts split into pieces whose front-end results are given (the front end is another topic's).

- `bert/`: `write_random_bert(SEED)` (config.json, fp16 pytorch_model.bin, tokenizer.json);
  `bert_vocab/`: the same config and vocabulary as `vocab.txt` only (no weights).
- `cases.json`: `tokenizer_texts`; `characters` (norm_text, word2ph) for `get_bert_feature`;
  `encoder_texts` (every hidden state, one at a time and as a padded batch); `pieces`: per case the
  text, upstream's language setting, what `LangSegmenter.getTexts` returns for it (`segments`),
  what `clean_text_inf` returns for each piece (`cleaned`: text -> phones, word2ph, norm_text),
  and the pieces `get_phones_and_bert` makes of them (`pieces`: language, text), which the oracle
  checks.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from koe.engines.gpt_sovits.fixtures_bert import bert_config, random_bert_state, vocabulary, write_random_bert
from koe.runtime.weights import state_sha256

SEED = 11

TOKENIZER_TEXTS = [
    "你好，世界。",
    "Hello WORLD, GPTs and café naïve!",
    "ＡＢＣ１２３　全角空格",
    "[MASK] [mask] [CLS]中文[SEP]",
    "x\u200by\tz\n\r\x00\ufeff末尾",
    "🙂我爱Python编程！",
    "a" * 120,
    "ÀÉÎ ñ e\u0301 İstanbul ß ﬁ Ⅻ",
    "한국어 日本語です 𠀀〇",
    "“引号”《书名》（括号）——破折号……",
    "sovits GPTSoVITS helloworld",
]

CHARACTERS = [
    ("你好，世界。", [2, 2, 1, 2, 2, 1]),
    ("我爱编程！", [2, 2, 2, 2, 1]),
    ("今天天气真好，我们一起去公园散步吧。", [2, 2, 2, 2, 2, 2, 1, 2, 2, 2, 2, 2, 2, 2, 2, 2, 2, 1]),
    ("一二三", [3, 0, 2]),
    ("电脑程序" * 30 + "。", [2] * 120 + [1]),
]

ENCODER_TEXTS = ["你好，世界。", "Hello 世界 gpt sovits!"]


def _phones(n: int, seed: int) -> list[int]:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(1, 300, (n,), generator=g).tolist()


def _zh(text: str, seed: int) -> list:
    """A Chinese piece's cleaned result: 2 phonemes a character, 1 for punctuation."""
    word2ph = [1 if ch in "，。！？、…" else 2 for ch in text]
    return [_phones(sum(word2ph), seed), word2ph, text]


def _other(text: str, n: int, seed: int) -> list:
    return [_phones(n, seed), None, text]


PIECES = [
    {
        "name": "zh",
        "text": "今天天气真好，我们去散步。",
        "language": "zh",
        "segments": [{"lang": "zh", "text": "今天天气真好，我们去散步。"}],
        "cleaned": {"今天天气真好，我们去散步。": _zh("今天天气真好，我们去散步。", 1)},
        "pieces": [["zh", "今天天气真好，我们去散步。"]],
    },
    {
        "name": "en",
        "text": "Hello world, this is GPT so vits.",
        "language": "en",
        "segments": [],
        "cleaned": {"Hello world, this is GPT so vits.": _other("hello world, this is GPT so vits.", 21, 2)},
        "pieces": [["en", "Hello world, this is GPT so vits."]],
    },
    {
        "name": "zh_mixed",
        "text": "我爱Python编程，真好。今天好",
        "language": "zh",
        "segments": [
            {"lang": "zh", "text": "我爱"},
            {"lang": "en", "text": "Python"},
            {"lang": "zh", "text": "编程，真好。"},
            {"lang": "ja", "text": "今天好"},
        ],
        "cleaned": {
            "我爱": _zh("我爱", 3),
            "Python": _other("python", 6, 4),
            "编程，真好。今天好": _zh("编程，真好。今天好", 5),
        },
        "pieces": [["zh", "我爱"], ["en", "Python"], ["zh", "编程，真好。今天好"]],
    },
    {
        "name": "auto",
        "text": "你好，Hello！こんにちは。",
        "language": "auto",
        "segments": [{"lang": "zh", "text": "你好，"}, {"lang": "en", "text": "Hello！"}, {"lang": "ja", "text": "こんにちは。"}],
        "cleaned": {"你好，": _zh("你好，", 6), "Hello！": _other("hello!", 5, 7), "こんにちは。": _other("こんにちは。", 11, 8)},
        "pieces": [["zh", "你好，"], ["en", "Hello！"], ["ja", "こんにちは。"]],
    },
    {
        "name": "all_zh",
        "text": "我们一起学GPT吧。",
        "language": "all_zh",
        "segments": [{"lang": "zh", "text": "我们一起学"}, {"lang": "en", "text": "GPT"}, {"lang": "zh", "text": "吧。"}],
        "cleaned": {"我们一起学": _zh("我们一起学", 9), "GPT": _other("GPT", 7, 10), "吧。": _zh("吧。", 11)},
        "pieces": [["zh", "我们一起学"], ["en", "GPT"], ["zh", "吧。"]],
    },
    {
        "name": "all_yue",
        "text": "我哋一齊去飲茶。",
        "language": "all_yue",
        "segments": [{"lang": "zh", "text": "我哋一齊去飲茶。"}],
        "cleaned": {"我哋一齊去飲茶。": _other("我哋一齊去飲茶。", 22, 12)},
        "pieces": [["yue", "我哋一齊去飲茶。"]],
    },
]


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    write_random_bert(folder / "bert", SEED)
    vocab = folder / "bert_vocab"
    vocab.mkdir()
    (vocab / "config.json").write_text(json.dumps(bert_config(), indent=2) + "\n")
    (vocab / "vocab.txt").write_text("".join(t + "\n" for t in vocabulary()), encoding="utf-8")
    cases = {"tokenizer_texts": TOKENIZER_TEXTS, "characters": CHARACTERS, "encoder_texts": ENCODER_TEXTS, "pieces": PIECES}
    (folder / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
    (folder / "state_sha256.txt").write_text(state_sha256(random_bert_state(SEED)) + "\n")
