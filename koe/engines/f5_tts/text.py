"""F5-TTS's text front end, reproducing upstream (`f5-tts==1.1.22`) exactly.

Upstream turns text into model input in a few small steps, spread over `f5_tts/model/utils.py`
and `f5_tts/infer/utils_infer.py`. This module redoes each of them (no torch needed):

- `Vocab`: the `vocab.txt` table, token -> id, unknown tokens -> 0.
- `to_tokens`: one string -> a list of tokens: characters, with Chinese characters replaced by
  tone-numbered pinyin syllables (`"ni3"`), each preceded by a space token.
- `split_batches` / `max_batch_bytes`: a long text cut into batches on sentence punctuation,
  under a UTF-8 byte budget derived from the reference clip (bytes of transcript per second).
- `ref_text_for_batches` / `batch_text`: the reference transcript is prefixed to every batch.
- `batch_frames` / `share_fix_duration`: how many mel frames each batch is given.

Upstream measures text lengths in UTF-8 bytes, not characters, everywhere (so a Chinese
character weighs 3 and an ASCII letter 1); so does this module (`utf8_len`). Floats are computed
in Python in upstream's order, so the truncated ints match bit for bit.

Chinese segmentation and pinyin come from the same libraries upstream uses (`rjieba`, the
process-wide default dictionary, and `pypinyin`); they are imported on first use.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Sequence
from pathlib import Path

from koe.engines.f5_tts.spec import DEFAULTS, SAMPLE_RATE  # SAMPLE_RATE: the mel/vocoder rate
from koe.engines.f5_tts.spec import HOP as HOP_LENGTH  # samples per mel frame

CROSS_FADE_S = DEFAULTS["cross_fade_duration"]  # upstream's default between batches
BATCH_SECONDS = 22  # max_chars budgets (this - reference seconds) of speech per batch
SHORT_BATCH_BYTES = 10  # a batch under this many UTF-8 bytes ...
SHORT_BATCH_SPEED = 0.3  # ... is timed at this speed instead of the requested one

# Characters rewritten before segmentation (upstream's "custom_trans", for out-of-vocabulary
# marks). Only the ASCII semicolon: the full-width "；" stays as it is.
_REWRITES = str.maketrans({";": ",", "\u201c": '"', "\u201d": '"', "\u2018": "'", "\u2019": "'"})

# An ASCII segment of 2+ bytes gets a space token before it unless the previous token is
# one of these. Upstream tests with `token not in " :'\""`: a substring test, so a multi-character
# token (a pinyin syllable) never matches and the empty string always would.
_NO_SPACE_AFTER = " :'\""

# Sentence ends where upstream's chunk_text cuts: an ASCII mark followed by whitespace (the
# whitespace run is dropped), or right after a full-width mark (nothing dropped, so whitespace
# that follows it starts the next sentence).
_ASCII_ENDS = ";:,.!?"
_WIDE_ENDS = "\uff1b\uff1a\uff0c\u3002\uff01\uff1f"  # ；：，。！？
_SENTENCE_CUT = re.compile("(?<=[" + re.escape(_ASCII_ENDS) + r"])\s+|(?<=[" + _WIDE_ENDS + "])")


def utf8_len(text: str) -> int:
    """Length of `text` in UTF-8 bytes, upstream's measure of text everywhere."""
    return len(text.encode("utf-8"))


# --- vocabulary ---------------------------------------------------------------------------------


class Vocab:
    """Token -> id table of a `vocab.txt` (upstream's `get_tokenizer`).

    Line i of the file (0-based) is the token with id i. The file is read as text (UTF-8,
    universal newlines: "\\r\\n" and "\\r" end lines like "\\n"), and each line loses its
    LAST CHARACTER, whatever it is, as upstream's `char[:-1]` does. So:

    - a last line without a newline loses a real character (`"zi4"` -> `"zi"`);
    - a blank line is the token "" (never produced by `to_tokens`, so never matched);
    - a token that appears twice keeps the later id, and `size` counts distinct tokens
      (upstream's `vocab_size = len(dict)`), which is then fewer than the lines.

    Unknown tokens map to 0, which in upstream's vocabularies is the space token " " (its
    named "pinyin"/"char" datasets assert that; a "custom" vocab file, what inference loads,
    is not checked, and neither is it here).
    """

    def __init__(self, token_ids: dict[str, int]):
        self.token_ids = dict(token_ids)

    @classmethod
    def load(cls, path: str | Path) -> Vocab:
        with open(path, encoding="utf-8") as f:
            return cls.from_lines(f)

    @classmethod
    def from_lines(cls, lines: Iterable[str]) -> Vocab:
        """From lines as a text file yields them (each with its newline, the last maybe not)."""
        token_ids: dict[str, int] = {}
        for index, line in enumerate(lines):
            token_ids[line[:-1]] = index
        return cls(token_ids)

    @property
    def size(self) -> int:
        """The number of distinct tokens: the model's text embedding count (upstream's vocab_size)."""
        return len(self.token_ids)

    def __len__(self) -> int:
        return self.size

    def __contains__(self, token: str) -> bool:
        return token in self.token_ids

    def ids(self, tokens: Iterable[str]) -> list[int]:
        """Ids of `tokens`; a token not in the table is 0 (upstream's `list_str_to_idx`)."""
        table = self.token_ids
        return [table.get(token, 0) for token in tokens]


