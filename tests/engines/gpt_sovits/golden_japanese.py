"""Inputs of the `japanese` golden: `CORPUS` (numbers, mixed scripts, full- and half-width forms,
punctuation runs, long vowels, questions) and `open_jtalk_dic`, a link to the OpenJTalk dictionary
koe's pyopenjtalk wheel ships, which upstream's pyopenjtalk reads in the oracle."""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

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


def write_corpus(folder: Path, corpus: list[str], dictionary: Path | None = None) -> None:
    """`corpus.json`, and `state_sha256.txt` with its hash (`corpus`) and the dictionary file's (`dictionary`)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "corpus.json").write_text(json.dumps(corpus, ensure_ascii=False), encoding="utf-8")
    lines = [f"corpus {hashlib.sha256((folder / 'corpus.json').read_bytes()).hexdigest()}"]
    if dictionary is not None:
        lines.append(f"dictionary {hashlib.sha256(dictionary.read_bytes()).hexdigest()}")
    (folder / "state_sha256.txt").write_text("\n".join(lines) + "\n")


def write_inputs(folder: Path) -> None:
    import pyopenjtalk

    dictionary = Path(pyopenjtalk.OPEN_JTALK_DICT_DIR.decode())
    write_corpus(folder, CORPUS, dictionary / "sys.dic")
    os.symlink(dictionary, folder / "open_jtalk_dic")
