"""IndexTTS 2.5's text tokenizer: a whisper-style tiktoken vocabulary with language and special tokens.

Release 2.5 drops 2's SentencePiece `bpe.model` for a byte-level BPE in tiktoken's format,
`multilingual_zh_ja_yue_char_del.tiktoken` beside `config.yaml`: one line per mergeable token,
`<base64 of its bytes> <rank>`. Upstream (`indextts/utils/tokenizer.py`, `get_tokenizer(multilingual=
True, model_dir=...)`) wraps it in openai-whisper's `Tokenizer`, which only forwards `encode` to
tiktoken; koe builds the same `tiktoken.Encoding` itself:

- the ranks as the file gives them; the special tokens numbered on from the count of ranks, in
  upstream's order: `<|endoftext|>`, `<|startoftranscript|>`, the first 99 language codes of
  `LANGUAGES`, eleven audio events, four emotions, six task markers, `<|SPECIAL_TOKEN_1|>` to
  `<|SPECIAL_TOKEN_30|>` (2.5's pronunciation annotations use 1 and 2), twenty TTS markers, and the
  1501 timestamps `<|0.00|>` to `<|30.00|>` (1673 in all);
- GPT-2's split pattern; every special token allowed in the text (`allowed_special="all"`).

A segment's ids are `encode("<|{lang}|> " + text)` with the id 1 appended (upstream pads each
segment with a 1), and the language goes to the GPT apart, as `lang_to_token(lang)`: the code's
index in all 106 `LANGUAGES` (`common` for an unknown one). Only the first 99 codes are special
tokens, so a prefix such as `<|zhen|>` is spelled out as ordinary text, as upstream does.

Decoding drops timestamp ids as whisper's `Tokenizer.decode` does. The rest of 2.5's text front end
(normalising, casing, pronunciation annotations, Japanese words, segmenting by token count) is in
`front25.py`.
"""

from __future__ import annotations

import base64
import binascii
import os
from pathlib import Path

__all__ = ["LANGUAGES", "SEGMENT_END", "SPECIAL_LANGUAGES", "VOCAB_FILE", "TextTokenizer25", "language_id", "read_ranks", "special_token_names"]

VOCAB_FILE = "multilingual_zh_ja_yue_char_del.tiktoken"
# whisper's 99 language codes (the special tokens), then the ones only lang_to_token knows
LANGUAGES = tuple(
    (
        "en zh de es ru ko fr ja pt tr pl ca nl ar sv it id hi fi vi he uk el ms cs ro da hu ta no th ur hr bg lt la mi ml "
        "cy sk te fa lv bn sr az sl kn et mk br eu is hy ne mn bs kk sq sw gl mr pa si km sn yo so af oc ka be tg sd gu am "
        "yi lo uz fo ht ps tk nn mt sa lb my bo tl mg as tt haw ln ha ba jw su yue minnan wuyu dialect zh/en en/zh common"
    ).split()
)
SPECIAL_LANGUAGES = 99
AUDIO_EVENTS = ("ASR", "AED", "SER", "Speech", "/Speech", "BGM", "/BGM", "Laughter", "/Laughter", "Applause", "/Applause")
EMOTIONS = ("HAPPY", "SAD", "ANGRY", "NEUTRAL")
TASKS = ("translate", "transcribe", "startoflm", "startofprev", "nospeech", "notimestamps")
TTS_MARKS = ("TTS/B", "TTS/O", "TTS/Q", "TTS/A", "TTS/CO", "TTS/CL", "TTS/H", *(f"TTS/SP{i:02d}" for i in range(1, 14)))
TIMESTAMPS = 1501  # <|0.00|> .. <|30.00|> in steps of 0.02
SEGMENT_END = 1  # the id upstream appends to every segment
PATTERN = r"""'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def language_id(lang: str) -> int:
    """Upstream's `lang_to_token`: the code's index in `LANGUAGES` (case-insensitive), `common`'s if unknown."""
    code = lang.lower()
    return LANGUAGES.index(code if code in LANGUAGES else "common")


