"""Inputs of the `chinese_v1` golden: `CORPUS` (polyphones pypinyin reads by its own phrases, tone
sandhi of 一 / 不 / third tones, neutral tones, erhua left alone, numbers, Latin letters, punctuation)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

_spec = importlib.util.spec_from_file_location("gpt_sovits_front_end_check", Path(__file__).with_name("front_end_check.py"))
front_end_check = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(front_end_check)

CORPUS = [
    "你好，世界！",
    "银行行长说这个行业很有前途，他行不行？",
    "我们一起去看一看，听一听大家的意见。",
    "一个人，一天，一年，第一名，一一零，统一。",
    "不怕不去，不对，不好，看不懂，说不定。",
    "我很好，老虎，展览馆，小老虎，蒙古包，所有人，好喜欢，手表厂。",
    "他们的孩子们都在屋里，桌上放着一本书。",
    "小院儿里有个老头儿，女儿和花儿在玩儿，媳妇儿也来了。",
    "今天是2024年3月5日，会议在上午8:30-12:00举行。",
    "这件衣服打八折后是199.5元，比原价便宜了30%。",
    "室外温度-3℃，室内25.5°C。",
    "长时间的重复让他重新考虑了重量问题，朝阳朝着北京。",
    "得了吧，你得好好学习，这个觉睡得好。",
    "嗯，呣，好的……我知道了～",
    '他说："这是《红楼梦》里的故事【第一回】"。',
    "我用Python写了一个GPT模型，效果很好。",
    "還有這個問題，我們應該怎麼辦？",
    "会计和银行的人员都会来，请大家都准时。",
    "他只有一只猫，还会还钱吗？",
    "数一数有多少个数。",
    "这里的风景好美呀，我们去哪儿玩呢？",
    "价格在10~20元之间，大约3-5天到达。",
]


def write_inputs(folder: Path) -> None:
    front_end_check.write_corpus(folder, CORPUS)
