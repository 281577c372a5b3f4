"""Inputs of the `cantonese` golden: `CORPUS` (colloquial characters, syllables without an onset and
syllabic nasals, numbers, dates, percent, quotes and brackets, tildes and dashes, Latin letters,
Traditional and Simplified characters, punctuation runs)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_front_end_check", Path(__file__).with_name("front_end_check.py"))
front_end_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(front_end_check)

CORPUS = [
    "佢個鋤頭太短啦。",
    "你好，我係香港人！",
    "唔該晒，你食咗飯未呀？",
    "我哋今晚去邊度食嘢？",
    "佢冇錢買嘢，好慘啊。",
    "五月五號我哋去咗澳門三次。",
    "呢件衫打八折之後係199.5蚊，平咗30%。",
    "2024年3月5日上午8:30開會。",
    "請打電話010-12345678。",
    "佢話：「我唔鍾意食魚」，你信唔信？",
    "《紅樓夢》同【三國演義】都係好書。",
    "我用Python寫咗個程式，好正！",
    "嗯，呣，好嘅……我知道喇～",
    "牙齒、危險、銀行、我、五、吳、恩、安、屋、愛、歐、晏。",
    "嘩！真係估唔到！！",
    "还有这个问题，我们应该怎么办？",
    "今日天氣好好，出去行下啦~",
    "一二三四五六七八九十。",
    "溫度係-3℃到25.5°C。",
    "佢跑咗3.5km，用咗25分鐘。",
    "點解你咁遲先嚟？",
    "我哋一齊去睇戲—好唔好？",
    "鴨、雞、鵝、牛、豬、魚。",
    "揾工真係好難。",
    "啲人成日講粗口。",
]


def write_inputs(folder: Path) -> None:
    front_end_check.write_corpus(folder, CORPUS)
