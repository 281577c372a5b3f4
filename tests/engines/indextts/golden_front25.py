"""Inputs of the `front25` golden (koe's side): IndexTTS 2.5's text front end, from a request's text
and language to the ids of each segment, on fixtures25's small tiktoken vocabulary.

Each case is a text, its language, the segment limits it is cut at (`max_text_tokens_per_segment`),
whether it is normalised (`text_normalization`), the GPT's text positions and the seed Python's
`random` gets before the front end runs. The cases cover every language branch (en, zh, zhen, ja,
es, yue, ar, an unknown code, an upper-case code), pronunciation annotations (a Chinese word, an
English word, kana readings, a non-kana reading in Japanese), special markers written in the text,
Japanese runs with and without kanji, the glossary, long texts cut at two limits (at sentence
marks, inside a run with none, around annotations), a limit above the GPT's positions, a limit of
one token, normalising off, and upstream's behaviour on bad input (no text, an unclosed annotation).
`glossary.yaml` is the model's glossary; `state_sha256.txt` holds the vocabulary file's sha256.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from koe_indextts.fixtures25 import write_vocabulary

POSITIONS = 602  # a GPT with max_text_tokens 600
SEED = 1000  # case i runs after random.seed(SEED + i)
GLOSSARY = "TTS: T T S\nC++:\n  en: C plus plus\n  zh: C 加加\n"

LONG_EN = (
    "The weather was bright and cold, and the clocks were striking thirteen. Winston Smith, his chin nuzzled into his "
    "breast, slipped quickly through the glass doors of Victory Mansions! Did he see it? He did; it was 3:45 pm, "
    "and the hallway smelt of boiled cabbage and old rag mats: nothing new."
)
LONG_ZH = (
    "今天天气很好，我们一起去公园散步吧。公园里有很多人，有的在跑步，有的在下棋，还有的在唱歌！"
    "小明说：“我们明天再来好不好？”妈妈笑着点了点头。2024年3月15日，气温25度。"
)
LONG_RUN = "abcdefghijklmnopqrstuvwxyz" * 3 + "，他在银<行|XING2>里<行|HANG2>走了半天<minute|M IH1 . N AH0 T>没有标点的一长串文字就这样写下去"
LONG_JA = "私は東京に住んでいます。毎朝、駅まで歩いて、電車で会社に行きます。 週末は友達と映画を見たり、公園を散歩したりします！"

CASES = (
    # text, lang, limits, normalize, positions
    ("Hello world, it's 3:45 pm and the price is $12.50.", "en", (120,), True, POSITIONS),
    ("He had a <minute|M IH1 . N AH0 T> to examine the <minute|m ay0 . n uw1 t> details.", "en", (120,), True, POSITIONS),
    ("他在银<行|XING2>里<行|hang2>走了半天，发现这笔业务办不<行|HANG2>。", "zh", (120,), True, POSITIONS),
    ("今天是2024年3月15日，气温25℃，我花了¥300。", "ZH", (120,), True, POSITIONS),
    ("我们用GPT-4来测试TTS系统，效果very good！", "zhen", (120,), True, POSITIONS),
    ("彼は料理が<上手|じょうず>だが、囲碁では<上手|ウワテ>に負けた。", "ja", (120,), True, POSITIONS),
    ("私は東京に住んでいます。 今日は 2024年です！ ＡＢＣ and Tokyo", "ja", (120,), True, POSITIONS),
    ("ひらがなだけのぶんです。カタカナもアリ", "ja", (120,), True, POSITIONS),
    ("<東京|tokyo>へ行きます。", "ja", (120,), True, POSITIONS),
    ("¿Dónde está la estación? Son las 3:45 y cuesta 12,50 €.", "es", (120,), True, POSITIONS),
    ("佢哋喺度食緊飯，好開心。ABC 123", "yue", (120,), True, POSITIONS),
    ("مرحبا بالعالم 123", "ar", (120,), True, POSITIONS),
    ("Some Text With Capitals 123.", "xx", (120,), True, POSITIONS),
    ("hello <|happy|> world <|en|> and <|0.50|> <|special_token_1|>HH AH0<|special_token_1|> done", "en", (120,), True, POSITIONS),
    ("We use TTS and C++ daily.", "en", (120,), True, POSITIONS),
    ("我们用C++写TTS。", "zh", (120,), True, POSITIONS),
    ("first line\nsecond line\tthird (quoted) [x] “y”", "en", (120,), True, POSITIONS),
    (LONG_EN, "en", (120, 24), True, POSITIONS),
    (LONG_ZH, "zh", (120, 20), True, POSITIONS),
    (LONG_RUN, "zh", (120, 16), True, POSITIONS),
    (LONG_JA, "ja", (120, 20), True, POSITIONS),
    (LONG_EN, "en", (120,), True, 42),  # the GPT's 40 text positions win over the limit
    ("One, two; three.", "en", (1,), True, POSITIONS),  # a budget of one token: every character alone
    ("Hello World 42, it's $5!", "en", (120,), False, POSITIONS),
    ("今天是2024年3月15日。", "zh", (120,), False, POSITIONS),
    ("", "en", (120,), True, POSITIONS),
    ("他在银<行|XING2 还没写完", "zh", (120,), True, POSITIONS),
)


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    path = write_vocabulary(folder)
    (folder / "glossary.yaml").write_text(GLOSSARY, encoding="utf-8")
    cases = [
        {"text": t, "lang": lang, "limits": list(limits), "normalize": n, "positions": p, "seed": SEED + i} for i, (t, lang, limits, n, p) in enumerate(CASES)
    ]
    (folder / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text(hashlib.sha256(path.read_bytes()).hexdigest() + "\n")
