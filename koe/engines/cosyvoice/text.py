"""CosyVoice's text: the tokenizer (upstream's ids) and the front end that normalises and splits
text before it (upstream's `text_normalize`).

The tokenizer is Qwen's byte-level BPE from `CosyVoice-BlankEN/` with CosyVoice's special tokens
added.

Upstream builds it with transformers (`AutoTokenizer` on the BlankEN folder: a fast tokenizer
converted from `vocab.json` and `merges.txt`, the folder's added tokens 151643-151645) and then
adds its own special tokens in a fixed order, each new one taking the next id: v2's 19 (from
`<|endofprompt|>` = 151646 to `[mn]` = 151662), v3's the same followed by `<|endofsystem|>` and
260 phone tokens (`[AA]`, ..., `[ǜ]`). koe builds the same pipeline with the `tokenizers` library:
NFC, Qwen2's split regex, the byte-level mapping, BPE; special tokens matched first and never
split or normalised. Encoding adds nothing around the text (no BOS/EOS).

The front end (`FrontEnd.normalize`), in upstream's order: text holding a `<|...|>` marker, or
empty, or with the front end off, is passed as it is (one piece). Otherwise, stripped: Chinese
text (any of U+4E00-U+9FFF) goes through the Chinese normaliser, loses line breaks, spaces not
between two ASCII characters, the full-width brackets and the "——" dash (a space), gets "平方"
and "立方" for "²" and "³", "。" for ".", "，" for " - ", and a trailing run of commas becomes
"。"; other text goes through the English normaliser and has each run of digits spelled out.
Then it is cut after sentence marks (closing quotes kept with their sentence) and the sentences
are packed into pieces of at most 80 units once a piece has more than 60 (units: characters for
Chinese, tokens otherwise), a last piece under 20 units joining the one before; pieces of only
punctuation and symbols are dropped. The normalisers are wetext's (the Chinese one keeps erhua)
and inflect's number words, the packages upstream calls, used when installed (`Normalizers`).

One departure, where upstream fails: wetext's English normaliser raises (an AssertionError in its
tagger's token parser) on some text with a run of blanks, a blank line between paragraphs above
all ("Hello.\n\nWorld."), and upstream's front end raises with it. koe speaks such text: where a
normaliser refuses the text whole, the text is cut at every run of two or more blanks (spaces,
tabs, line breaks, no-break spaces), each paragraph is normalised alone and the paragraphs are
joined by one space ("Hello. World."); the rest of the front end goes on as above. Text a
normaliser takes whole is normalised whole, so every text upstream speaks gets upstream's pieces.
"""

from __future__ import annotations

import functools
import importlib.util
import json
import re
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from koe.engines.cosyvoice.config import BLANK_FOLDER, ConfigError

__all__ = ["SPECIAL_TOKENS", "FrontEnd", "Normalizers", "TextTokenizer", "spell_out_numbers", "split_paragraph"]

QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

_V2 = (
    "<|endoftext|>",  # upstream's eos and pad token (already in the vocabulary)
    "<|im_start|>",
    "<|im_end|>",
    "<|endofprompt|>",
    "[breath]",
    "<strong>",
    "</strong>",
    "[noise]",
    "[laughter]",
    "[cough]",
    "[clucking]",
    "[accent]",
    "[quick_breath]",
    "<laughter>",
    "</laughter>",
    "[hissing]",
    "[sigh]",
    "[vocalized-noise]",
    "[lipsmack]",
    "[mn]",
)
_PHONES = (
    "AA AA0 AA1 AA2 AE AE0 AE1 AE2 AH AH0 AH1 AH2 AO AO0 AO1 AO2 AW AW0 AW1 AW2 AY AY0 AY1 AY2 B CH D DH EH EH0 EH1 EH2 ER ER0 "
    "ER1 ER2 EY EY0 EY1 EY2 F G HH IH IH0 IH1 IH2 IY IY0 IY1 IY2 JH K L M N NG OW OW0 OW1 OW2 OY OY0 OY1 OY2 P R S SH T TH UH "
    "UH0 UH1 UH2 UW UW0 UW1 UW2 V W Y Z ZH a ai an ang ao b c ch d e ei en eng f g h i ian in ing iu ià iàn iàng iào iá ián iáng "
    "iáo iè ié iòng ióng iù iú iā iān iāng iāo iē iě iōng iū iǎ iǎn iǎng iǎo iǒng iǔ j k l m n o ong ou p q r s sh t u uang ue "
    "un uo uà uài uàn uàng uá uái uán uáng uè ué uì uí uò uó uā uāi uān uāng uē uě uī uō uǎ uǎi uǎn uǎng uǐ uǒ vè w x y z zh à "
    "ài àn àng ào á ái án áng áo è èi èn èng èr é éi én éng ér ì ìn ìng í ín íng ò òng òu ó óng óu ù ùn ú ún ā āi ān āng āo ē "
    "ēi ēn ēng ě ěi ěn ěng ěr ī īn īng ō ōng ōu ū ūn ǎ ǎi ǎn ǎng ǎo ǐ ǐn ǐng ǒ ǒng ǒu ǔ ǔn ǘ ǚ ǜ"
)
#: The special tokens each version's tokenizer adds, in upstream's order (existing ones keep their ids).
SPECIAL_TOKENS: dict[int, tuple[str, ...]] = {2: _V2, 3: (*_V2, "<|endofsystem|>", *(f"[{p}]" for p in _PHONES.split()))}


