"""koe's F5-TTS text front end against upstream f5-tts 1.1.22 (exact tokens, batches, ints), and its edge cases.

One oracle launch (tests/oracle_f5/text_front.py) answers every case of the module: upstream's
convert_char_to_pinyin, chunk_text, get_tokenizer/list_str_to_idx, preprocess_ref_audio_text's
ending rule, and infer_process / infer_batch_process run with a stand-in model that records the
reference length, the token lists and the duration each batch is given.
"""

from __future__ import annotations

import subprocess
import sys

import pytest
from oracle_harness import run_oracle

from koe.engines.f5_tts import text as ft

TEXTS = [
    # English
    "Hello, world! This is F5-TTS.",
    "I'm ok: \"yes\" and 'no'; maybe... (really) [x] {y} <z> a-b_c @#$%^&*+=|\\/~`",
    "Numbers 0 7 42 3.14 -273.15 1,000,000 and e-mail me@example.com",
    # Chinese: polyphones and tone sandhi
    "你好，世界。",
    "一个人去银行，行不行？",
    "我们一起去长城吧！重要的事情说三遍。",
    "一下子，一样，一天，不对，不是，不好，老虎，展览馆，很好，你好好的",
    "还有，还是，长大，长度，音乐，快乐，重庆，重新，了解，好了，朝阳，朝代",
    # mixed Chinese / English / digits
    "我用iPhone 15 Pro拍了3张照片，T恤很好看。",
    "2024年1月22日，价格是3.14元。卡拉OK和Python编程",
    "AI时代的GPT-4o，OK吗？Yes我OK",
    # punctuation, full-width and curly
    "他说：“你好”；她说‘再见’！真的？……——",
    "Quotes “curly” and ‘single’; semi;colon: done",
    "全角；：，。！？（）【】「」《》、",
    "x;y；z",
    # accented Latin, other alphabets
    "Café naïve Ünïcödé résumé — Crème brûlée",
    "Ça va? Zürich, São Paulo. Straße ß",
    "Привет, мир! Ελληνικά",
    # non-Chinese non-ASCII
    "こんにちは世界、カタカナ",
    "안녕하세요, 만나서 반갑습니다.",
    "Emoji 😀👍🏽 你好👨‍👩‍👧 ❤️",
    "ㄅㄆㄇ 㐀 〇一二 𠀀 ｈｅｌｌｏ ＡＢＣ１２３",
    "你好\u3000世界",
    # whitespace runs
    "a  b\t\tc\n\nd\r\ne",
    "  leading and trailing  ",
    "你好  世界\n再见\r\n",
    "   ",
    "",
    # endings
    "ends with ascii a",
    "以中文结尾",
    "以中文结尾.",
    "ends with 中文",
]

LONG_EN = (
    "The quick brown fox jumps over the lazy dog. It was a bright cold day in April, and the clocks "
    "were striking thirteen! Call me Ishmael; some years ago: never mind how long precisely? Having "
    "little or no money in my purse, and nothing particular to interest me on shore,  I thought I "
    "would sail about a little.\nIt is a truth universally acknowledged...  Really?No space here."
)
LONG_ZH = (
    "对，这就是我，万人敬仰的太乙真人。虽然有点婴儿肥，但也掩不住我逼人的帅气！你相信吗？今天天气很好；我们去公园散步吧：好的。 后面有个空格，还有一个句子"
)
LONG_MIX = "我用iPhone拍照, 然后发给friends. Then I said: 你好！OK? 好的。Café au lait, s'il vous plaît. 一二三四五六七八九十。End"
CHUNK_TEXTS = [
    LONG_EN,
    LONG_ZH,
    LONG_MIX,
    "no punctuation at all just words and more words",
    "a.b.c,d;e:f!g?h",
    "Hi.   There!\n\nNew para.\tTab, end. ",
    "你好。 世界。",
    "。。。",
    "！？",
    "Hello,world",
    "End with ascii, then 中文。",
    "   ",
    "",
    "one",
    "é.",
    "x.\u3000y. z",
]
BUDGETS = [-5, 0, 1, 5, 10, 20, 50, 135, 1000]

