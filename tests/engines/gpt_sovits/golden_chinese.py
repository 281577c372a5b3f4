"""Inputs of the `chinese` golden (koe's side): GPT-SoVITS v2's Chinese front end (normalise, G2PW, g2p)
on a corpus of tricky sentences, with the stand-in G2PW model folder.

- `G2PWModel/`: `fixtures_g2pw.write_g2pw_folder(seed=SEED)` (its network's state hash is recorded);
- `bert/`: the tokenizer G2PW reads (`bert_path`): the BERT fixture's `tokenizer.json` and `config.json`
  (no weights: G2PW takes only the tokenizer from that folder);
- `corpus.json`: `CORPUS`.
"""

from __future__ import annotations

import json
from pathlib import Path

from koe.engines.gpt_sovits.bert_tokenizer import wordpiece_tokenizer
from koe.engines.gpt_sovits.fixtures_bert import bert_config, vocabulary
from koe.engines.gpt_sovits.fixtures_g2pw import random_g2pw, write_g2pw_folder
from koe.runtime.weights import state_sha256

SEED = 3

CORPUS = [
    "你好，世界！",
    "银行行长说这个行业很有前途，他行不行？",  # polyphones: 行 长
    "我们一起去看一看，听一听大家的意见。",  # 一 between reduplicated verbs
    "一个人，一天，一年，第一名，一一零，统一。",  # 一 sandhi, ordinal, digits
    "不怕不去，不对，不好，看不懂，说不定。",  # 不 sandhi
    "我很好，老虎，展览馆，小老虎，蒙古包，所有人，好喜欢，手表厂。",  # third tones
    "他们的孩子们都在屋里，桌上放着一本书。",  # neutral tones: 们 子 里 上 着
    "小院儿里有个老头儿，女儿和花儿在玩儿，媳妇儿也来了。",  # erhua, must / never
    "今天是2024年3月5日，会议在2023-12-31上午8:30-12:00举行。",  # dates, a time range
    "这件衣服打八折后是199.5元，比原价便宜了30%。",  # money, percent
    "请拨打电话010-12345678或者手机13812345678，也可以打400-123-4567。",  # phone numbers
    "室外温度-3℃，室内25.5°C，相差28.5度。",  # temperatures
    "他跑了3.5km，用时25分钟，体重70kg，身高180cm。",  # units
    "1/3的人同意，2/5的人反对，还有-10个人弃权。",  # fractions, negative numbers
    "计算3+5=8，10-4=6，2×3=6，8÷2=4，x²+y³的值。",  # arithmetic, powers
    "版本号是1.2.3，编号是00078，第3名。",  # a version, a code
    "长时间的重复让他重新考虑了重量问题，朝阳朝着北京。",  # polyphones: 长 重 朝
    "得了吧，你得好好学习，这个觉睡得好。",  # 得 觉
    "嗯，呣，好的……我知道了～",  # 嗯 呣, ellipsis, tilde
    '他说："这是《红楼梦》里的故事【第一回】"。',  # quotes and brackets dropped
    "我用Python写了一个GPT模型，效果很好。",  # Latin letters dropped
    "還有這個問題，我們應該怎麼辦？",  # traditional characters
    "α和β是希腊字母，π约等于3.14159。",  # Greek letters
    "会计和银行的人员都会来，请大家都准时。",  # 会 都
    "他只有一只猫，还会还钱吗？",  # 只 还
    "重庆的重要人物都很重视这件事。",  # 重
    "数一数有多少个数。",  # 数
    "这里的风景好美呀，我们去哪儿玩呢？",
    "每天早上7:05起床，晚上10:30睡觉。",  # times
    "价格在10~20元之间，大约3-5天到达。",  # ranges
    "长长的队伍里有好多人都在等着看那个长得很高的行长和他的银行同事们一起来这里开会讨论重要的事情还有很多问题",  # past G2PW's 16-character context
]


def write_inputs(folder: Path) -> None:
    write_g2pw_folder(folder / "G2PWModel", seed=SEED)
    bert = folder / "bert"
    bert.mkdir(parents=True, exist_ok=True)
    (bert / "config.json").write_text(json.dumps(bert_config(1, 64), indent=2, ensure_ascii=False) + "\n")
    wordpiece_tokenizer({t: i for i, t in enumerate(vocabulary())}).save(str(bert / "tokenizer.json"))
    (folder / "corpus.json").write_text(json.dumps(CORPUS, ensure_ascii=False), encoding="utf-8")
    (folder / "state_sha256.txt").write_text(state_sha256(random_g2pw(SEED).state_dict()) + "\n")
