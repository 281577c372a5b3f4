"""A random-weight stand-in for GPT-SoVITS's G2PW model folder (`GPT_SoVITS/text/G2PWModel`), for tests and the bench.

The release (the hub's `G2PWModel_1.1.zip`, 589 MB) cannot be fetched here. The stand-in has its layout and
file formats: `g2pW.onnx` (inputs `input_ids`, `token_type_ids`, `attention_mask`, `phoneme_mask`,
`char_ids`, `position_ids`, output `probs`, the batch and token axes dynamic, as g2pW's export script
declares them), `config.py` (the release's settings: masked labels, conditional weights with bias,
char-linear and char+pos-second terms, the joint part-of-speech head), `POLYPHONIC_CHARS.txt`,
`MONOPHONIC_CHARS.txt` (character TAB bopomofo with tone digit), `bopomofo_to_pinyin_wo_tune_dict.json`
and `char_bopomofo_dict.json` (which upstream loads but never reads for a result).

What differs from the release: the character tables list only the characters of koe's Chinese test corpus
in Traditional Chinese (their readings as pypinyin 0.55 lists them, written here as data so the fixture
does not move with pypinyin), and the network is koe's `G2PWNet` with a small BERT (width 128, 2 heads of
64, 2 layers; the release is bert-base-chinese, 768 wide, 12 layers) over the vocabulary of the BERT
fixture (`fixtures_bert`), its weights drawn from a seed, exported by torch's TorchScript ONNX exporter in
eval mode with constant folding (opset 14). The graph always applies the attention mask (the export traces
a padded batch), as transformers' BERT did when g2pW was exported.
"""

from __future__ import annotations

import json
import os
import warnings
from pathlib import Path

import torch

from koe.engines.gpt_sovits.bert import BertConfig
from koe.engines.gpt_sovits.g2pw import labels_of
from koe.engines.gpt_sovits.g2pw_model import G2PWNet

__all__ = ["CONFIG_PY", "MONOPHONIC", "POLYPHONIC", "random_g2pw", "write_g2pw_folder"]