REF_ENDINGS = ["Hello", "Hello.", "Hello. ", "你好。", "你好", "Hi!", "Hi.  ", "end with space ", "你好."]

REF_EN = "Some call me nature, others call me mother nature. "
REF_ZH = "对，这就是我，万人敬仰的太乙真人。"
PROCESSES = [
    {"samples": 24000 * 3 + 123, "sr": 24000, "ref_text": REF_EN, "gen_text": LONG_EN, "speed": 1.0},
    {"samples": 24000 * 4 + 57, "sr": 24000, "ref_text": REF_ZH, "gen_text": LONG_ZH, "speed": 0.8},
    {"samples": 16000 * 5 + 11, "sr": 16000, "ref_text": REF_EN, "gen_text": LONG_MIX, "speed": 1.3},
    {"samples": 44100 * 2 + 7, "sr": 44100, "ref_text": "Hello", "gen_text": LONG_MIX + LONG_EN, "speed": 1.0},
    {"samples": 24000 * 6, "sr": 24000, "ref_text": REF_ZH, "gen_text": "Hi.", "speed": 1.0},
    {"samples": 24000 * 6 + 255, "sr": 24000, "ref_text": REF_EN, "gen_text": "Hello there, friend.", "speed": 1.0, "fix_duration": 5.3},
    {"samples": 24000 * 3 + 1, "sr": 24000, "ref_text": REF_EN, "gen_text": LONG_EN, "speed": 1.0, "fix_duration": 30.0},
    {"samples": 24000 * 3 + 1, "sr": 24000, "ref_text": REF_EN, "gen_text": LONG_EN, "speed": 0.7, "fix_duration": 23.7, "cross_fade": 0.0},
    {"samples": 16000 * 4 + 3, "sr": 16000, "ref_text": REF_ZH, "gen_text": LONG_ZH, "speed": 1.0, "fix_duration": 17.1, "cross_fade": 0.3},
    # budgets that land on an integer, where the order of upstream's float operations shows
    {"samples": 67320, "sr": 24000, "ref_text": REF_EN, "gen_text": LONG_EN, "speed": 1.0},
    {"samples": 103950, "sr": 44100, "ref_text": REF_ZH, "gen_text": LONG_MIX, "speed": 1.0},
    # over 22 s: negative budget, every sentence its own batch
    {"samples": 24000 * 23, "sr": 24000, "ref_text": REF_EN, "gen_text": LONG_ZH, "speed": 1.0},
]


def sized(n: int) -> str:
    """An ASCII sentence of n bytes."""
    return ("word " * n)[: n - 1] + "."


BATCH_PROCESSES = [
    {"samples": 24000 * 5 + 100, "ref_text": REF_EN, "batches": ["Hi.", "好的。", "This is a longer batch of text."], "speed": 1.5},
    {"samples": 24000 * 5 + 100, "ref_text": "你好。", "batches": ["Hi.", "好的。", "This is a longer batch."], "speed": 0.9, "fix_duration": 12.0},
    {"samples": 24000 * 2, "ref_text": "Hello", "batches": ["ok"], "speed": 2.0, "fix_duration": 4.0},
    {"samples": 24000 * 2 + 17, "ref_text": "Hello", "batches": ["123456789", "1234567890", "一二三"], "speed": 1.1},
    # durations that move with the order of upstream's float operations
    {"samples": 54305, "ref_text": REF_EN, "batches": [sized(117)], "speed": 1.0},
    {"samples": 49455, "ref_text": "Hello", "batches": [sized(30), sized(54)], "speed": 1.0},
    # shares whose frames move with the order of upstream's float operations
    {"samples": 119412, "ref_text": REF_EN, "batches": [sized(56), sized(42)], "speed": 1.0, "fix_duration": 14.49},
    {"samples": 177051, "ref_text": REF_EN, "batches": [sized(56), sized(60), sized(38)], "speed": 1.0, "fix_duration": 33.5},
]

