"""Inputs of the `text` golden (koe's side): the tiny `bpe.model`, a glossary and a corpus of texts.

Chinese, English and mixed text; numbers, dates, money, units; tone-numbered pinyin; names; e-mail
addresses; pronunciation annotations; punctuation, emoji, blanks, single characters; long
paragraphs cut with several segment limits (and release 2's quick first segment). The oracle
normalises each text as release 1.5 does (no glossary) and as release 2 does (with `glossary.yaml`),
tokenizes it, takes the ids and cuts the segments; `state_sha256.txt` holds the bpe.model's sha256.
"""

from __future__ import annotations

import json
from pathlib import Path

from koe_indextts.fixtures_text import write_bpe_model

SEGMENT_LIMITS = (120, 40, 16, 6)  # max_text_tokens_per_segment values every text is cut with
QUICK = ((40, 12), (16, 30))  # (limit, quick_streaming_tokens): release 2's streamed first segment

GLOSSARY_YAML = """\
M.2:
  en: M dot two
  zh: M 二
PCIe:
  en: P C I E
  zh: P C I E
C++:
  en: C plus plus
  zh: C 加加
TTS: T T S
Inc.:
  en: Ink
"""

TEXTS = (
    "大家好，我现在正在bilibili 体验 ai 科技，说实话，来之前我绝对想不到！AI技术已经发展到这样匪夷所思的地步了！",
    "IndexTTS 正式发布1.0版本了，效果666",
    "Hello world! This is a test of the text front end.",
    "晕XUAN4是一种GAN3觉",
    "ni3 hao3, shi4 jie4",
    "他在银<行|XING2>里<行|HANG2>走了半天，发现这笔业务办不<行|HANG2>。",
    "He had a <minute|M IH1 . N AH0 T> to examine the details of the contract.",
    "约瑟夫·高登-莱维特（Joseph Gordon-Levitt is an American actor）",
    "克里斯托弗·诺兰执导了《盗梦空间》，2010年7月16日在美国上映。",
    "请发邮件到test@example.com，谢谢",
    "test@example.com",
    "现在是北京时间2025年01月11日 20:00，温度-5℃到38.5℃",
    "这是1024元的手机，打8折只要￥819.2，你要吗？",
    "This sales for 2.5% off, only $12.5. Call (555) 123-4567 before Jan. 5th, 2026.",
    "GPT-5-Nano is the smallest and fastest variant in the GPT-5 model family.",
    "GPT-5-Nano 是 GPT-5 模型家族中最小且速度最快的变体",
    "where's the money? how's it going? it's fine, that's all.",
    "今天是个好日子 it's a good day",
    "嗯，啊，哦，一点儿也不怕，那儿有个小孩儿在玩儿。",
    "臺灣的經濟發展很快，ＡＢＣ１２３",
    "这酒...里...有毒……真的吗？！",
    "只有,,,才是最好的",
    "用beta1测试, have you ever been to beta2?",
    "受不liao3你了，最zhong4要的是：不要chong2蹈覆辙，jue2对。",
    "lv4 se4 de nv3 hai2 zi5",
    "Dr. Smith went to St. Louis on Jan. 5th, 2020. He paid $3.50 per lb.",
    "Here are some highly-rated M.2 NVMe SSDs: Samsung 9100 PRO PCIe 5.0 SSD M.2, $139.99",
    "C++ and TTS tools by Acme Inc. cost 1,299 dollars.",
    "今天天气真好😀！Let's go 🎉",
    "😀🎉",
    "。。。！！！",
    "?!",
    "……",
    "",
    "   ",
    "\t\n",
    "  你好  ",
    "a",
    "好",
    " 好 ",
    "Hello.\n\nWorld.\tTabs here.",
    "\tleading tab text",
    "电话：135-4567-8900，1/3的人，第1名，100%，3.14159",
    "2025/09/08 IndexTTS-2 全球发布",
    "こんにちは世界，안녕하세요",
    "他说：“你好。”然后走了。'好的.' 她说. “再见！”",
    "影片讲述了一位造梦师带领特工团队进入他人梦境，从他人的潜意识中盗取机密，并重塑他人梦境的故事。"
    "该片于2010年7月16日在美国上映，2010年9月1日在中国内地上映，2020年8月28日在中国内地重映；"
    "影片剧情游走于梦境与现实之间，被定义为“发生在意识结构内的当代动作科幻片”。导演说：这是我最喜欢的作品！",
    "The quick brown fox jumps over the lazy dog, and then it runs away into the forest. "
    "Nobody knows where it went; some say it crossed the river at 5:30 a.m., others say it never left. "
    "Either way, the story was told again and again, for 25 years, until it became a legend! Isn't that strange?",
    "state-of-the-art text-to-speech well-known long-term real-time open-source high-quality low-latency "
    "multi-speaker zero-shot cross-lingual end-to-end non-autoregressive fine-grained",
    "AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA",
)


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    sha = write_bpe_model(folder / "bpe.model", seed=0)
    (folder / "glossary.yaml").write_text(GLOSSARY_YAML, encoding="utf-8")
    spec = {"texts": list(TEXTS), "limits": list(SEGMENT_LIMITS), "quick": [list(q) for q in QUICK]}
    (folder / "texts.json").write_text(json.dumps(spec, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "state_sha256.txt").write_text(sha + "\n")