# character, then its readings (bopomofo without tone marks, then the tone digit); entries split by " | "
POLYPHONIC = """
好 ㄏㄠ3 ㄏㄠ4 | 行 ㄒㄧㄥ2 ㄏㄤ2 ㄏㄥ2 ㄒㄧㄥ4 ㄏㄤ4 | 長 ㄓㄤ3 ㄔㄤ2 ㄓㄤ4 | 這 ㄓㄜ4 ㄧㄢ4 ㄓㄟ4 | 個 ㄍㄜ4 ㄍㄜ3 | 有 ㄧㄡ3 ㄧㄡ4 ㄨㄟ3 | 前 ㄑㄧㄢ2 ㄐㄧㄢ3 | 他 ㄊㄚ1 ㄊㄨㄛ2 | 不 ㄅㄨ4 ㄈㄡ3 ㄈㄡ1 ㄈㄨ1 ㄅㄨ2
們 ㄇㄣ5 ㄇㄣ4 ㄇㄣ2 | 一 ㄧ1 ㄧ2 ㄧ4 | 去 ㄑㄩ4 ㄑㄩ1 | 看 ㄎㄢ4 ㄎㄢ1 | 大 ㄉㄚ4 ㄉㄞ4 ㄊㄞ4 | 家 ㄐㄧㄚ1 ㄐㄧㄚ5 ㄐㄧㄚ4 ㄐㄧㄝ5 ㄍㄨ1 | 的 ㄉㄜ5 ㄉㄧ1 ㄉㄧ2 ㄉㄧ4 | 意 ㄧ4 ㄧ1 | 見 ㄐㄧㄢ4 ㄒㄧㄢ4
年 ㄋㄧㄢ2 ㄋㄧㄥ4 | 名 ㄇㄧㄥ2 ㄇㄧㄥ4 | 零 ㄌㄧㄥ2 ㄌㄧㄢ2 | 怕 ㄆㄚ4 ㄅㄛ2 | 虎 ㄏㄨ3 ㄏㄨ4 | 覽 ㄌㄢ3 ㄌㄢ4 | 蒙 ㄇㄥ2 ㄇㄥ1 ㄇㄥ3 | 古 ㄍㄨ3 ㄍㄨ4 ㄎㄨ1 | 包 ㄅㄠ1 ㄆㄠ2 ㄈㄨ2 | 喜 ㄒㄧ3 ㄒㄧ1 ㄔ4 | 子 ㄗ5 ㄗ3
都 ㄉㄡ1 ㄉㄨ1 | 上 ㄕㄤ4 ㄕㄤ3 | 放 ㄈㄤ4 ㄈㄤ3 ㄈㄤ1 | 著 ㄓㄨ4 ㄓㄨㄛ2 ㄔㄨ2 ㄓㄠ1 ㄓㄠ2 ㄓㄜ5 | 本 ㄅㄣ3 ㄅㄣ1 | 兒 ㄦ2 ㄋㄧ2 | 頭 ㄊㄡ2 ㄊㄡ5 | 女 ㄋㄩ3 ㄋㄩ4 ㄖㄨ3 | 和 ㄏㄜ2 ㄏㄜ4 ㄏㄨ2 ㄏㄨㄛ2 ㄏㄨㄛ4 ㄏㄨㄛ5
也 ㄧㄝ3 ㄧ2 | 來 ㄌㄞ2 ㄌㄞ4 | 了 ㄌㄜ5 ㄌㄧㄠ3 ㄌㄧㄠ4 | 是 ㄕ4 ㄊㄧ2 | 月 ㄩㄝ4 ㄖㄨ4 | 會 ㄏㄨㄟ4 ㄎㄨㄞ4 ㄎㄨㄛ4 | 件 ㄐㄧㄢ4 ㄇㄡ2 | 衣 ㄧ1 ㄧ4 | 服 ㄈㄨ2 ㄈㄨ4 ㄅㄧ4 ㄅㄛ2 | 打 ㄉㄚ3 ㄉㄚ2 | 八 ㄅㄚ1 ㄅㄚ2
折 ㄓㄜ2 ㄕㄜ2 ㄓㄜ1 ㄊㄧ2 | 比 ㄅㄧ3 ㄅㄧ4 ㄆㄧ2 ㄆㄧ3 | 價 ㄐㄧㄚ4 ㄑㄧㄚ3 ㄐㄧㄝ5 | 便 ㄅㄧㄢ4 ㄆㄧㄢ2 ㄅㄧㄢ1 | 請 ㄑㄧㄥ3 ㄑㄧㄥ4 ㄑㄧㄥ2 | 撥 ㄅㄛ1 ㄈㄚ2 | 或 ㄏㄨㄛ4 ㄩ4 | 可 ㄎㄜ3 ㄎㄜ4 ㄍㄜ1 | 以 ㄧ3 ㄙ4
度 ㄉㄨ4 ㄉㄨㄛ2 ㄓㄞ2 | 相 ㄒㄧㄤ1 ㄒㄧㄤ4 | 差 ㄔㄚ4 ㄔㄚ1 ㄔㄞ1 ㄘ1 ㄔㄞ4 ㄘㄨㄛ1 ㄐㄧㄝ1 | 跑 ㄆㄠ3 ㄆㄠ2 ㄅㄛ2 | 分 ㄈㄣ1 ㄈㄣ4 ㄈㄣ2 | 體 ㄊㄧ3 ㄊㄧ1 | 重 ㄓㄨㄥ4 ㄔㄨㄥ2 ㄊㄨㄥ2 | 身 ㄕㄣ1 ㄐㄩㄢ1 | 高 ㄍㄠ1 ㄍㄠ4
同 ㄊㄨㄥ2 ㄊㄨㄥ4 | 反 ㄈㄢ3 ㄈㄢ4 | 還 ㄏㄞ2 ㄏㄨㄢ2 ㄒㄩㄢ2 | 權 ㄑㄩㄢ2 ㄍㄨㄢ4 | 號 ㄏㄠ4 ㄏㄠ2 | 編 ㄅㄧㄢ1 ㄅㄧㄢ3 ㄅㄧㄢ4 | 間 ㄐㄧㄢ1 ㄐㄧㄢ4 ㄐㄧㄢ3 | 複 ㄈㄨ4 ㄈㄨ2 | 慮 ㄌㄩ4 ㄌㄩ2 | 量 ㄌㄧㄤ4 ㄌㄧㄤ2
題 ㄊㄧ2 ㄉㄧ4 | 朝 ㄔㄠ2 ㄓㄠ1 ㄓㄨ1 | 北 ㄅㄟ3 ㄅㄟ4 | 得 ㄉㄜ2 ㄉㄜ5 ㄉㄟ3 | 吧 ㄅㄚ5 ㄅㄚ1 ㄆㄚ1 | 學 ㄒㄩㄝ2 ㄏㄨㄚ2 ㄐㄧㄠ4 | 覺 ㄐㄩㄝ2 ㄐㄧㄠ4 | 嗯 ㄣ2 ㄋㄍ2 ㄋㄍ3 ㄋㄍ4 ㄣ3 ㄣ4 | 呣 ㄇㄨ2 ㄇㄨ4 ㄇㄡ2
知 ㄓ1 ㄓ4 | 道 ㄉㄠ4 ㄉㄠ3 | 紅 ㄏㄨㄥ2 ㄍㄨㄥ1 ㄐㄧㄤ4 | 樓 ㄌㄡ2 ㄌㄩ2 | 夢 ㄇㄥ4 ㄇㄥ2 | 事 ㄕ4 ㄗ4 | 寫 ㄒㄧㄝ3 ㄒㄧㄝ4 | 模 ㄇㄛ2 ㄇㄨ2 | 果 ㄍㄨㄛ3 ㄌㄨㄛ3 ㄍㄨㄢ4 | 應 ㄧㄥ1 ㄧㄥ4 | 臘 ㄌㄚ4 ㄌㄧㄝ4
母 ㄇㄨ3 ㄇㄨ2 ㄨ3 ㄨ2 | 約 ㄩㄝ1 ㄧㄠ1 ㄧㄠ4 ㄉㄧ4 | 於 ㄩ2 ㄩ1 ㄨ1 | 員 ㄩㄢ2 ㄩㄣ2 ㄩㄣ4 | 準 ㄓㄨㄣ3 ㄓㄨㄛ2 | 只 ㄓ3 ㄓ1 | 隻 ㄓ1 ㄏㄨㄛ4 | 貓 ㄇㄠ1 ㄇㄠ2 | 錢 ㄑㄧㄢ2 ㄐㄧㄢ3 | 嗎 ㄇㄚ5 ㄇㄚ4 ㄇㄚ2 ㄇㄚ3
慶 ㄑㄧㄥ4 ㄑㄧㄥ1 ㄑㄧㄤ1 | 要 ㄧㄠ4 ㄧㄠ1 ㄧㄠ3 | 數 ㄕㄨ4 ㄕㄨ3 ㄕㄨㄛ4 | 少 ㄕㄠ3 ㄕㄠ4 | 風 ㄈㄥ1 ㄈㄥ4 ㄈㄥ3 | 景 ㄐㄧㄥ3 ㄧㄥ3 | 呀 ㄧㄚ5 ㄧㄚ1 ㄒㄧㄚ1 | 哪 ㄋㄚ3 ㄋㄚ5 ㄋㄜ2 ㄋㄨㄛ2 ㄋㄞ3 ㄋㄚ4 ㄋㄧㄝ4 ㄋㄟ3
呢 ㄋㄜ5 ㄋㄧ2 ㄋㄧ3 ㄋㄧ1 | 格 ㄍㄜ2 ㄌㄨㄛ4 ㄏㄜ4 ㄍㄜ1 | 之 ㄓ1 ㄓㄨ1 ㄓ4 | 達 ㄉㄚ2 ㄊㄚ4 | 倒 ㄉㄠ4 ㄉㄠ3 | 難 ㄋㄢ2 ㄋㄢ4 ㄋㄨㄛ2 | 攢 ㄗㄢ3 ㄘㄨㄢ2 ㄗㄨㄢ1 ㄗㄢ4 | 似 ㄕ4 ㄙ4
"""
MONOPHONIC = """
你 ㄋㄧ3 | 世 ㄕ4 | 界 ㄐㄧㄝ4 | 銀 ㄧㄣ2 | 說 ㄕㄨㄛ1 | 業 ㄧㄝ4 | 很 ㄏㄣ3 | 途 ㄊㄨ2 | 我 ㄨㄛ3 | 起 ㄑㄧ3 | 聽 ㄊㄧㄥ1 | 人 ㄖㄣ2 | 天 ㄊㄧㄢ1 | 第 ㄉㄧ4 | 統 ㄊㄨㄥ3 | 對 ㄉㄨㄟ4 | 懂 ㄉㄨㄥ3 | 定 ㄉㄧㄥ4
老 ㄌㄠ3 | 展 ㄓㄢ3 | 館 ㄍㄨㄢ3 | 小 ㄒㄧㄠ3 | 所 ㄙㄨㄛ3 | 歡 ㄏㄨㄢ1 | 手 ㄕㄡ3 | 錶 ㄅㄧㄠ3 | 廠 ㄔㄤ3 | 孩 ㄏㄞ2 | 在 ㄗㄞ4 | 屋 ㄨ1 | 裡 ㄌㄧ3 | 桌 ㄓㄨㄛ1 | 書 ㄕㄨ1 | 院 ㄩㄢ4 | 花 ㄏㄨㄚ1 | 玩 ㄨㄢ2
媳 ㄒㄧ2 | 婦 ㄈㄨ4 | 今 ㄐㄧㄣ1 | 日 ㄖ4 | 議 ㄧ4 | 午 ㄨ3 | 舉 ㄐㄩ3 | 後 ㄏㄡ4 | 元 ㄩㄢ2 | 原 ㄩㄢ2 | 宜 ㄧ2 | 電 ㄉㄧㄢ4 | 話 ㄏㄨㄚ4 | 者 ㄓㄜ3 | 機 ㄐㄧ1 | 室 ㄕ4 | 外 ㄨㄞ4 | 溫 ㄨㄣ1 | 內 ㄋㄟ4
用 ㄩㄥ4 | 時 ㄕ2 | 鐘 ㄓㄨㄥ1 | 棄 ㄑㄧ4 | 計 ㄐㄧ4 | 算 ㄙㄨㄢ4 | 值 ㄓ2 | 版 ㄅㄢ3 | 讓 ㄖㄤ4 | 新 ㄒㄧㄣ1 | 考 ㄎㄠ3 | 問 ㄨㄣ4 | 陽 ㄧㄤ2 | 京 ㄐㄧㄥ1 | 習 ㄒㄧ2 | 睡 ㄕㄨㄟ4 | 故 ㄍㄨ4 | 回 ㄏㄨㄟ2
型 ㄒㄧㄥ2 | 效 ㄒㄧㄠ4 | 該 ㄍㄞ1 | 怎 ㄗㄣ3 | 麼 ㄇㄜ5 | 辦 ㄅㄢ4 | 希 ㄒㄧ1 | 字 ㄗ4 | 等 ㄉㄥ3 | 物 ㄨ4 | 視 ㄕ4 | 多 ㄉㄨㄛ1 | 美 ㄇㄟ3 | 每 ㄇㄟ3 | 早 ㄗㄠ3 | 床 ㄔㄨㄤ2 | 晚 ㄨㄢ3 | 到 ㄉㄠ4
"""
BOPOMOFO_TO_PINYIN = """
ㄅㄚ=ba ㄅㄛ=bo ㄅㄟ=bei ㄅㄠ=bao ㄅㄢ=ban ㄅㄣ=ben ㄅㄧ=bi ㄅㄧㄠ=biao ㄅㄧㄢ=bian ㄅㄨ=bu ㄆㄚ=pa ㄆㄠ=pao ㄆㄧ=pi ㄆㄧㄢ=pian ㄇㄚ=ma ㄇㄛ=mo ㄇㄜ=me ㄇㄟ=mei ㄇㄠ=mao ㄇㄡ=mou ㄇㄣ=men
ㄇㄥ=meng ㄇㄧㄥ=ming ㄇㄨ=m ㄈㄚ=fa ㄈㄡ=fou ㄈㄢ=fan ㄈㄣ=fen ㄈㄤ=fang ㄈㄥ=feng ㄈㄨ=fu ㄉㄚ=da ㄉㄜ=de ㄉㄞ=dai ㄉㄟ=dei ㄉㄠ=dao ㄉㄡ=dou ㄉㄥ=deng ㄉㄧ=di ㄉㄧㄢ=dian ㄉㄧㄥ=ding ㄉㄨ=du
ㄉㄨㄛ=duo ㄉㄨㄟ=dui ㄉㄨㄥ=dong ㄊㄚ=ta ㄊㄞ=tai ㄊㄡ=tou ㄊㄧ=ti ㄊㄧㄢ=tian ㄊㄧㄥ=ting ㄊㄨ=tu ㄊㄨㄛ=tuo ㄊㄨㄥ=tong ㄋㄍ=ng ㄋㄚ=na ㄋㄜ=ne ㄋㄞ=nai ㄋㄟ=nei ㄋㄢ=nan ㄋㄧ=ni ㄋㄧㄝ=nie
ㄋㄧㄢ=nian ㄋㄧㄥ=ning ㄋㄨㄛ=nuo ㄋㄩ=nv ㄌㄚ=la ㄌㄜ=le ㄌㄞ=lai ㄌㄠ=lao ㄌㄡ=lou ㄌㄢ=lan ㄌㄧ=li ㄌㄧㄝ=lie ㄌㄧㄠ=liao ㄌㄧㄢ=lian ㄌㄧㄤ=liang ㄌㄧㄥ=ling ㄌㄨㄛ=luo ㄌㄩ=lv ㄍㄜ=ge ㄍㄞ=gai
ㄍㄠ=gao ㄍㄨ=gu ㄍㄨㄛ=guo ㄍㄨㄢ=guan ㄍㄨㄥ=gong ㄎㄜ=ke ㄎㄠ=kao ㄎㄢ=kan ㄎㄨ=ku ㄎㄨㄛ=kuo ㄎㄨㄞ=kuai ㄏㄜ=he ㄏㄞ=hai ㄏㄠ=hao ㄏㄡ=hou ㄏㄣ=hen ㄏㄤ=hang ㄏㄥ=heng ㄏㄨ=hu ㄏㄨㄚ=hua
ㄏㄨㄛ=huo ㄏㄨㄟ=hui ㄏㄨㄢ=huan ㄏㄨㄥ=hong ㄐㄧ=ji ㄐㄧㄚ=jia ㄐㄧㄝ=jie ㄐㄧㄠ=jiao ㄐㄧㄢ=jian ㄐㄧㄣ=jin ㄐㄧㄤ=jiang ㄐㄧㄥ=jing ㄐㄩ=ju ㄐㄩㄝ=jue ㄐㄩㄢ=juan ㄑㄧ=qi ㄑㄧㄚ=qia ㄑㄧㄢ=qian
ㄑㄧㄤ=qiang ㄑㄧㄥ=qing ㄑㄩ=qu ㄑㄩㄢ=quan ㄒㄧ=xi ㄒㄧㄚ=xia ㄒㄧㄝ=xie ㄒㄧㄠ=xiao ㄒㄧㄢ=xian ㄒㄧㄣ=xin ㄒㄧㄤ=xiang ㄒㄧㄥ=xing ㄒㄩㄝ=xue ㄒㄩㄢ=xuan ㄓ=zhi ㄓㄜ=zhe ㄓㄞ=zhai ㄓㄟ=zhei
ㄓㄠ=zhao ㄓㄢ=zhan ㄓㄤ=zhang ㄓㄨ=zhu ㄓㄨㄛ=zhuo ㄓㄨㄣ=zhun ㄓㄨㄥ=zhong ㄔ=chi ㄔㄚ=cha ㄔㄞ=chai ㄔㄠ=chao ㄔㄤ=chang ㄔㄨ=chu ㄔㄨㄤ=chuang ㄔㄨㄥ=chong ㄕ=shi ㄕㄜ=she ㄕㄠ=shao
ㄕㄡ=shou ㄕㄣ=shen ㄕㄤ=shang ㄕㄨ=shu ㄕㄨㄛ=shuo ㄕㄨㄟ=shui ㄖ=ri ㄖㄣ=ren ㄖㄤ=rang ㄖㄨ=ru ㄗ=zi ㄗㄞ=zai ㄗㄠ=zao ㄗㄢ=zan ㄗㄣ=zen ㄗㄨㄢ=zuan ㄘ=ci ㄘㄨㄛ=cuo ㄘㄨㄢ=cuan ㄙ=si
ㄙㄨㄛ=suo ㄙㄨㄢ=suan ㄣ=n ㄦ=er ㄧ=yi ㄧㄚ=ya ㄧㄝ=ye ㄧㄠ=yao ㄧㄡ=you ㄧㄢ=yan ㄧㄣ=yin ㄧㄤ=yang ㄧㄥ=ying ㄨ=wu ㄨㄛ=wo ㄨㄞ=wai ㄨㄟ=wei ㄨㄢ=wan ㄨㄣ=wen ㄩ=yu ㄩㄝ=yue ㄩㄢ=yuan
ㄩㄣ=yun ㄩㄥ=yong
"""