VOCAB_LINES = [" \n", "!\n", ",\n", "a\n", "b\n", "ni3\n", "hao3\n", "shi4\n", "\n", "hao3\n", "zai4\r\n", "你\n", "jie4"]
VOCAB_CRLF = " \r\n,\r\nni2\r\nhao3\rshi4\r\nde\r\n"


@pytest.fixture(scope="module")
def vocab_files(tmp_path_factory):
    folder = tmp_path_factory.mktemp("f5-vocab")
    small = folder / "vocab.txt"
    small.write_bytes("".join(VOCAB_LINES).encode("utf-8"))
    crlf = folder / "vocab-crlf.txt"
    crlf.write_bytes(VOCAB_CRLF.encode("utf-8"))
    return [small, crlf]


def lookup_tokens() -> list[list[str]]:
    extra = [["ni3", "hao3", "zzz", "jie", "jie4", "", "zai4", "zai4\r", "你", " ", "de", "ni2", "shi4"]]
    return extra + [ft.to_tokens(t) for t in TEXTS]


@pytest.fixture(scope="module")
def oracle(tmp_path_factory, vocab_files):
    _, info = run_oracle(
        "text_front",
        {
            "texts": TEXTS,
            "chunks": [[t, b] for t in CHUNK_TEXTS for b in BUDGETS],
            "ref_endings": REF_ENDINGS,
            "vocabs": [{"path": str(p), "tokens": lookup_tokens()} for p in vocab_files],
            "processes": PROCESSES,
            "batch_processes": BATCH_PROCESSES,
        },
        tmp_path_factory.mktemp("f5-text-oracle"),
        family="f5_tts",
        timeout=300,
    )
    return info


# --- against upstream ---------------------------------------------------------------------------


def test_tokens_match_upstream(oracle):
    assert len(oracle["tokens"]) == len(TEXTS)
    for text, expected in zip(TEXTS, oracle["tokens"]):
        assert ft.to_tokens(text) == expected, repr(text)


def test_chunks_match_upstream(oracle):
    cases = [(t, b) for t in CHUNK_TEXTS for b in BUDGETS]
    assert len(oracle["chunks"]) == len(cases)
    for (text, budget), expected in zip(cases, oracle["chunks"]):
        assert ft.split_batches(text, budget) == expected, (text, budget)
    # the cases do cut: several batches for the long texts at 50 bytes
    assert len(oracle["chunks"][cases.index((LONG_EN, 50))]) > 3


def test_ref_ending_matches_upstream(oracle):
    assert [ft.end_ref_text(t) for t in REF_ENDINGS] == oracle["ref_endings"]


def test_vocab_matches_upstream(oracle, vocab_files):
    tokens = lookup_tokens()
    for path, expected in zip(vocab_files, oracle["vocabs"]):
        vocab = ft.Vocab.load(path)
        assert vocab.token_ids == expected["map"]
        assert vocab.size == expected["size"]
        assert [vocab.ids(t) for t in tokens] == expected["ids"]
    small = ft.Vocab.load(vocab_files[0])
    # the documented oddities, as upstream has them
    assert "jie" in small and "jie4" not in small  # last line without newline loses its last char
    assert small.ids(["hao3"]) == [9] and small.size == len(VOCAB_LINES) - 1  # duplicate: later id
    assert "" in small and "zai4" in small  # blank line; CRLF read as one newline
    assert small.ids(["zzz", " "]) == [0, 0]


def check_calls(calls, ref_text, batches, ref_samples, speed, fix_duration, cross_fade, packaged):
    assert len(calls) == len(batches)
    shares = ft.share_fix_duration(fix_duration, batches, ref_samples, cross_fade)
    frames = ft.reference_frames(ref_samples)
    for batch, share, call in zip(batches, shares, calls):
        assert call["cond_samples"] == ref_samples
        assert call["type"] == "int"
        assert ft.batch_frames(frames, ref_text, batch, speed, share) == call["duration"], batch
        tokens = ft.to_tokens(ft.batch_text(ref_text, batch))
        assert tokens == call["tokens"]
        assert packaged.ids(tokens) == call["ids"]


