"""IndexTTS's text tokenizer (releases 1.5 and 2) and its cutting of long texts into segments.

Text -> tokens, as upstream's `TextTokenizer.tokenize`: an empty text has none; a text of one
character (blanks aside) goes to SentencePiece as it is; any other is normalised (`text.py`), cut
around every CJK character and upper-cased (`split_cjk`), then encoded by SentencePiece
(`bpe.model`) into pieces. Ids are the pieces' ids (an unknown piece: the model's `<unk>` id).
The GPT's start and stop text tokens are 0 and 1 (`START_TEXT`, `STOP_TEXT`), never produced by
encoding; the model sets its own size (the releases': 12,000 pieces).

Segments (`split_segments`), as upstream cuts tokens: after a sentence mark (`.`, `!`, `?`, `▁.`,
`▁?`, `▁...`) once a segment has three tokens or more (a `'` right after the mark goes with it and,
as upstream's loop has it, starts the next segment too); a run with a comma is first cut at commas,
one with a hyphen at hyphens; a run longer than the limit is cut every `max_tokens` tokens (with a
warning); then neighbours are joined while they fit the limit (after `quick_streaming_tokens` tokens,
release 2's quick first segment) or half of it.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path

from sentencepiece import SentencePieceProcessor

from koe_indextts.text import TextNormalizer

__all__ = ["SENTENCE_MARKS", "START_TEXT", "STOP_TEXT", "BpeModelError", "TextError", "TextTokenizer", "split_cjk", "split_segments"]

log = logging.getLogger(__name__)

START_TEXT, STOP_TEXT = 0, 1
SENTENCE_MARKS = (".", "!", "?", "▁.", "▁?", "▁...")
_COMMAS = (",", "▁,")
_HYPHENS = ("-",)
_QUOTES = ("'", "▁'")
_SPACE = "▁"  # a word boundary alone: no sound of its own
_CJK = re.compile(r"([\u1100-\u11ff\u2e80-\ua4cf\ua840-\uD7AF\uF900-\uFAFF\uFE30-\uFE4F\uFF65-\uFFDC\U00020000-\U0002FFFF])")


class BpeModelError(ValueError):
    """No SentencePiece model where one is expected, or a file SentencePiece cannot read."""


class TextError(ValueError):
    """Text the tokenizer cannot speak: nothing left after normalising, or only unknown tokens."""


def split_cjk(text: str) -> str:
    """Each CJK character a word of its own, words joined by one space, upper case."""
    return " ".join(w.strip().upper() for w in _CJK.split(text.strip()) if w.strip())


class TextTokenizer:
    """SentencePiece `bpe_model` behind upstream's normaliser and CJK splitting (the module docstring)."""

    def __init__(self, bpe_model: str | Path, normalizer: TextNormalizer | None = None) -> None:
        path = Path(bpe_model)
        if not path.is_file():
            raise BpeModelError(f"no SentencePiece model at {path} (IndexTTS's bpe.model)")
        self.sp = SentencePieceProcessor()
        try:
            self.sp.Load(str(path))
        except (OSError, RuntimeError) as e:
            raise BpeModelError(f"{path} is not a SentencePiece model: {e}") from e
        self.normalizer = normalizer

    @property
    def vocab_size(self) -> int:
        return self.sp.GetPieceSize()

    @property
    def unk_id(self) -> int:
        return self.sp.unk_id()

    def tokenize(self, text: str) -> list[str]:
        """Upstream's pieces for `text` (possibly none)."""
        if not text:
            return []
        if len(text.strip()) != 1:
            if self.normalizer is not None:
                text = self.normalizer.normalize(text)
            text = split_cjk(text)
        return self.sp.Encode(text, out_type=str)

    def ids(self, tokens: list[str]) -> list[int]:
        return [self.sp.PieceToId(t) for t in tokens]

    def pieces(self, ids: list[int]) -> list[str]:
        return [self.sp.IdToPiece(i) for i in ids]

    def segments(self, text: str, max_tokens: int = 120, quick_streaming_tokens: int = 0) -> list[list[int]]:
        """The ids of each segment upstream speaks for `text`; TextError where there is nothing to speak."""
        tokens = self.tokenize(text)
        if not tokens:
            raise TextError(f"nothing to speak in {text!r} once normalised")
        ids = self.ids(tokens)
        unknown = [t for t, i in zip(tokens, ids) if i == self.unk_id]
        if all(i == self.unk_id or t == _SPACE for t, i in zip(tokens, ids)):
            raise TextError(f"the tokenizer knows none of {text!r} (unknown: {unknown})")
        if unknown:
            log.warning("%d unknown tokens in the text: %s", len(unknown), unknown)
        return [self.ids(s) for s in split_segments(tokens, max_tokens, quick_streaming_tokens)]


def _cut(tokens: list[str], marks: tuple[str, ...], max_tokens: int, quick_streaming_tokens: int) -> list[list[str]]:
    if not tokens:
        return []
    cut: list[list[str]] = []
    current: list[str] = []
    for i, token in enumerate(tokens):
        current.append(token)
        if marks != _COMMAS and any(c in current for c in _COMMAS):
            cut.extend(_cut(current, _COMMAS, max_tokens, quick_streaming_tokens))
        elif marks != _HYPHENS and "-" in current:
            cut.extend(_cut(current, _HYPHENS, max_tokens, quick_streaming_tokens))
        elif len(current) <= max_tokens:
            if token in marks and len(current) > 2:
                if i < len(tokens) - 1 and tokens[i + 1] in _QUOTES:
                    current.append(tokens[i + 1])  # and the quote is read again as the next token
                cut.append(current)
                current = []
            continue
        else:
            log.warning("a run of %d tokens with no place to cut it is over %d: cut every %d tokens", len(current), max_tokens, max_tokens)
            cut.extend(current[j : j + max_tokens] for j in range(0, len(current), max_tokens))
        current = []
    if current:
        cut.append(current)
    joined: list[list[str]] = []
    seen = 0
    for segment in cut:
        seen += len(segment)
        if not segment:
            continue
        size = len(joined[-1]) + len(segment) if joined else 0
        if joined and ((size <= max_tokens and seen > quick_streaming_tokens) or size <= max_tokens / 2):
            joined[-1] = joined[-1] + segment
        else:
            joined.append(segment)
    return joined


def split_segments(tokens: list[str], max_tokens: int = 120, quick_streaming_tokens: int = 0) -> list[list[str]]:
    """`tokens` cut into segments of at most `max_tokens` as upstream cuts them (the module docstring)."""
    return _cut(list(tokens), SENTENCE_MARKS, max_tokens, quick_streaming_tokens)
