"""GPT-SoVITS's text preprocessing up to BERT (upstream's `TTS_infer_pack/TextPreprocessor.py`):
a request's text -> the sentences it synthesises one by one, each as phoneme ids and the pieces
(one language each) that BERT features are computed for.

- `pre_segment(text, lang, method)`: upstream's `pre_seg_text`: a short first sentence gets a
  leading full stop (`.` for en, else 。) so that the model has a lead-in, the text is cut by the
  method (`segment`), empty and punctuation-only sentences dropped, sentences shorter than 5
  characters joined to the next, each ended with a full stop if it does not end a sentence, any
  longer than 510 characters (BERT's limit) cut again;
- `language_pieces(text, language)`: upstream's language choice in `get_phones_and_bert`
  (`all_zh`, `all_yue`, `all_ja`, `all_ko`: the text split with that default; `en`: one piece;
  `auto` / `auto_yue`: split freely; zh / ja / ko / yue: split, non-English pieces joined and read
  as the language asked for);
- `phones_and_text(text, language, version)`: `get_phones_and_bert` before BERT: each piece
  cleaned (`clean_text`), the ids and normalised texts joined; fewer than 6 phonemes in all: done
  again once on "." + text;
- `preprocess(text, lang, method, version)`: `preprocess` without BERT, sentence by sentence.

BERT features are another module's: a piece in zh gets BERT's features of its norm_text spread by
its word2ph, any other piece zeros (1024, its phoneme count).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from koe.engines.gpt_sovits.text.clean import Cleaned, FrontEnd, clean_text
from koe.engines.gpt_sovits.text.lang_split import split_languages
from koe.engines.gpt_sovits.text.segment import SENTENCE_ENDS, get_method, split_long

__all__ = ["Piece", "Sentence", "language_pieces", "phones_and_text", "pre_segment", "preprocess", "squeeze_punctuation"]

PAUSES = "!?…,.-"
_PAUSE_RUN_RE = re.compile(f"([{re.escape(PAUSES)}])([{re.escape(PAUSES)}])+")
_FIRST_SENTENCE_RE = re.compile("[" + "".join(re.escape(c) for c in sorted(SENTENCE_ENDS)) + "]")
MERGE_BELOW = 5
BERT_MAX = 510
MIN_PHONES = 6


@dataclass
class Piece:
    """One language's stretch of a sentence, cleaned: `language` as `clean_text` read it (no `all_`)."""

    text: str
    language: str
    cleaned: Cleaned
    ids: list[int]


@dataclass
class Sentence:
    """A sentence as `get_phones_and_bert` returns it before BERT: the text it was read from (with
    the "." it may have gained), its pieces, all their ids and their normalised texts joined."""

    text: str
    pieces: list[Piece] = field(default_factory=list)
    ids: list[int] = field(default_factory=list)
    norm_text: str = ""


def squeeze_punctuation(text: str) -> str:
    """`TextPreprocessor.replace_consecutive_punctuation`: a run of pause marks cut to its first."""
    return _PAUSE_RUN_RE.sub(r"\1", text)


def _merge_short(texts: list[str], threshold: int) -> list[str]:
    """Upstream's `merge_short_text_in_array`: texts joined until each is `threshold` long; a short
    rest joins the last."""
    if len(texts) < 2:
        return texts
    out, current = [], ""
    for t in texts:
        current += t
        if len(current) >= threshold:
            out.append(current)
            current = ""
    if current:
        if out:
            out[-1] += current
        else:
            out.append(current)
    return out


def pre_segment(text: str, lang: str, method: str) -> list[str]:
    """Upstream's `TextPreprocessor.pre_seg_text` (see the module's doc). Raises ValueError for a
    text with nothing to read, as upstream's `filter_text` does."""
    text = text.strip("\n")
    if not text:
        return []
    stop = "." if lang == "en" else "。"
    if text[0] not in SENTENCE_ENDS and len(_FIRST_SENTENCE_RE.split(text)[0].strip()) < 4:
        text = stop + text
    text = get_method(method)(text)
    while "\n\n" in text:
        text = text.replace("\n\n", "\n")
    parts = text.split("\n")
    if all(p in (" ", "\n", "") for p in parts):
        raise ValueError("no text to read (the text is empty or punctuation only)")
    parts = _merge_short([p for p in parts if p not in (" ", "")], MERGE_BELOW)
    out = []
    for part in parts:
        if not part.strip() or not re.sub(r"\W+", "", part):
            continue
        if part[-1] not in SENTENCE_ENDS:
            part += stop
        out.extend(split_long(part) if len(part) > BERT_MAX else [part])
    return out


def language_pieces(text: str, language: str, lang_model=None) -> list[tuple[str, str]]:
    """(text, language) pieces as `get_phones_and_bert` chooses them (see the module's doc)."""
    if language == "en":
        return [(text, "en")]
    defaults = {"all_zh": "zh", "all_yue": "zh", "all_ja": "ja", "all_ko": "ko"}
    if language in defaults or language in ("auto", "auto_yue"):
        found = split_languages(text, defaults.get(language, ""), model=lang_model)
        cantonese = language in ("all_yue", "auto_yue")
        return [(p["text"], "yue" if cantonese and p["lang"] == "zh" else p["lang"]) for p in found]
    out: list[list[str]] = []
    for p in split_languages(text, model=lang_model):
        if out and (p["lang"] == "en") == (out[-1][1] == "en"):
            out[-1][0] += p["text"]
        else:
            out.append([p["text"], "en" if p["lang"] == "en" else language])
    return [(t, lang) for t, lang in out]


def phones_and_text(
    text: str, language: str, version: str = "v2", front_ends: dict[str, FrontEnd] | None = None, lang_model=None, final: bool = False
) -> Sentence:
    """`get_phones_and_bert(text, language, version)` before BERT (see the module's doc)."""
    text = re.sub(r" {2,}", " ", text)
    sentence = Sentence(text)
    for piece_text, piece_language in language_pieces(text, language, lang_model):
        piece_language = piece_language.replace("all_", "")
        cleaned = clean_text(piece_text, piece_language, version, front_ends)
        ids = cleaned.ids(version)
        sentence.pieces.append(Piece(piece_text, piece_language, cleaned, ids))
        sentence.ids += ids
        sentence.norm_text += cleaned.norm_text
    if not final and len(sentence.ids) < MIN_PHONES:
        return phones_and_text("." + text, language, version, front_ends, lang_model, final=True)
    return sentence


def preprocess(text: str, lang: str, method: str, version: str = "v2", front_ends: dict[str, FrontEnd] | None = None, lang_model=None) -> list[Sentence]:
    """`TextPreprocessor.preprocess` without BERT: the sentences of a request, each with its ids and
    pieces; a sentence whose norm_text is empty is dropped."""
    out = []
    for sentence_text in pre_segment(squeeze_punctuation(text), lang, method):
        sentence = phones_and_text(sentence_text, lang, version, front_ends, lang_model)
        if sentence.norm_text:
            out.append(sentence)
    return out