def test_process_matches_upstream(oracle):
    packaged = ft.Vocab.load(oracle["packaged_vocab"])
    assert packaged.size == 2545
    assert len(oracle["processes"]) == len(PROCESSES)
    several = 0
    for case, got in zip(PROCESSES, oracle["processes"]):
        budget = ft.max_batch_bytes(case["ref_text"], case["samples"] / case["sr"], case["speed"])
        assert budget == got["max_chars"], case
        batches = ft.split_batches(case["gen_text"], budget)
        assert batches == got["batches"]
        ref_samples = got["calls"][0]["cond_samples"]  # after upstream's resampling to 24 kHz
        if case["sr"] == 24000:
            assert ref_samples == case["samples"]
        check_calls(got["calls"], case["ref_text"], batches, ref_samples, case["speed"], case.get("fix_duration"), case.get("cross_fade", 0.15), packaged)
        several += len(batches) > 1
    assert several >= 5
    assert oracle["processes"][-1]["max_chars"] < 0


def test_batch_process_matches_upstream(oracle):
    packaged = ft.Vocab.load(oracle["packaged_vocab"])
    for case, got in zip(BATCH_PROCESSES, oracle["batch_processes"], strict=True):
        check_calls(
            got["calls"], case["ref_text"], case["batches"], case["samples"], case["speed"], case.get("fix_duration"), case.get("cross_fade", 0.15), packaged
        )


# --- koe only -----------------------------------------------------------------------------------


def test_empty_and_blank_inputs():
    assert ft.to_tokens("") == []
    assert ft.split_batches("", 100) == []
    assert ft.split_batches("   ", 100) == [""]  # as upstream: one empty batch
    assert ft.Vocab.from_lines([]).size == 0
    assert ft.Vocab.from_lines([]).ids(["a"]) == [0]
    assert ft.Vocab.from_lines([]).ids([]) == []
    with pytest.raises(ValueError):
        ft.ref_text_for_batches("")
    with pytest.raises(ValueError):
        ft.batch_text("", "hello")


def test_ref_text_space_rule():
    assert ft.ref_text_for_batches("Hi. ") == "Hi.  "
    assert ft.ref_text_for_batches("你好。") == "你好。"
    assert ft.ref_text_for_batches("café") == "café"  # é is two bytes: no space
    assert ft.batch_text("Hi.", "你好") == "Hi. 你好"


def test_vocab_lines_lose_their_last_char():
    vocab = ft.Vocab.from_lines([" \n", "ab\n", "cd"])
    assert vocab.token_ids == {" ": 0, "ab": 1, "c": 2}
    assert vocab.ids(["ab", "cd", "c"]) == [1, 0, 2]


def test_durations_by_hand():
    # 10 bytes is not short; 9 is (speed 0.3)
    assert ft.batch_frames(100, "abcd", "0123456789", 1.0, None) == 100 + int(100 / 5 * 10 / 1.0)
    assert ft.batch_frames(100, "abcd", "012345678", 1.0, None) == 100 + int(100 / 5 * 9 / 0.3)
    # fixed durations ignore speed and the reference
    assert ft.batch_frames(100, "abcd", "x", 2.0, 3.0) == int(3.0 * 24000 / 256)
    assert ft.share_fix_duration(None, ["a", "b"], 24000) == [None, None]
    assert ft.share_fix_duration(9.0, ["a"], 24000) == [9.0]
    assert ft.share_fix_duration(9.0, [], 24000) == []
    # 4 s of whole frames; 6 s shared 2:4, plus 0.5 s per junction
    assert ft.share_fix_duration(10.0, ["ab", "abcd"], 256 * 375, cross_fade_s=0.0) == [6.0, 8.0]
    assert ft.share_fix_duration(10.0, ["ab", "abcd"], 256 * 375 + 255, cross_fade_s=0.5) == pytest.approx([6.0 + 1 / 6, 8.0 + 1 / 3])
    assert ft.reference_frames(24000 * 2 + 255) == 188 and ft.reference_frames(255) == 0


def test_module_needs_no_torch():
    code = "import sys; import koe.engines.f5_tts.text as t; t.to_tokens('你好'); assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True, timeout=60)
