"""Fish Speech S2's text tokenizer: the folder's `tokenizer.json` read with the `tokenizers` library,
giving the ids upstream's `FishTokenizer` (transformers' fast Qwen2 tokenizer) gives.

Upstream encodes every text part with `add_special_tokens=False`, special tokens written in the
text matched inline (`<|im_start|>system\\n` is three ids). transformers' `from_pretrained` changes
nothing for the released files that `Tokenizer.from_file` does not already do: the pipeline (NFC,
Qwen2's split regex, byte-level BPE) is the file's, truncation and padding are off, no tokens are
added (every token `tokenizer_config.json` names is in `tokenizer.json` with the same flags), the
Mistral regex patch applies only when asked for (`fix_mistral_regex`, which upstream never passes),
and `clean_up_tokenization_spaces` only touches decoding. `load` checks these facts and refuses a
folder where they do not hold rather than guessing what transformers would make of it.

The `<|semantic:i|>` tokens carry the codec's first codebook: upstream looks each one up and maps
code i to `semantic_begin_id + i`, which holds only for a contiguous run from code 0; `load` checks it.
Speaker tags (`<|speaker:N|>`) are plain text (several BPE ids), the documented way to write dialogue.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from tokenizers import Tokenizer

from koe.engines.base import RequestError

__all__ = [
    "IM_END",
    "IM_START",
    "MODALITIES",
    "FishTokenizer",
    "FishTokenizerError",
    "SpecialTokenInText",
]

IM_START = "<|im_start|>"
IM_END = "<|im_end|>"
PAD = "<|pad|>"
AUDIO_PAD = "<|audio_pad|>"
#: A message's modality and the token written after its role.
MODALITIES = {"text": "<|text|>", "voice": "<|voice|>", "interleave": "<|interleave|>"}
SEMANTIC = "<|semantic:{}|>"
#: Upstream looks up `<|semantic:0..4095|>` (the codec's first codebook).
MAX_SEMANTIC_CODES = 4096
_TOKEN_FLAGS = ("special", "normalized", "lstrip", "rstrip", "single_word")
_NAMED_TOKENS = ("bos_token", "eos_token", "unk_token", "pad_token")


class FishTokenizerError(ValueError):
    """A tokenizer folder koe cannot read as upstream would."""


class SpecialTokenInText(RequestError):
    """Text to speak (or a transcript) holding a special token such as `<|im_end|>`: upstream would
    read it as a control token of the prompt, not as text."""

    param = "input"


def _read_json(path: Path) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise FishTokenizerError(f"{path.name} not found in {path.parent}") from None
    except (OSError, UnicodeDecodeError, ValueError, RecursionError) as e:
        raise FishTokenizerError(f"cannot read {path}: {e}") from None
    if not isinstance(data, dict):
        raise FishTokenizerError(f"{path} must hold a JSON object")
    return data


def _token_name(value) -> str | None:
    """A special-token setting of tokenizer_config.json (a string or an AddedToken dict) as its text."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        return value["content"]
    raise FishTokenizerError(f"tokenizer_config.json: unreadable special token {value!r}")


def _check_config(config: dict, backend: Tokenizer, folder: Path) -> None:
    """Refuse settings under which transformers would tokenize otherwise than the bare file does."""
    where = f"{folder}/tokenizer_config.json"
    for key in ("split_special_tokens", "fix_mistral_regex"):
        if config.get(key):
            raise FishTokenizerError(f"{where} sets {key}: not supported (the released tokenizer does not)")
    state = json.loads(backend.pre_tokenizer.__getstate__()) if backend.pre_tokenizer is not None else {}
    if "add_prefix_space" in state and bool(state["add_prefix_space"]) != bool(config.get("add_prefix_space", False)):
        # transformers rewrites a top-level pre-tokenizer's add_prefix_space to the config's (False when absent)
        raise FishTokenizerError(f"{where}: add_prefix_space differs from tokenizer.json's pre-tokenizer: not supported")
    held = {t.content: (i, t) for i, t in backend.get_added_tokens_decoder().items()}
    for key, entry in (config.get("added_tokens_decoder") or {}).items():
        content = entry.get("content") if isinstance(entry, dict) else None
        if content not in held or str(held[content][0]) != str(key):
            raise FishTokenizerError(f"{where}: added token {content!r} (id {key}) is not in tokenizer.json at that id")
        token = held[content][1]
        for flag in _TOKEN_FLAGS:
            if flag in entry and bool(entry[flag]) != bool(getattr(token, flag)):
                raise FishTokenizerError(f"{where}: added token {content!r} has {flag}={entry[flag]!r}, tokenizer.json the other")
    named = [_token_name(config.get(k)) for k in _NAMED_TOKENS] + [_token_name(v) for v in config.get("additional_special_tokens") or []]
    for name in named:
        if name is not None and name not in held:
            raise FishTokenizerError(f"{where} names {name!r}, which tokenizer.json lacks as an added token")


