"""A random-weight `chinese-roberta-wwm-ext-large` folder in the released layout, for tests and the bench.

The release (`lj1995/GPT-SoVITS/chinese-roberta-wwm-ext-large`) is a transformers 4.30 save of a
`BertForMaskedLM` in float16: `config.json`, `pytorch_model.bin` (a plain state dict: `bert.*`,
the `bert.embeddings.position_ids` buffer, the masked-LM head `cls.predictions.*` with the decoder
tied to the word embeddings) and `tokenizer.json` (WordPiece, lower case, Chinese characters split,
`[PAD]` 0, `[UNK]` 100, `[CLS]` 101, `[SEP]` 102, `[MASK]` 103). The fixture writes the same files
with the release's config keys, hidden width 1024 (upstream hard-codes it), 16 heads, and small
depth, feed-forward and vocabulary: the ids 0-103 as the release has them (`[unused1]`...), then
punctuation, digits, Latin letters, a few English word pieces and common Chinese characters.
`tokenizer="vocab"` writes `vocab.txt` instead of `tokenizer.json` (an older layout).
"""

from __future__ import annotations

import json
from pathlib import Path

import torch

from koe.engines.gpt_sovits.bert_tokenizer import wordpiece_tokenizer

__all__ = ["CHINESE_CHARACTERS", "bert_config", "random_bert_state", "vocabulary", "write_random_bert"]

#: Common Chinese characters (and the corpus of the feature tests) in the fixture's vocabulary.
CHINESE_CHARACTERS = (
    "的一是不了人我在有他这为之大来以个中上们到说国和地也子时道出而要于就下得可你年生自会那后能对着事其里所去行过家十用发天如然作方成者多日都三小军二无同么经法当起与好看学进种将还分此心前面又定见只主没公从"
    "已把它把被让给向问题现实意思想明白知听读写话语言文字音声乐唱歌曲电影视频网络手机脑码程序编据库数系统工智能模型训练测试开关门窗车路走跑飞机场站北京上海广州深圳香港台湾重庆长江黄河山水火土木金银"
    "春夏秋冬风雨雪云雷早晚今昨明后星期月号点钟分秒快慢高低远近新旧男女老少父母哥姐弟妹朋友同志先师学校班级课本书包笔纸桌椅吃喝饭菜茶酒肉鱼鸡蛋米面包水果苹香蕉红黄蓝绿白黑色美丽漂亮干净热冷暖凉"
    "买卖钱块元角价贵便宜商店超市医院药病疼健康体育运动足篮球比赛输赢谢您请再对错真假正反左右东西南北内外间边旁头发眼睛耳朵鼻嘴手脚身心情感爱恨喜欢怒哀伤笑哭梦睡醒起床洗澡穿衣服鞋帽"
    "行长重还乐觉都得地着了为什么样怎哪谁几多少啊吧呢吗嗯哦哈呀喂一二三四五六七八九十百千万亿零两个些次回遍种类型号码"
)
PUNCTUATION = "，。！？、；：“”‘’（）《》…—·,.!?;:'\"()-[]"
ENGLISH = ("the", "a", "an", "and", "of", "to", "is", "hello", "world", "python", "gpt", "so", "##vits", "##s", "##ing", "##ed", "##er", "##ly", "##n", "##t")


