"""Inputs of the `prompt` golden (koe's side): the released tokenizer files (fixtures_tokenizer), the
cases upstream's `generate_long` builds its conversation for (`cases.json`: a text, `chunk_length`,
references; `<case>/reference_<i>.npy` their codes, `<case>/answer_<i>.npy` the made-up codes of
each batch that its iterative prompt feeds back), the strings whose token ids are recorded
(`strings.json`), random texts to cut into batches (`batching.json`), and the tokenizer files' hash (`state_sha256.txt`, as `tokenizer HASH`).

No weights: the oracle runs `generate_long` itself on a stand-in model (the tokenizer and the
config's `num_codebooks`, `max_seq_len`) with `generate` replaced by one that records each prompt and
answers with the batch's made-up codes.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import numpy as np
from koe_fish_speech.fixtures_tokenizer import write_tokenizer

from koe.runtime.weights import files_sha256

NUM_CODEBOOKS = 10
CODEBOOK_SIZE = 1024  # the residual codebooks' (rows 1..); row 0 is a semantic code < 4096
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
#: Frames of the made-up answer to each batch (more than any case's batches); the model may end a
#: batch at once, so the second answer has none.
ANSWER_FRAMES = (3, 0, 5, 2, 4, 1, 3, 0, 2, 4, 5, 1)

#: name -> text, chunk_length, references as (transcript, frames).
CASES = {
    "plain": {"text": "Hello world, this is a test of Fish Speech.", "chunk_length": 200, "references": []},
    "one_ref": {
        "text": "Now say something new, in the same voice.",
        "chunk_length": 200,
        "references": [["This is the reference transcript.", 9]],
    },
    "two_refs": {
        "text": "<|speaker:0|>Good morning!\n<|speaker:1|>Good morning to you too.",
        "chunk_length": 200,
        "references": [["Hello there, I am the first voice.", 7], ["<|speaker:1|>And I am the second one.", 5]],
    },
    "dialogue": {
        "text": "  <|speaker:0|> Hi there.  \n\n<|speaker:1|>Hello!<|speaker:0|>How are you?\t\n",
        "chunk_length": 300,
        "references": [],
    },
    "long": {
        "text": (
            "<|speaker:0|>The first turn is short. "
            "<|speaker:1|>The second one is a little longer, with a comma, and more words to say. "
            "<|speaker:0|>第三句是中文，每个字占三个字节。"
            "<|speaker:1|>Four. "
            "<|speaker:0|>Five, with an emoji 😀 in it. "
            "<|speaker:1|>Six: a turn that is longer than a whole batch may be on its own, so it has to make a batch alone, as upstream does. "
            "<|speaker:0|>Seven. <|speaker:1|>Eight. <|speaker:0|>Nine. <|speaker:1|>Ten. <|speaker:0|>Eleven. <|speaker:1|>Twelve."
        ),
        "chunk_length": 100,
        "references": [["Eine Referenz auf Deutsch, mit Umlauten: äöü.", 6]],
    },
    "each_turn": {"text": "<|speaker:0|>One.<|speaker:1|>Two.<|speaker:2|>Three.", "chunk_length": 0, "references": []},
    "cjk_emoji": {"text": "你好，世界！😀 今日は良い天気ですね。👍🏽 한국어도 됩니다.", "chunk_length": 200, "references": []},
    "untagged_long": {
        "text": "A text without speaker tags is one batch, however long it is. " * 4,
        "chunk_length": 100,
        "references": [["Ref one.", 4], ["Ref two, <|speaker:3|> tagged inside.", 3]],
    },
}

TRICKY = [
    "", " ", "\n", "\n\n", "  \n \t", "Hello, world!", "Hello  world ", " leading space", "HelloWorld CamelCase don't I'LL",
    "你说的对, 但是原神是一款由米哈游自主研发的开放世界手游.", "日本語のテキスト、カタカナ。", "한국어 텍스트", "emoji 😀👍🏽 👨\u200d👩\u200d👧 🇯🇵",
    "<|speaker:0|>Hi there.<|speaker:1|>Hello!", "<|speaker:12|> tag", "<|semantic:5|>", "a<|semantic:4095|>b", "<|semantic:4096|>",
    "<|im_end|>", "x<|im_start|>system\n", "<|voice|><|text|>", "<think>hmm</think>", "<|endoftext|>", "<|pad|><|audio_pad|>",
    "e\u0301 café cafe\u0301 Å Å ﬁ", "ｆｕｌｌｗｉｄｔｈ １２３", "1234567890 3.14159", "tab\tsep", "\r\nwindows\r\n", "\u200bzero width\u200d",
    "mixed 中文 English ไทย العربية", "<|speaker:0|>", "<|Speaker:0|>", "<| speaker:0 |>", "<|im_end|", "|>", "<<|im_end|>>",
    "convert the provided text to speech", "\n\nSpeech:\n", "<|im_start|>assistant\n<|voice|>", "Ω ≈ ç √ ∫", "\x00\x01 control",
    "\ud7ff\ue000\U0010ffff", "<|speaker:٣|> Arabic-Indic digit", "the <tool_call> and <|fim_pad|> tokens",
]  # fmt: skip
FUZZ_PIECES = ["<|speaker:0|>", "<|im_end|>", "<|semantic:7|>", "\n", " ", "  ", "a", "Z", "é", "e\u0301", "中", "😀", "🏽", "'s", "'S", "123", ".", "!?", "\t", "<|", "|>", "<think>", "ー", "ß", "İ"]  # fmt: skip


def fuzz_strings(n: int = 200, seed: int = 0) -> list[str]:
    """Random strings of the pieces above and code points from U+0020 to U+2FFFF (no surrogates)."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        chars = []
        for _ in range(rng.randint(1, 12)):
            if rng.random() < 0.7:
                chars.append(rng.choice(FUZZ_PIECES))
            else:
                c = rng.randint(0x20, 0x2FFFF)
                chars.append(chr(c if not 0xD800 <= c <= 0xDFFF else 0xFFFD))
        out.append("".join(chars))
    return out


