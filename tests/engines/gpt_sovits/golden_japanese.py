"""Inputs of the `japanese` golden: `CORPUS` (numbers, mixed scripts, full- and half-width forms,
punctuation runs, long vowels, questions) and `open_jtalk_dic`, a link to the OpenJTalk dictionary
koe's pyopenjtalk wheel ships, which upstream's pyopenjtalk reads in the oracle."""

from __future__ import annotations

import importlib.util
import os
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_front_end_check", Path(__file__).with_name("front_end_check.py"))
front_end_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(front_end_check)

CORPUS = [
    "こんにちは。",
    "今日はいい天気ですね！",
    "明日は雨が降るでしょうか？",
    "東京タワーに行きましょう！",
    "Hello.こんにちは！今日もNiCe天気ですね！tokyotowerに行きましょう！",
    "２０２４年３月５日、午後３時１５分に会いましょう。",
    "2024年3月5日の会議は10時30分からです。",
    "この商品は1,980円で、税込みだと2,178円です。",
    "円周率は3.14159です。",
    "成功率は９０％、失敗率は10%でした。",
    "コーヒーとケーキをください。",
    "ちょっと待って…本当に？",
    "えーっと、あのー、すみません！！",
    "「吾輩は猫である」と彼は言った。",
    "ｶﾀｶﾅとＡＢＣとabcが混ざっています。",
    "日々、人々、時々、色々。",
    "きゃりーぱみゅぱみゅがっこうにいった。",
    "新幹線でおよそ２時間半かかります——遠いですね～",
    "GPT-SoVITSは音声合成のモデルです。",
    "これは、ペンですか？いいえ、鉛筆です。",
    "私の名前は田中です。よろしくお願いします。",
    "一つ、二つ、三つ…たくさん!?",
    "ああああああ。",
    "ﾊﾝｶｸ ｶﾀｶﾅ ﾃﾞｽ",
    "行く 来る 見る\n食べる",
    "AI、IoT、DXの時代です。",
    "「ええ」『はい』（そうです）【重要】",
    "…",
    "１２３４５６７８９０",
    "すもももももももものうち",
]


def write_inputs(folder: Path) -> None:
    import pyopenjtalk

    dictionary = Path(pyopenjtalk.OPEN_JTALK_DICT_DIR.decode())
    front_end_check.write_corpus(folder, CORPUS, dictionary / "sys.dic")
    os.symlink(dictionary, folder / "open_jtalk_dic")