def special_token_names() -> list[str]:
    """The special tokens in the order their ids follow the ranks."""
    return [
        "<|endoftext|>",
        "<|startoftranscript|>",
        *(f"<|{code}|>" for code in LANGUAGES[:SPECIAL_LANGUAGES]),
        *(f"<|{event}|>" for event in AUDIO_EVENTS),
        *(f"<|{emotion}|>" for emotion in EMOTIONS),
        *(f"<|{task}|>" for task in TASKS),
        *(f"<|SPECIAL_TOKEN_{i}|>" for i in range(1, 31)),
        *(f"<|{mark}|>" for mark in TTS_MARKS),
        *(f"<|{i * 0.02:.2f}|>" for i in range(TIMESTAMPS)),
    ]


def read_ranks(path: str | os.PathLike) -> dict[bytes, int]:
    """A `.tiktoken` file's mergeable ranks: one `<base64 token> <rank>` a line."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no tiktoken vocabulary (release 2.5's {VOCAB_FILE})")
    ranks: dict[bytes, int] = {}
    with open(path, "rb") as f:
        for number, line in enumerate(f, 1):
            words = line.split()
            if len(words) != 2:  # an empty line included: upstream's reader fails on it too
                raise ValueError(f"{path}:{number}: expected '<base64 token> <rank>', got {line[:80]!r}")
            try:
                token, rank = base64.b64decode(words[0], validate=True), int(words[1])
            except (binascii.Error, ValueError) as e:
                raise ValueError(f"{path}:{number}: expected '<base64 token> <rank>', got {line[:80]!r} ({e})") from e
            if token in ranks:
                raise ValueError(f"{path}:{number}: token {token!r} is listed twice")
            ranks[token] = rank
    if not ranks:
        raise ValueError(f"{path}: an empty tiktoken vocabulary")
    return ranks


class TextTokenizer25:
    """2.5's tokenizer over a ranks table (`from_folder` reads a release folder's vocabulary file)."""

    def __init__(self, ranks: dict[bytes, int], name: str = VOCAB_FILE) -> None:
        import tiktoken

        missing = [b for b in range(256) if bytes([b]) not in ranks]
        if missing:
            raise ValueError(f"{name}: a byte-level vocabulary needs every single byte as a token; {len(missing)} are missing (first {missing[:4]})")
        self.n_ranks = len(ranks)
        self.special_tokens = {token: self.n_ranks + i for i, token in enumerate(special_token_names())}
        n_vocab = self.n_ranks + len(self.special_tokens)
        if max(ranks.values()) >= n_vocab or min(ranks.values()) < 0:
            raise ValueError(f"{name}: ranks must lie in [0, {n_vocab}) for {self.n_ranks} tokens and {len(self.special_tokens)} special ones")
        self.encoding = tiktoken.Encoding(name=name, pat_str=PATTERN, mergeable_ranks=ranks, special_tokens=self.special_tokens, explicit_n_vocab=n_vocab)
        self.timestamp_begin = self.special_tokens["<|0.00|>"]

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> TextTokenizer25:
        return cls(read_ranks(Path(folder) / VOCAB_FILE))

    @property
    def n_vocab(self) -> int:
        return self.encoding.n_vocab

    def encode(self, text: str) -> list[int]:
        """Ids of `text`, special tokens written in it taken as such (upstream's `allowed_special="all"`)."""
        return self.encoding.encode(text, allowed_special="all")

    def segment_ids(self, text: str, lang: str) -> list[int]:
        """A segment's ids as upstream's infer makes them: the `<|lang|> ` prefix, the text, then 1."""
        return [*self.encode(f"<|{lang.lower()}|> {text}"), SEGMENT_END]

    def decode(self, ids: list[int]) -> str:
        """Text of `ids`, timestamp ids left out (whisper's `Tokenizer.decode`)."""
        return self.encoding.decode([i for i in ids if i < self.timestamp_begin])