def _merges(path: Path) -> list[tuple[str, str]]:
    merges = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        line = line.strip()
        if not line or (i == 0 and line.startswith("#version")):
            continue
        pair = line.split()
        if len(pair) != 2:
            raise ConfigError(f"{path}: line {i + 1} is not a merge (two symbols)")
        merges.append((pair[0], pair[1]))
    return merges


class TextTokenizer:
    """Text -> ids (and back) as upstream's `get_qwen_tokenizer(..., version)` gives them."""

    def __init__(self, folder: str | Path, version: int) -> None:
        """`folder`: a released model folder (its `CosyVoice-BlankEN/`) or the BlankEN folder itself."""
        if version not in SPECIAL_TOKENS:
            raise ConfigError(f"CosyVoice version {version!r}: koe's tokenizer covers 2 or 3")
        folder = Path(folder)
        blank = folder / BLANK_FOLDER if (folder / BLANK_FOLDER).is_dir() else folder
        for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
            if not (blank / name).is_file():
                raise ConfigError(f"{blank}: no {name} (CosyVoice's text tokenizer is Qwen's, in {BLANK_FOLDER}/)")
        vocab = json.loads((blank / "vocab.json").read_text(encoding="utf-8"))
        tokenizer = Tokenizer(models.BPE(vocab, _merges(blank / "merges.txt"), unk_token=None, fuse_unk=False, byte_fallback=False))
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tokenizer.decoder = decoders.ByteLevel()
        config = json.loads((blank / "tokenizer_config.json").read_text(encoding="utf-8"))
        for key, entry in sorted(config.get("added_tokens_decoder", {}).items(), key=lambda kv: int(kv[0])):
            token = AddedToken(
                entry["content"],
                single_word=entry.get("single_word", False),
                lstrip=entry.get("lstrip", False),
                rstrip=entry.get("rstrip", False),
                normalized=entry.get("normalized", False),
                special=entry.get("special", True),
            )
            if token.special:
                tokenizer.add_special_tokens([token])
            else:
                tokenizer.add_tokens([token])
            if tokenizer.token_to_id(entry["content"]) != int(key):
                raise ConfigError(
                    f"{blank}/tokenizer_config.json: {entry['content']!r} is id {key}, but the vocabulary puts it at {tokenizer.token_to_id(entry['content'])}"
                )
        tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS[version]])
        self.tokenizer, self.version = tokenizer, version
        self.special_ids = frozenset(tokenizer.token_to_id(t) for t in SPECIAL_TOKENS[version]) | {int(k) for k in config.get("added_tokens_decoder", {})}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)


# --------------------------------------------------------------------------- the front end

_CHINESE = re.compile(r"[\u4e00-\u9fff]")
_MARKS = {"zh": ("。", "？", "！", "；", "：", "、", ".", "?", "!", ";"), "en": (".", "?", "!", ";", ":")}
_CLOSING_QUOTES = ('"', "\u201d")


@dataclass(frozen=True)
class Normalizers:
    """The text normalisers upstream's front end calls: `zh` and `en` (wetext's `Normalizer`, the
    Chinese one with `remove_erhua=False`), `number` (digits to words: inflect's `number_to_words`).
    A missing one is skipped, as upstream skips wetext when it cannot load it."""

    zh: Callable[[str], str] | None = None
    en: Callable[[str], str] | None = None
    number: Callable[[str], str] | None = None

    @classmethod
    def installed(cls) -> Normalizers:
        """wetext's and inflect's, for those of the two packages that are installed."""
        zh = en = number = None
        try:
            from wetext import Normalizer
        except ImportError:
            pass
        else:
            zh, en = Normalizer(remove_erhua=False).normalize, Normalizer().normalize
        if importlib.util.find_spec("inflect") is not None:
            number = _number_words
        return cls(zh, en, number)


@functools.cache
def _inflect_engine():
    import inflect  # imported on the first number: its import takes seconds (typeguard), most texts never need it

    return inflect.engine()