@dataclass(frozen=True)
class _Ids:
    im_start: int
    im_end: int
    pad: int
    audio_pad: int
    modalities: dict[str, int]
    semantic_begin: int
    semantic_codes: int


class FishTokenizer:
    """Text -> ids as upstream's `FishTokenizer.encode`, and the ids of the prompt's tokens."""

    def __init__(self, backend: Tokenizer) -> None:
        backend.no_truncation()
        backend.no_padding()
        backend.encode_special_tokens = False
        self._backend = backend
        self._special_ids = frozenset(i for i, t in backend.get_added_tokens_decoder().items() if t.special)
        self._ids = self._find_ids()

    @classmethod
    def load(cls, folder: str | Path) -> FishTokenizer:
        """Read `tokenizer.json` (and check `tokenizer_config.json`) of a Fish Speech S2 folder."""
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.is_file():
            raise FishTokenizerError(f"tokenizer.json not found in {folder}")
        try:
            backend = Tokenizer.from_file(str(path))
        except Exception as e:  # the tokenizers library raises its own Exception type
            raise FishTokenizerError(f"cannot read {path}: {e}") from e
        _check_config(_read_json(folder / "tokenizer_config.json"), backend, folder)
        return cls(backend)

    def _find_ids(self) -> _Ids:
        def need(token: str) -> int:
            index = self._backend.token_to_id(token)
            if index is None:
                raise FishTokenizerError(f"the tokenizer has no {token} token (not a Fish Speech S2 tokenizer)")
            return index

        codes = 0
        while codes < MAX_SEMANTIC_CODES and self._backend.token_to_id(SEMANTIC.format(codes)) is not None:
            codes += 1
        if codes == 0:
            raise FishTokenizerError("the tokenizer has no <|semantic:0|> token: no codes to speak with")
        begin = need(SEMANTIC.format(0))
        for code in range(MAX_SEMANTIC_CODES):
            index = self._backend.token_to_id(SEMANTIC.format(code))
            if (index is not None) != (code < codes) or (index is not None and index != begin + code):
                raise FishTokenizerError(f"the <|semantic:N|> tokens are not one run of ids from <|semantic:0|> ({SEMANTIC.format(code)}: {index})")
        return _Ids(
            im_start=need(IM_START),
            im_end=need(IM_END),
            pad=need(PAD),
            audio_pad=need(AUDIO_PAD),
            modalities={name: need(token) for name, token in MODALITIES.items()},
            semantic_begin=begin,
            semantic_codes=codes,
        )

    # -- ids ----------------------------------------------------------------------------------------
    @property
    def im_start_id(self) -> int:
        return self._ids.im_start

    @property
    def im_end_id(self) -> int:
        """`<|im_end|>`: the end of a message, and the end of generated speech (upstream's eos)."""
        return self._ids.im_end

    @property
    def pad_id(self) -> int:
        return self._ids.pad

    @property
    def audio_pad_id(self) -> int:
        return self._ids.audio_pad

    def modality_id(self, modality: str) -> int:
        """The id of `<|text|>`, `<|voice|>` or `<|interleave|>`."""
        return self._ids.modalities[modality]

    @property
    def semantic_begin_id(self) -> int:
        """The id of `<|semantic:0|>`; code i is `semantic_begin_id + i`."""
        return self._ids.semantic_begin

    @property
    def semantic_end_id(self) -> int:
        """The id of the last `<|semantic:i|>` (inclusive, as upstream's)."""
        return self._ids.semantic_begin + self._ids.semantic_codes - 1

    @property
    def semantic_codes(self) -> int:
        """How many `<|semantic:i|>` tokens there are (4096 in the release)."""
        return self._ids.semantic_codes

    def __len__(self) -> int:
        """Every id, added tokens included."""
        return self._backend.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str) -> int | None:
        """The id of a vocabulary or added token; None where there is none."""
        return self._backend.token_to_id(token)

    # -- text ---------------------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """The ids of `text` as upstream's `encode(text)` gives them: no BOS/EOS, added tokens written
        in the text matched inline as single ids."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, not {type(text).__name__}")
        return self._backend.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        """The text of `ids`, special tokens written out."""
        return self._backend.decode(list(ids), skip_special_tokens=False)

    def special_tokens_in(self, text: str) -> list[str]:
        """The special tokens (`<|im_end|>`, `<|voice|>`, `<|semantic:N|>`, ...) that `encode(text)`
        would match in `text`, in order."""
        return [self._backend.id_to_token(i) for i in self.encode(text) if i in self._special_ids]

    def check_text(self, text: str, what: str = "the text") -> None:
        """Raise `SpecialTokenInText` where `text` holds special tokens (see `special_tokens_in`)."""
        found = self.special_tokens_in(text)
        if found:
            shown = ", ".join(dict.fromkeys(found))
            raise SpecialTokenInText(
                f"{what} contains the special token(s) {shown}, which would be read as the prompt's control tokens, "
                "not as words: remove them (speaker tags such as <|speaker:0|> are fine)"
            )