CONFIG_PY = """manual_seed = 1313
model_source = 'bert-base-chinese'
window_size = 32
num_workers = 2
use_mask = True
use_char_phoneme = False
use_conditional = True
param_conditional = {
    'affect_location': 'softmax',
    'bias': True,
    'char-linear': True,
    'pos-linear': False,
    'char+pos-second': True,
    'char+pos-second_lowrank': False,
    'lowrank_size': 0,
    'char+pos-second_fm': False,
    'fm_size': 0,
    'fix_mode': None,
    'count_json': 'train.count.json'
}

# for training
batch_size = 256
lr = 5e-5
val_interval = 200
num_iter = 10000
use_focal = False
param_focal = {'alpha': 0.0, 'gamma': 0.7}
use_pos = True
param_pos = {'weight': 0.1, 'pos_joint_training': True, 'train_pos_path': 'train.pos', 'valid_pos_path': 'dev.pos', 'test_pos_path': 'test.pos'}
"""


def _table(text: str) -> list[tuple[str, list[str]]]:
    entries = [e.split() for line in text.strip().splitlines() for e in line.split(" | ")]
    return [(e[0], e[1:]) for e in entries]


def polyphonic_pairs() -> list[tuple[str, str]]:
    """POLYPHONIC_CHARS.txt's (character, reading) lines."""
    return [(char, reading) for char, readings in _table(POLYPHONIC) for reading in readings]