def _number_words(digits: str) -> str:
    """inflect's `number_to_words`, as upstream's front end calls it."""
    return _inflect_engine().number_to_words(digits)


def spell_out_numbers(text: str, number: Callable[[str], str]) -> str:
    """Each maximal run of characters `str.isdigit` accepts, replaced by `number(run)`."""
    out, start = [], None
    for i, ch in enumerate(text):
        if ch.isdigit():
            start = i if start is None else start
            continue
        if start is not None:
            out.append(number(text[start:i]))
            start = None
        out.append(ch)
    if start is not None:
        out.append(number(text[start:]))
    return "".join(out)


_GAP = re.compile(r"[ \t\r\n\xa0]{2,}")  # the blanks wetext's English tagger trips over, two or more in a row


def _normalise(normaliser: Callable[[str], str], text: str) -> str:
    """`normaliser(text)`; where it refuses the text whole (wetext's tagger asserts on some runs of
    blanks; an IndexError under `python -O`), each paragraph between runs of blanks alone, joined
    by one space (the module docstring)."""
    try:
        return normaliser(text)
    except (AssertionError, IndexError):
        paragraphs = [p for p in _GAP.split(text) if p.strip()]
        if len(paragraphs) < 2:
            raise
    return " ".join(normaliser(p) for p in paragraphs)


def _drop_blanks(text: str) -> str:
    """Spaces kept only between two ASCII non-space characters (the one before the first
    character is the last one, as upstream indexes it; a space at the end is dropped)."""
    out = []
    for i, ch in enumerate(text):
        if ch == " ":
            after = text[i + 1] if i + 1 < len(text) else " "
            before = text[i - 1]
            if not (after.isascii() and after != " " and before.isascii() and before != " "):
                continue
        out.append(ch)
    return "".join(out)


def _only_punctuation(text: str) -> bool:
    return all(unicodedata.category(ch)[0] in "PS" for ch in text)


def split_paragraph(text: str, length: Callable[[str], int], lang: str, max_units: int = 80, min_units: int = 60, merge_units: int = 20) -> list[str]:
    """`text` cut after each sentence mark of `lang` ("zh" or "en"; one is added at the end when
    missing) and packed as the module docstring says; `length` measures a piece in units."""
    marks = _MARKS[lang]
    if not text:
        return []
    if text[-1] not in marks:
        text += "。" if lang == "zh" else "."
    sentences: list[str] = []
    start = 0
    for i, ch in enumerate(text):
        if ch not in marks:
            continue
        if i > start:
            sentences.append(text[start : i + 1])
        if i + 1 < len(text) and text[i + 1] in _CLOSING_QUOTES:
            if sentences:  # upstream moves the quote onto the last sentence (even an earlier one)
                sentences[-1] += text[i + 1]
            start = i + 2
        else:
            start = i + 1
    pieces: list[str] = []
    current = ""
    for sentence in sentences:
        if length(current + sentence) > max_units and length(current) > min_units:
            pieces.append(current)
            current = ""
        current += sentence
    if current:
        if length(current) < merge_units and pieces:
            pieces[-1] += current
        else:
            pieces.append(current)
    return pieces


class FrontEnd:
    """Upstream's `text_normalize` with koe's tokenizer and the given normalisers."""

    def __init__(self, tokenizer: TextTokenizer, normalizers: Normalizers | None = None) -> None:
        self.tokenizer = tokenizer
        self.normalizers = Normalizers() if normalizers is None else normalizers

    def normalize(self, text: str, split: bool = True, text_frontend: bool = True) -> list[str] | str:
        """The pieces to synthesise (`split`), or the whole normalised text (for a prompt's transcript)."""
        if ("<|" in text and "|>" in text) or not text_frontend or text == "":
            return [text] if split else text
        text = text.strip()
        n = self.normalizers
        if _CHINESE.search(text):
            if n.zh is not None:
                text = _normalise(n.zh, text)
            text = _drop_blanks(text.replace("\n", ""))
            text = text.replace("²", "平方").replace("³", "立方").replace(".", "。").replace(" - ", "，")
            text = text.replace("（", "").replace("）", "").replace("【", "").replace("】", "").replace("`", "").replace("——", " ")
            text = re.sub(r"[，,、]+$", "。", text)
            pieces = split_paragraph(text, len, "zh")
        else:
            if n.en is not None:
                text = _normalise(n.en, text)
            if n.number is not None:
                text = spell_out_numbers(text, n.number)
            pieces = split_paragraph(text, lambda t: len(self.tokenizer.encode(t)), "en")
        pieces = [p for p in pieces if not _only_punctuation(p)]
        return pieces if split else text
