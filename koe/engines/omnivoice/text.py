"""OmniVoice's text front end: clean-up, the prompt's token ids, the rule-based length estimate.

- Clean-up (what upstream does to `ref_text + " " + text` before tokenizing): line breaks removed,
  full-width parentheses made ASCII, runs of spaces and tabs made one space, whitespace next to a
  CJK ideograph (U+4E00-U+9FFF) removed.
- Non-verbal tags (`[laughter]`, `[sigh]`, `[question-en]`, ...) are tokenized on their own, so
  their ids never depend on the text around them; the text between them is tokenized piecewise.
- The prompt: `[<|denoise|>]<|lang_start|>LANG<|lang_end|><|instruct_start|>INSTRUCT<|instruct_end|>`
  (`None` for an absent language or instruction; the denoise marker only with a reference) as one
  string, then `<|text_start|>TEXT<|text_end|>` through the tag-aware path.
- Length: each character weighs by its script (Latin 1, CJK 3, Hangul 2.5, digits 3.5, spaces
  0.2, punctuation and symbols 0.5, marks 0, ...); the target's weight over the reference's
  speaking rate (frames per unit of weight; "Nice to meet you." = 25 frames without a reference),
  lifted below 50 frames to 50 (d / 50)^(1/3), divided by `speed`, truncated.

The tokenizer is the folder's `tokenizer.json` read by the `tokenizers` library: Qwen's byte-level
BPE (NFC, its split regex, byte-level mapping) with the added tokens matched first.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from functools import lru_cache
from pathlib import Path

from tokenizers import Tokenizer

__all__ = [
    "NONVERBAL_TAGS",
    "TextTokenizer",
    "combine_text",
    "estimate_frames",
    "prompt_style",
    "text_weight",
]

NONVERBAL_TAGS = (
    "laughter",
    "sigh",
    "confirmation-en",
    "question-en",
    "question-ah",
    "question-oh",
    "question-ei",
    "question-yi",
    "surprise-ah",
    "surprise-oh",
    "surprise-wa",
    "surprise-yo",
    "dissatisfaction-hnn",
)
_TAG_RE = re.compile(r"\[(?:" + "|".join(re.escape(t) for t in NONVERBAL_TAGS) + r")\]")
_CJK = r"[\u4e00-\u9fff]"
_AROUND_CJK_RE = re.compile(rf"(?<={_CJK})\s+|\s+(?={_CJK})")

DEFAULT_REF_TEXT = "Nice to meet you."  # stands in for a reference: this many frames of it
DEFAULT_REF_FRAMES = 25


def combine_text(text: str, ref_text: str | None = None) -> str:
    """`ref_text text` cleaned as upstream cleans it (see the module docstring)."""
    full = f"{ref_text.strip()} {text.strip()}" if ref_text else text.strip()
    full = re.sub(r"[\r\n]+", "", full)
    full = full.replace("\uff08", "(").replace("\uff09", ")")
    full = re.sub(r"[ \t]+", " ", full)
    return _AROUND_CJK_RE.sub("", full)


def prompt_style(language: str | None, instruct: str | None, denoise: bool) -> str:
    """The style part of the prompt, as one string of markers."""
    head = "<|denoise|>" if denoise else ""
    return f"{head}<|lang_start|>{language or 'None'}<|lang_end|><|instruct_start|>{instruct or 'None'}<|instruct_end|>"


class TextTokenizer:
    """The folder's Qwen tokenizer (`tokenizer.json`)."""

    def __init__(self, path: Path) -> None:
        self.tokenizer = Tokenizer.from_file(str(path))

    @classmethod
    def from_folder(cls, folder: Path) -> TextTokenizer:
        return cls(Path(folder) / "tokenizer.json")

    def ids(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def tagged_ids(self, text: str) -> list[int]:
        """Ids of `text` with each non-verbal tag tokenized alone, and the text between tags piecewise."""
        ids: list[int] = []
        last = 0
        for match in _TAG_RE.finditer(text):
            if match.start() > last:
                ids += self.ids(text[last : match.start()])
            ids += self.ids(match.group())
            last = match.end()
        if last < len(text):
            ids += self.ids(text[last:])
        return ids if ids else self.ids(text)

    def prompt_ids(self, text: str, ref_text: str | None, language: str | None, instruct: str | None, denoise: bool) -> tuple[list[int], list[int]]:
        """(style ids, text ids) of one item's prompt."""
        style = self.ids(prompt_style(language, instruct, denoise))
        return style, self.tagged_ids(f"<|text_start|>{combine_text(text, ref_text)}<|text_end|>")


# --------------------------------------------------------------------------- length

_WEIGHTS = {
    "cjk": 3.0,
    "hangul": 2.5,
    "kana": 2.2,
    "ethiopic": 3.0,
    "yi": 3.0,
    "indic": 1.8,
    "thai_lao": 1.5,
    "khmer_myanmar": 1.8,
    "arabic": 1.5,
    "hebrew": 1.5,
    "latin": 1.0,
    "cyrillic": 1.0,
    "greek": 1.0,
    "armenian": 1.0,
    "georgian": 1.0,
    "default": 1.0,
}
_PUNCTUATION, _SPACE, _DIGIT, _MARK = 0.5, 0.2, 3.5, 0.0

# The script of each code-point block, as (last code point of the block, script), in order.
_BLOCKS = (
    (0x02AF, "latin"),
    (0x03FF, "greek"),
    (0x052F, "cyrillic"),
    (0x058F, "armenian"),
    (0x05FF, "hebrew"),
    (0x08FF, "arabic"),
    (0x0DFF, "indic"),
    (0x0EFF, "thai_lao"),
    (0x0FFF, "indic"),
    (0x109F, "khmer_myanmar"),
    (0x10FF, "georgian"),
    (0x11FF, "hangul"),
    (0x139F, "ethiopic"),
    (0x177F, "default"),
    (0x17FF, "khmer_myanmar"),
    (0x18FF, "default"),
    (0x19DF, "indic"),
    (0x19FF, "khmer_myanmar"),
    (0x1C7F, "indic"),
    (0x1C8F, "cyrillic"),
    (0x1CBF, "georgian"),
    (0x1CFF, "indic"),
    (0x1DBF, "latin"),
    (0x1DFF, "default"),
    (0x1EFF, "latin"),
    (0x30FF, "kana"),
    (0x312F, "cjk"),
    (0x318F, "hangul"),
    (0x9FFF, "cjk"),
    (0xA4CF, "yi"),
    (0xA63F, "default"),
    (0xA69F, "cyrillic"),
    (0xA6FF, "default"),
    (0xA7FF, "latin"),
    (0xA82F, "indic"),
    (0xA87F, "default"),
    (0xA95F, "indic"),
    (0xA97F, "hangul"),
    (0xA9DF, "indic"),
    (0xA9FF, "khmer_myanmar"),
    (0xAA5F, "indic"),
    (0xAA7F, "khmer_myanmar"),
    (0xAAFF, "indic"),
    (0xAB2F, "ethiopic"),
    (0xAB6F, "latin"),
    (0xABBF, "default"),
    (0xABFF, "indic"),
    (0xD7AF, "hangul"),
    (0xFAFF, "cjk"),
    (0xFDFF, "arabic"),
    (0xFE6F, "default"),
    (0xFEFF, "arabic"),
    (0xFFEF, "latin"),
)
_BLOCK_ENDS = [end for end, _ in _BLOCKS]


@lru_cache(maxsize=4096)
def char_weight(char: str) -> float:
    """The weight of one character (see the module docstring)."""
    code = ord(char)
    if 65 <= code <= 90 or 97 <= code <= 122:
        return _WEIGHTS["latin"]
    if code == 32:
        return _SPACE
    if code == 0x0640:  # Arabic tatweel: a stretch, not a sound
        return _MARK
    category = unicodedata.category(char)
    if category[0] == "M":
        return _MARK
    if category[0] in "PS":
        return _PUNCTUATION
    if category[0] == "Z":
        return _SPACE
    if category[0] == "N":
        return _DIGIT
    i = bisect.bisect_left(_BLOCK_ENDS, code)
    if i < len(_BLOCKS):
        return _WEIGHTS[_BLOCKS[i][1]]
    return _WEIGHTS["cjk"] if code > 0x20000 else _WEIGHTS["default"]


def text_weight(text: str) -> float:
    """The sum of the characters' weights, added left to right."""
    return sum(char_weight(c) for c in text)


def estimate_frames(text: str, ref_text: str | None = None, ref_frames: int | None = None, speed: float = 1.0, low: float = 50.0, boost: float = 3.0) -> int:
    """Frames of speech for `text`, at the rate of a reference (`ref_text` spoken in `ref_frames`)."""
    if ref_frames is None or not ref_text:
        ref_text, ref_frames = DEFAULT_REF_TEXT, DEFAULT_REF_FRAMES
    estimate = 0.0
    ref_weight = text_weight(ref_text)
    if ref_frames > 0 and ref_weight != 0:
        estimate = text_weight(text) / (ref_weight / ref_frames)
        if estimate < low:
            estimate = low * (estimate / low) ** (1.0 / boost)
    if speed > 0 and speed != 1.0:
        estimate = estimate / speed
    return max(1, int(estimate))


# --------------------------------------------------------------------------- long texts

_SPLIT_AT = frozenset(".,;:!?。，；：！？")
_CLOSING = frozenset("\"'“”‘’）]》>」】")
_ABBREVIATIONS = frozenset(
    "Mr. Mrs. Ms. Dr. Prof. Sr. Jr. Rev. Fr. Hon. Pres. Gov. Capt. Gen. Sen. Rep. Col. Maj. Lt. Cmdr. Sgt. Cpl. "
    "Co. Corp. Inc. Ltd. Est. Dept. St. Ave. Blvd. Rd. Mt. Ft. No. Jan. Feb. Mar. Apr. Aug. Sep. Sept. Oct. Nov. "
    "Dec. i.e. e.g. vs. Vs. Etc. approx. fig. def.".split()
)


def chunk_text(text: str, chunk_len: int, min_chunk_len: int | None = 3) -> list[str]:
    """`text` in chunks of about `chunk_len` characters, cut after punctuation, as upstream cuts it.

    Sentences end at `.,;:!?` (and their full-width forms), except a "." ending a known
    abbreviation ("Mr.", "e.g.", ...); punctuation or a closing mark right after a cut joins the
    sentence before. Sentences are packed into chunks while they fit `chunk_len`; a chunk shorter
    than `min_chunk_len` joins the one before it (the first joins the second). Chunks are stripped,
    empty ones dropped."""
    sentences: list[list[str]] = []
    current: list[str] = []
    for ch in text:
        if not current and sentences and (ch in _SPLIT_AT or ch in _CLOSING):
            sentences[-1].append(ch)
            continue
        current.append(ch)
        if ch in _SPLIT_AT:
            if ch == ".":
                words = "".join(current).split()
                if words and words[-1] in _ABBREVIATIONS:
                    continue
            sentences.append(current)
            current = []
    if current:
        sentences.append(current)

    packed: list[list[str]] = []
    chunk: list[str] = []
    for sentence in sentences:
        if len(chunk) + len(sentence) <= chunk_len:
            chunk = chunk + sentence
        else:
            if chunk:
                packed.append(chunk)
            chunk = list(sentence)
    if chunk:
        packed.append(chunk)

    if min_chunk_len is not None:
        first_short = bool(packed) and len(packed[0]) < min_chunk_len
        final: list[list[str]] = []
        for i, chunk in enumerate(packed):
            if (i == 1 and first_short) or (len(chunk) < min_chunk_len and final):
                final[-1] = final[-1] + chunk
            else:
                final.append(chunk)
        packed = final
    return [s for s in ("".join(c).strip() for c in packed) if s]
