"""A tiny SentencePiece `bpe.model` for tests, written deterministically by koe.

Trained by SentencePiece (BPE, one thread, no sampling or shuffling) on sentences drawn from a
seeded generator, in the form upstream's tokenizer feeds its model (upper-case Latin words, CJK
characters one per word, tone-numbered pinyin like `XUAN4` and `JVE2`, the punctuation the
normaliser leaves). Special pieces as the releases use them: `<s>` = 0 and `</s>` = 1 (the GPT's
start and stop text tokens, never produced by encoding), `<unk>` = 2; NFKC normalisation, as the
releases' model (its `…` comes out as `▁...`). A few hundred pieces; the releases' has 12,000.
"""

from __future__ import annotations

import hashlib
import io
import random
from pathlib import Path

import sentencepiece as spm

__all__ = ["VOCAB_SIZE", "bpe_model_bytes", "write_bpe_model"]

VOCAB_SIZE = 512

_WORDS = (
    "THE A AN AND OR BUT IS ARE WAS BE TO OF IN ON AT FOR WITH FROM BY IT THIS THAT WHAT WHERE WHO HOW HERE THERE "
    "I YOU HE SHE WE THEY MY YOUR HELLO WORLD GOOD DAY NIGHT LOVE SEE TIME ONE TWO THREE FOUR FIVE SIX SEVEN EIGHT "
    "NINE TEN HUNDRED THOUSAND POINT DOLLARS CENTS PERCENT OCLOCK AM PM MODEL VOICE SPEECH TEXT GPT TTS AI NANO "
    "FISH COSY INDEX SAMSUNG PRO SSD DOT MONEY GOING BEST CHOICE GAME SMALL FAST FAMILY VERSION NEW PHONE PRICE"
).split()
_HANZI = (
    "的一是不了人我在有他这中大来上个国到说们为子和你地出道也时年得就那要下以生会自着去之过家学对可她里后小么心多天而能好都然没"
    "日于起还发成事只作当想看文无开手十用主行方又如前所本见经头面公同三已老从动两长知民样现分将外但身些与高意进把法此实回二理美点"
    "钱雪测试晕觉啊嗯哦呀吧吗呢喂哎哇银"
)
_INITIALS = ("", "B", "P", "M", "F", "D", "T", "N", "L", "G", "K", "H", "J", "Q", "X", "ZH", "CH", "SH", "R", "Z", "C", "S", "Y", "W")
_FINALS = ("A", "O", "E", "I", "U", "V", "AI", "EI", "AO", "OU", "AN", "EN", "ANG", "ENG", "ONG", "IA", "IE", "IAO", "IU", "IAN", "IN", "ING", "IANG", "IONG", "UA", "UO", "UAI", "UI", "UAN", "UN", "UANG", "VE", "VN", "ER")  # fmt: skip
_MARKS = (",", ".", "!", "?", "'", "-", "…", ",", ".", "?")


def _sentences(seed: int, count: int = 3000) -> list[str]:
    r = random.Random(seed)
    out = []
    for _ in range(count):
        words = []
        for _ in range(r.randint(3, 14)):
            kind = r.random()
            if kind < 0.4:
                words.append(r.choice(_HANZI))
            elif kind < 0.7:
                words.append(r.choice(_WORDS))
            elif kind < 0.8:
                words.append(r.choice(_INITIALS) + r.choice(_FINALS) + str(r.randint(1, 5)))
            elif kind < 0.9:
                words.append(r.choice(_MARKS))
            else:
                words.append(r.choice(_WORDS) + r.choice(("-", "'S", "")) + r.choice(_WORDS))
        words.append(r.choice((".", "!", "?", ",", "…")))
        out.append(" ".join(words))
    return out


def bpe_model_bytes(seed: int = 0) -> bytes:
    """The serialized model for `seed` (same bytes on every run of the same SentencePiece)."""
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(
        sentence_iterator=iter(_sentences(seed)),
        model_writer=model,
        model_type="bpe",
        vocab_size=VOCAB_SIZE,
        character_coverage=1.0,
        normalization_rule_name="nmt_nfkc",
        bos_id=0,
        eos_id=1,
        unk_id=2,
        pad_id=-1,
        num_threads=1,
        input_sentence_size=0,
        shuffle_input_sentence=False,
        max_sentence_length=4096,
        minloglevel=2,
    )
    return model.getvalue()


def write_bpe_model(path: str | Path, seed: int = 0) -> str:
    """Writes the tiny `bpe.model` for `seed` to `path`; returns the file's sha256."""
    data = bpe_model_bytes(seed)
    Path(path).write_bytes(data)
    return hashlib.sha256(data).hexdigest()