BATCHING_PIECES = ["<|speaker:0|>", "<|speaker:1|>", "<|speaker:12|>", " ", "\n", "\t", "Hello", "world.", "你好", "😀", "é", "<|speaker:x|>", "<|", "ab" * 30]  # fmt: skip
CHUNK_LENGTHS = (0, 20, 50, 100, 300)


def batching_texts(n: int = 80, seed: int = 1) -> list[tuple[str, int]]:
    """Random texts (tags, words, whitespace, multi-byte characters) and chunk lengths, whose
    batches upstream's split and grouping give (without koe's refusals)."""
    rng = random.Random(seed)
    return [("".join(rng.choice(BATCHING_PIECES) for _ in range(rng.randint(0, 25))), rng.choice(CHUNK_LENGTHS)) for _ in range(n)]


def strings() -> list[str]:
    return TRICKY + fuzz_strings()


def reference_codes(case: str) -> list[np.ndarray]:
    """Each reference's codes (NUM_CODEBOOKS, frames), int64."""
    rng = np.random.default_rng(1000 + sorted(CASES).index(case))
    return [_codes(rng, frames) for _, frames in CASES[case]["references"]]


def answer_codes(case: str) -> list[np.ndarray]:
    """The made-up codes generated for each batch (a batch may get none: frames 0), int64."""
    rng = np.random.default_rng(2000 + sorted(CASES).index(case))
    return [_codes(rng, frames) for frames in ANSWER_FRAMES]


def _codes(rng: np.random.Generator, frames: int) -> np.ndarray:
    semantic = rng.integers(0, 4096, (1, frames))
    residual = rng.integers(0, CODEBOOK_SIZE, (NUM_CODEBOOKS - 1, frames))
    return np.concatenate([semantic, residual]).astype(np.int64)


def tokenizer_sha256(folder: Path) -> str:
    return files_sha256(Path(folder) / name for name in TOKENIZER_FILES)


def write_inputs(folder: Path) -> None:
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    write_tokenizer(folder)
    for case in CASES:
        (folder / case).mkdir(exist_ok=True)
        for i, codes in enumerate(reference_codes(case)):
            np.save(folder / case / f"reference_{i}.npy", codes)
        for i, codes in enumerate(answer_codes(case)):
            np.save(folder / case / f"answer_{i}.npy", codes)
    (folder / "cases.json").write_text(json.dumps(CASES, ensure_ascii=False, indent=1), encoding="utf-8")
    (folder / "strings.json").write_text(json.dumps(strings()), encoding="utf-8")
    (folder / "batching.json").write_text(json.dumps(batching_texts()), encoding="utf-8")
    (folder / "num_codebooks.txt").write_text(str(NUM_CODEBOOKS))
    (folder / "state_sha256.txt").write_text(f"tokenizer {tokenizer_sha256(folder)}\n")