def random_g2pw(seed: int = 0, vocab_size: int | None = None) -> G2PWNet:
    """The stand-in network with weights drawn from `seed` (each tensor in `state_dict` order)."""
    from koe.engines.gpt_sovits.fixtures_bert import vocabulary

    labels, readings = labels_of(polyphonic_pairs())
    config = BertConfig(
        vocab_size=vocab_size or len(vocabulary()),
        hidden_size=128,
        num_hidden_layers=2,
        num_attention_heads=2,
        intermediate_size=256,
        max_position_embeddings=512,
    )
    net = G2PWNet(config, len(labels), len(readings))
    g = torch.Generator().manual_seed(seed)
    state = {}
    for name, value in net.state_dict().items():
        noise = torch.randn(value.shape, generator=g)
        if name.endswith("LayerNorm.weight"):
            state[name] = 1.0 + 0.1 * noise
        elif name.endswith(".bias"):
            state[name] = 0.05 * noise
        else:
            state[name] = 0.3 * noise if name.startswith(("classifier", "pos_classifier", "descriptor", "char_descriptor", "second_order")) else 0.08 * noise
    net.load_state_dict(state)
    return net.eval()


def write_g2pw_folder(folder: str | os.PathLike, seed: int = 0) -> Path:
    """The stand-in `G2PWModel` folder at `folder`; returns it."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.py").write_text(CONFIG_PY, encoding="utf-8")
    (folder / "POLYPHONIC_CHARS.txt").write_text("".join(f"{c}\t{r}\n" for c, r in polyphonic_pairs()), encoding="utf-8")
    (folder / "MONOPHONIC_CHARS.txt").write_text("".join(f"{c}\t{r[0]}\n" for c, r in _table(MONOPHONIC)), encoding="utf-8")
    pairs = dict(p.split("=") for p in BOPOMOFO_TO_PINYIN.split())
    (folder / "bopomofo_to_pinyin_wo_tune_dict.json").write_text(json.dumps(pairs, ensure_ascii=False), encoding="utf-8")
    chars = {c: r for c, r in _table(POLYPHONIC) + _table(MONOPHONIC)}
    (folder / "char_bopomofo_dict.json").write_text(json.dumps(chars, ensure_ascii=False), encoding="utf-8")
    net = random_g2pw(seed)
    _export(net, folder / "g2pW.onnx")
    return folder


def _export(net: G2PWNet, path: Path) -> None:
    try:
        import onnx  # noqa: F401  (torch's TorchScript exporter needs it)
    except ImportError as e:
        raise RuntimeError("writing the G2PW fixture needs the `onnx` package (koe's dev extra: pip install -e '.[dev]')") from e
    labels = net.classifier.out_features
    # a padded batch of two texts, so the traced graph applies the attention mask
    example = (
        torch.tensor([[101, 200, 201, 102], [101, 202, 102, 0]]),
        torch.zeros(2, 4, dtype=torch.int64),
        torch.tensor([[1, 1, 1, 1], [1, 1, 1, 0]]),
        torch.ones(2, labels),
        torch.tensor([0, 1]),
        torch.tensor([1, 2]),
    )
    names = ["input_ids", "token_type_ids", "attention_mask", "phoneme_mask", "char_ids", "position_ids"]
    axes = {"input_ids": [0, 1], "token_type_ids": [0, 1], "attention_mask": [0, 1], "phoneme_mask": [0], "char_ids": [0], "position_ids": [0], "probs": [0]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the exporter's deprecation notice and tracer warnings
        torch.onnx.export(
            net,
            example,
            str(path),
            dynamo=False,
            export_params=True,
            do_constant_folding=True,
            opset_version=14,
            input_names=names,
            output_names=["probs"],
            dynamic_axes=axes,
        )
