"""Inputs of the `text25` golden (koe's side): fixtures25's small tiktoken vocabulary, in the released
file's name and format, and texts with the language each is spoken in.

The texts cover what the tokenizer sees after 2.5's front end and more: Chinese (characters the
vocabulary merged and ones it did not), English with contractions, numbers and runs of blanks,
Japanese kana, Korean, Spanish and French accents, Arabic, emoji, newlines and tabs, special
tokens written in the text (2.5's pronunciation markers `<|SPECIAL_TOKEN_1|>` / `_2|>`, a language,
a timestamp, `<|endoftext|>`) and look-alikes that are not special (other case, a code past the 99
special languages). Languages: upper and lower case, codes only `lang_to_token` knows (`yue`,
`zh/en`), 2.5's `zhen` and unknown ones (`common`). `state_sha256.txt` holds the vocabulary file's sha256.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from koe_indextts.fixtures25 import write_vocabulary

TEXTS = (
    ("今天天气很好，我们一起去公园散步吧。", "zh"),
    ("他在银<|SPECIAL_TOKEN_2|>XING2<|SPECIAL_TOKEN_2|>里走了半天，发现这笔业务办不<|SPECIAL_TOKEN_2|>HANG2<|SPECIAL_TOKEN_2|>。", "ZH"),
    ("骐骥一跃，不能十步；驽马十驾，功在不舍。", "zh"),
    ("he had a <|SPECIAL_TOKEN_1|>M IH1 . N AH0 T<|SPECIAL_TOKEN_1|> to examine the details.", "en"),
    ("it's 3:45 pm, and we'll be there in 12 minutes; they'd said they're fine, isn't it?", "EN"),
    ("Numbers: 1234567, 3.14159, -42, 1e10 and 2,500,000!!!", "en"),
    ("  leading   and trailing blanks   ", "en"),
    ("line one\nline two\n\n\ttabbed\r\nwindows", "en"),
    ("今天是个好日子 it's a good day", "zhen"),
    ("私は東京に住んでいます。ありがとうございました！カタカナ", "ja"),
    ("오늘 날씨가 좋네요. 감사합니다", "ko"),
    ("¿DÓNDE ESTÁ LA ESTACIÓN? EL TIEMPO ES MUY BUENO HOY.", "es"),
    ("Le temps est beau aujourd'hui, n'est-ce pas ?", "fr"),
    ("مرحبا بالعالم، كيف حالك؟", "ar"),
    ("emoji 😀🎉 and symbols ©®™ ½ → ∞", "en"),
    ("<|ja|>日本語<|en|>english<|0.50|><|endoftext|><|TTS/SP03|><|HAPPY|>", "ja"),
    ("<|special_token_1|> <|zhen|> <|yue|> <|SPECIAL_TOKEN_31|> <|30.02|>", "en"),
    ("粤语测试：佢哋喺度食紧饭。", "yue"),
    ("中英混合 mixed text", "zh/en"),
    ("unknown language code", "xx"),
    ("", "en"),
    (" ", "zh"),
    ("a", "common"),
)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_vocabulary(folder)
    (folder / "texts.json").write_text(json.dumps([list(t) for t in TEXTS], ensure_ascii=False, indent=1))
    (folder / "state_sha256.txt").write_text(hashlib.sha256(path.read_bytes()).hexdigest() + "\n")