def vocabulary() -> list[str]:
    """The fixture's tokens in id order (no repeats)."""
    tokens = ["[PAD]", *(f"[unused{i}]" for i in range(1, 100)), "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
    tokens += list(dict.fromkeys(PUNCTUATION + "0123456789abcdefghijklmnopqrstuvwxyz"))
    tokens += [f"##{c}" for c in "0123456789abcdefghijklmnopqrstuvwxyz"]
    tokens += list(ENGLISH)
    tokens += list(dict.fromkeys(CHINESE_CHARACTERS))
    return list(dict.fromkeys(tokens))


def bert_config(layers: int = 3, intermediate: int = 512) -> dict:
    """The release's config.json with a small depth, feed-forward and vocabulary."""
    return {
        "_name_or_path": "chinese-roberta-wwm-ext-large",
        "architectures": ["BertForMaskedLM"],
        "attention_probs_dropout_prob": 0.1,
        "bos_token_id": 0,
        "classifier_dropout": None,
        "directionality": "bidi",
        "eos_token_id": 2,
        "hidden_act": "gelu",
        "hidden_dropout_prob": 0.1,
        "hidden_size": 1024,
        "initializer_range": 0.02,
        "intermediate_size": intermediate,
        "layer_norm_eps": 1e-12,
        "max_position_embeddings": 512,
        "model_type": "bert",
        "num_attention_heads": 16,
        "num_hidden_layers": layers,
        "output_past": True,
        "pad_token_id": 0,
        "pooler_fc_size": 768,
        "pooler_num_attention_heads": 12,
        "pooler_num_fc_layers": 3,
        "pooler_size_per_head": 128,
        "pooler_type": "first_token_transform",
        "position_embedding_type": "absolute",
        "torch_dtype": "float16",
        "transformers_version": "4.30.2",
        "type_vocab_size": 2,
        "use_cache": True,
        "vocab_size": len(vocabulary()),
    }


def random_bert_state(seed: int, layers: int = 3, intermediate: int = 512) -> dict[str, torch.Tensor]:
    """The release's `pytorch_model.bin` state dict (float16), seeded: weights ~ N(0, 0.02) as
    BERT is initialised, layer norms near 1 / 0, biases small."""
    c = bert_config(layers, intermediate)
    g = torch.Generator().manual_seed(seed)
    width, vocab = c["hidden_size"], c["vocab_size"]

    def normal(*shape: int, std: float = 0.02) -> torch.Tensor:
        return (torch.randn(shape, generator=g) * std).to(torch.float16)

    def norm(prefix: str) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": (1 + normal(width, std=0.1).float()).half(), f"{prefix}.bias": normal(width)}

    def linear(prefix: str, c_in: int, c_out: int) -> dict[str, torch.Tensor]:
        return {f"{prefix}.weight": normal(c_out, c_in), f"{prefix}.bias": normal(c_out)}

    words = normal(vocab, width)
    state = {
        "bert.embeddings.position_ids": torch.arange(c["max_position_embeddings"])[None],
        "bert.embeddings.word_embeddings.weight": words,
        "bert.embeddings.position_embeddings.weight": normal(c["max_position_embeddings"], width),
        "bert.embeddings.token_type_embeddings.weight": normal(c["type_vocab_size"], width),
        **norm("bert.embeddings.LayerNorm"),
    }
    for i in range(layers):
        p = f"bert.encoder.layer.{i}"
        for name in ("query", "key", "value"):
            state.update(linear(f"{p}.attention.self.{name}", width, width))
        state.update(linear(f"{p}.attention.output.dense", width, width))
        state.update(norm(f"{p}.attention.output.LayerNorm"))
        state.update(linear(f"{p}.intermediate.dense", width, intermediate))
        state.update(linear(f"{p}.output.dense", intermediate, width))
        state.update(norm(f"{p}.output.LayerNorm"))
    state["cls.predictions.bias"] = normal(vocab)
    state.update(linear("cls.predictions.transform.dense", width, width))
    state.update(norm("cls.predictions.transform.LayerNorm"))
    state["cls.predictions.decoder.weight"] = words
    state["cls.predictions.decoder.bias"] = state["cls.predictions.bias"]
    return state


def write_random_bert(folder: str | Path, seed: int = 0, *, layers: int = 3, intermediate: int = 512, tokenizer: str = "json") -> Path:
    """Write the random folder (`tokenizer`: "json" for `tokenizer.json` as released, "vocab" for
    `vocab.txt`); returns `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps(bert_config(layers, intermediate), indent=2, ensure_ascii=False) + "\n")
    torch.save(random_bert_state(seed, layers, intermediate), folder / "pytorch_model.bin")
    tokens = vocabulary()
    if tokenizer == "json":
        wordpiece_tokenizer({t: i for i, t in enumerate(tokens)}).save(str(folder / "tokenizer.json"))
    elif tokenizer == "vocab":
        (folder / "vocab.txt").write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    else:
        raise ValueError(f"tokenizer must be 'json' or 'vocab', got {tokenizer!r}")
    return folder