# --- text -> tokens -----------------------------------------------------------------------------


@functools.cache
def _libraries():
    import rjieba
    from pypinyin import Style, lazy_pinyin

    def pinyin(text: str) -> list[str]:
        return lazy_pinyin(text, style=Style.TONE3, tone_sandhi=True)

    return rjieba.cut, pinyin


def _is_chinese(char: str) -> bool:
    """Upstream's test: U+3100..U+9FFF. Takes in bopomofo, Hangul compatibility jamo, CJK
    extension A and more; leaves out kana, CJK punctuation (U+3000..U+303F, so "〇" too) and
    Hangul syllables."""
    return "\u3100" <= char <= "\u9fff"


def to_tokens(text: str) -> list[str]:
    """One string -> tokens, as upstream's `convert_char_to_pinyin([text])[0]` (polyphone on).

    1. `;` -> `,` and curly quotes -> straight ones.
    2. `rjieba.cut` splits the text into words (Chinese words, ASCII runs such as "Hello" or
       "3.14", single other characters; whitespace comes one character at a time, except
       "\\r\\n", which is one segment).
    3. Each segment by its UTF-8 size:

       - all ASCII (bytes == characters): its characters, one token each; a segment of two or
         more characters first gets a " " token unless it starts the text or the previous token
         is " ", ":", "'" or '"'. (So "\\r\\n" gets one, and so does "Hello" after "你好".)
       - all 3-byte characters (Chinese words, but also single kana, hangul, full-width
         punctuation such as "，"): pypinyin's `lazy_pinyin(segment, TONE3, tone_sandhi=True)`
         over the whole segment (so context picks polyphones and sandhi: 你好 -> ni2 hao3,
         一个 -> yi2 ge4), then for character i, a " " token if the character is "Chinese"
         (`_is_chinese`) and pinyin item i. Items line up with characters position by position
         as upstream assumes; a character pypinyin does not know comes back as itself
         ("，" -> "，"), while some it does know are not "Chinese" here ("〇" -> "ling2",
         no space).
       - anything else (Latin-1 letters such as "é", emoji, segments mixing scripts, like "T恤"):
         character by character: code points < 256 as they are; "Chinese" ones as " " plus
         pypinyin of that character alone (no context); the rest as they are.

    Whitespace is kept as tokens (tabs and newlines too). Empty text gives [].
    """
    cut, pinyin = _libraries()
    tokens: list[str] = []
    for segment in cut(text.translate(_REWRITES)):
        size = utf8_len(segment)
        if size == len(segment):
            if tokens and size > 1 and tokens[-1] not in _NO_SPACE_AFTER:
                tokens.append(" ")
            tokens.extend(segment)
        elif size == 3 * len(segment):
            syllables = pinyin(segment)
            for position, char in enumerate(segment):
                if _is_chinese(char):
                    tokens.append(" ")
                tokens.append(syllables[position])
        else:
            for char in segment:
                if ord(char) < 256:
                    tokens.append(char)
                elif _is_chinese(char):
                    tokens.append(" ")
                    tokens.extend(pinyin(char))
                else:
                    tokens.append(char)
    return tokens


# --- batches ------------------------------------------------------------------------------------


def _with_space_if_narrow(text: str) -> str:
    """`text` plus " " when its last character is one UTF-8 byte (ASCII), as is."""
    return text + " " if text and utf8_len(text[-1]) == 1 else text


def split_batches(text: str, max_bytes: int) -> list[str]:
    """Cut `text` into batches of about `max_bytes` UTF-8 bytes (upstream's `chunk_text`).

    Sentences end after ; : , . ! ? followed by whitespace (the whitespace is dropped) and right
    after ；：，。！？ (nothing dropped). Sentences are packed greedily: a sentence joins the
    current batch when the batch's bytes plus the sentence's bytes (not counting the space about
    to be added) fit in `max_bytes`; otherwise the batch is closed and the sentence starts the
    next one, however long it is (a sentence is never cut). A sentence ending in an ASCII
    character is appended with one " " after it. A closed batch is `.strip()`ped (all Unicode
    whitespace at both ends).

    Odd cases reproduced: a zero or negative budget puts every sentence in its own batch; text
    that is only whitespace gives one empty batch `[""]`; empty text gives `[]`.
    """
    batches: list[str] = []
    current = ""
    for sentence in _SENTENCE_CUT.split(text):
        if not sentence:
            continue
        if utf8_len(current) + utf8_len(sentence) <= max_bytes:
            current += _with_space_if_narrow(sentence)
        else:
            if current:
                batches.append(current.strip())
            current = _with_space_if_narrow(sentence)
    if current:
        batches.append(current.strip())
    return batches


def max_batch_bytes(ref_text: str, ref_seconds: float, speed: float = 1.0) -> int:
    """The byte budget of a batch, as upstream's `infer_process` computes `max_chars`.

    The reference speaks `utf8_len(ref_text) / ref_seconds` bytes a second; a batch gets the
    bytes that fit in the rest of a 22 second window, times `speed`, truncated toward zero:
    `int(bytes / ref_seconds * (22 - ref_seconds) * speed)`.

    `ref_text` is the transcript as `infer_process` gets it (after `end_ref_text`, before
    `ref_text_for_batches`); `ref_seconds` is the loaded reference's samples / its own sample
    rate (before any resampling or trimming in the model). A reference over 22 s gives a
    negative budget (every sentence alone, see `split_batches`); 0 s divides by zero.
    """
    return int(utf8_len(ref_text) / ref_seconds * (BATCH_SECONDS - ref_seconds) * speed)


def end_ref_text(ref_text: str) -> str:
    """The closing punctuation upstream's `preprocess_ref_audio_text` gives a transcript.

    Left alone when it ends with ". " or "。"; else "." gets " " and anything else gets ". ".
    (Only that step: upstream transcribes an empty transcript with Whisper; koe does not.)
    """
    if ref_text.endswith(". ") or ref_text.endswith("\u3002"):
        return ref_text
    return ref_text + (" " if ref_text.endswith(".") else ". ")


def ref_text_for_batches(ref_text: str) -> str:
    """The transcript as `infer_batch_process` uses it: one more " " when its last character is
    one UTF-8 byte (so "Hi. " becomes "Hi.  ", "你好。" stays). Not idempotent: call it once.

    Upstream fails on an empty transcript (`ref_text[-1]`); so does this, with a ValueError.
    """
    if not ref_text:
        raise ValueError("the reference transcript is empty")
    return _with_space_if_narrow(ref_text)


def batch_text(ref_text: str, gen_text: str) -> str:
    """The one string a batch is tokenized from: `ref_text_for_batches(ref_text) + gen_text`.

    `ref_text` is the transcript as `infer_batch_process` gets it (this adds the space).
    """
    return ref_text_for_batches(ref_text) + gen_text


# --- durations ----------------------------------------------------------------------------------


def reference_frames(ref_samples: int, hop: int = HOP_LENGTH) -> int:
    """Mel frames upstream counts for the reference: samples (at 24 kHz) // hop.

    (Upstream's `ref_audio_len`; the mel itself has one more frame, centred STFT.)
    """
    return ref_samples // hop


def batch_frames(
    ref_frames: int,
    ref_text: str,
    gen_text: str,
    speed: float = 1.0,
    fix_duration_s: float | None = None,
    sample_rate: int = SAMPLE_RATE,
    hop: int = HOP_LENGTH,
) -> int:
    """Total mel frames (reference + generated) of one batch, as `infer_batch_process`.

    `ref_frames` is `reference_frames(samples)` of the (resampled) reference; `ref_text` the
    transcript as `infer_batch_process` gets it (the space of `ref_text_for_batches` is added
    here, and counts); `gen_text` this batch's text; `fix_duration_s` this batch's fixed total
    seconds (see `share_fix_duration`) or None.

    - fixed: `int(fix_duration_s * sample_rate / hop)` (speed plays no part);
    - else: `ref_frames + int(ref_frames / ref_bytes * gen_bytes / speed)`, where a batch under
      10 UTF-8 bytes uses speed 0.3 whatever was asked (short texts get more time).

    Upstream does not check that the fixed total leaves room after the reference.
    """
    if fix_duration_s is not None:
        return int(fix_duration_s * sample_rate / hop)
    gen_bytes = utf8_len(gen_text)
    local_speed = SHORT_BATCH_SPEED if gen_bytes < SHORT_BATCH_BYTES else speed
    ref_bytes = utf8_len(ref_text_for_batches(ref_text))
    return ref_frames + int(ref_frames / ref_bytes * gen_bytes / local_speed)


def share_fix_duration(
    fix_duration: float | None,
    batches: Sequence[str],
    ref_samples: int,
    cross_fade_s: float = CROSS_FADE_S,
    sample_rate: int = SAMPLE_RATE,
    hop: int = HOP_LENGTH,
) -> list[float | None]:
    """Each batch's fixed total seconds, from the request's `fix_duration` (upstream 1.1.22).

    None, or a single batch: every batch gets `fix_duration` as it is (None or the whole).
    Several batches: the generated part `fix_duration - ref_sec` (ref_sec = whole reference
    frames in seconds: `(ref_samples // hop) * hop / sample_rate`), plus one `cross_fade_s` per
    junction (the overlaps eaten by cross-fading), is shared by the batches' UTF-8 byte counts;
    each batch's total is `ref_sec + share`. `ref_samples` is the reference at `sample_rate`.
    """
    if fix_duration is None or len(batches) <= 1:
        return [fix_duration] * len(batches)
    ref_sec = ref_samples // hop * hop / sample_rate
    generated = fix_duration - ref_sec
    weights = [utf8_len(batch) for batch in batches]
    total = sum(weights)
    to_share = generated + cross_fade_s * (len(batches) - 1)
    return [ref_sec + to_share * weight / total for weight in weights]
