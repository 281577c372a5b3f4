"""VoxCPM's text front end, reproducing upstream (`voxcpm==2.0.3`, transformers 4.57.3) without transformers.

Upstream turns text into token ids in three steps:

1. `VoxCPM._generate` (core.py) checks the target text (`not text.strip()` is a ValueError),
   then `text.replace("\\n", " ")` and `re.sub(r"\\s+", " ", text)`: `normalise_text`. Only the
   target text; a prompt transcript is used as given.
2. The model tokenizes `prompt_text + target_text` (one string, no separator) with
   `LlamaTokenizerFast.from_pretrained(folder)`, through `tokenize(text)` (the backend's
   encoding with `add_special_tokens=False`: no BOS/EOS) and `convert_tokens_to_ids` (each token
   string looked up again with `token_to_id`, the unk id where it has none).
3. `mask_multichar_chinese_tokens`: a token whose text without `▁` (every `▁` removed) is a
   vocabulary token (added tokens included) of two or more characters, all in U+4E00..U+9FFF,
   is replaced by its single characters; each is looked up as in 2, so a character that is not
   itself a token becomes the unk id. The `▁` of such a token is dropped.

`TextTokenizer.load` builds the same backend from the folder's `tokenizer.json` with the
`tokenizers` library, redoing what `from_pretrained` changes on the way:

- truncation and padding stored in tokenizer.json are switched off (transformers does so for a
  call without truncation/padding), `split_special_tokens` (default false) is honoured;
- special tokens named by tokenizer_config.json (`bos_token`, `eos_token`, `unk_token`, ...,
  `additional_special_tokens`, and the `added_tokens_decoder` entries) or, when the config has
  no `added_tokens_decoder`, by special_tokens_map.json, that tokenizer.json does not already
  hold as added tokens are added, as transformers adds them (special, not normalized). Tokens
  already there are compared by content only (transformers re-adds one whose stored flags
  differ: not reproduced).
- `legacy` changes nothing for a folder with a tokenizer.json (it only steers the conversion of
  a sentencepiece model), and the pre-tokenizer's `add_prefix_space` is left alone for
  Llama-style files (transformers rewrites it only where the stored pre-tokenizer has that
  field, i.e. not Metaspace or none). A config that sets `add_prefix_space` makes transformers
  rebuild the tokenizer from `tokenizer.model` (sentencepiece) instead: refused here.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

from tokenizers import AddedToken, Tokenizer

from koe.engines.base import EmptyText

WORD_MARK = "\u2581"  # "▁", sentencepiece's word-start marker
SPECIAL_ATTRIBUTES = ("bos_token", "eos_token", "unk_token", "sep_token", "pad_token", "cls_token", "mask_token")
# LlamaTokenizerFast's defaults for a special token its config does not name at all.
LLAMA_DEFAULTS = {"unk_token": "<unk>", "bos_token": "<s>", "eos_token": "</s>"}
_WHITESPACE = re.compile(r"\s+")


class TokenizerError(ValueError):
    """A tokenizer folder koe cannot read as upstream would, or text it cannot tokenize."""


def normalise_text(text: str) -> str:
    """Upstream's target-text clean-up: newlines and whitespace runs become one space.

    Raises `EmptyText` for a non-string or a text that is empty or only whitespace, as upstream
    refuses it (`ValueError("target text must be a non-empty string")`). Leading/trailing
    whitespace is kept (collapsed to one space), as upstream keeps it.
    """
    if not isinstance(text, str) or not text.strip():
        raise EmptyText("the text to speak is empty")
    return _WHITESPACE.sub(" ", text.replace("\n", " "))


def is_multichar_chinese(token: str) -> bool:
    """Two or more characters, all CJK Unified Ideographs (U+4E00..U+9FFF), as upstream tests."""
    return len(token) >= 2 and all("\u4e00" <= c <= "\u9fff" for c in token)


def _read_json(path: Path) -> dict:
    if not path.exists():
        return {}
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise TokenizerError(f"cannot read {path}: {e}") from e
    except RecursionError:
        raise TokenizerError(f"cannot read {path}: nested too deeply") from None


def _as_added_token(value, special: bool = True) -> AddedToken | None:
    """A special-token value from the config files (a string or an AddedToken dict) as an AddedToken."""
    if value is None:
        return None
    if isinstance(value, str):
        return AddedToken(value, special=special, normalized=not special)
    if isinstance(value, dict) and isinstance(value.get("content"), str):
        special = bool(value.get("special", special))
        fields = {k: bool(value[k]) for k in ("single_word", "lstrip", "rstrip") if k in value}
        normalized = bool(value.get("normalized", not special))
        return AddedToken(value["content"], special=special, normalized=normalized, **fields)
    raise TokenizerError(f"unreadable special token {value!r} in the tokenizer config")


def _special_settings(config: dict, special_map: dict) -> dict:
    """tokenizer_config.json's settings with special_tokens_map.json's applied as from_pretrained does."""
    sources = dict(config)
    if "added_tokens_decoder" not in config:  # transformers' legacy path reads special_tokens_map.json
        for key, value in special_map.items():
            if key == "additional_special_tokens":
                merged = list(sources.get(key) or [])
                merged += [v for v in value if v not in merged]
                sources[key] = merged
            else:  # the map's value wins over the config's
                sources[key] = value
    for key, default in LLAMA_DEFAULTS.items():
        sources.setdefault(key, default)
    return sources


def _config_special_tokens(sources: dict) -> list[AddedToken]:
    """The special and added tokens transformers' from_pretrained makes sure the backend holds."""
    named = [sources.get(k) for k in SPECIAL_ATTRIBUTES] + list(sources.get("additional_special_tokens") or [])
    named_tokens = [t for t in (_as_added_token(v) for v in named) if t is not None]
    special_names = {t.content for t in named_tokens}
    tokens = []
    entries = sources.get("added_tokens_decoder") or {}
    for _, entry in sorted(entries.items(), key=lambda item: int(item[0])):
        token = _as_added_token(entry, special=bool(entry.get("special", False)))
        if token.content in special_names and not token.special:
            token = _as_added_token({**entry, "special": True})
        tokens.append(token)
    return tokens + named_tokens


class TextTokenizer:
    """Text -> token ids, as upstream VoxCPM's `text_tokenizer(text)` gives them."""

    def __init__(self, backend: Tokenizer, unk_token: str):
        self.backend = backend
        self.vocab = backend.get_vocab(with_added_tokens=True)
        if unk_token not in self.vocab:
            raise TokenizerError(f"the unknown token {unk_token!r} is not in the vocabulary")
        self.unk_id = self.vocab[unk_token]
        self.multichar_tokens = frozenset(t for t in self.vocab if is_multichar_chinese(t))

    @classmethod
    def load(cls, folder: Path | str) -> TextTokenizer:
        folder = Path(folder)
        path = folder / "tokenizer.json"
        if not path.exists():
            raise TokenizerError(f"{folder} has no tokenizer.json (koe does not convert sentencepiece tokenizer.model files)")
        config = _read_json(folder / "tokenizer_config.json")
        if config.get("add_prefix_space") is not None:
            raise TokenizerError(
                f"{folder}/tokenizer_config.json sets add_prefix_space, with which upstream rebuilds the "
                "tokenizer from tokenizer.model (sentencepiece): not supported"
            )
        try:
            backend = Tokenizer.from_file(str(path))
        except Exception as e:  # the tokenizers library raises its own Exception type
            raise TokenizerError(f"cannot read {path}: {e}") from e
        backend.no_truncation()
        backend.no_padding()
        backend.encode_special_tokens = bool(config.get("split_special_tokens", False))
        present = {t.content for t in backend.get_added_tokens_decoder().values()}
        missing = []
        settings = _special_settings(config, _read_json(folder / "special_tokens_map.json"))
        for token in _config_special_tokens(settings):
            if token.content not in present:
                present.add(token.content)
                missing.append(token)
        if missing:
            backend.add_tokens(missing)
        unk = _as_added_token(settings["unk_token"])
        if unk is None:
            raise TokenizerError(f"{folder}/tokenizer_config.json has no unk_token (upstream would give None ids)")
        return cls(backend, unk.content)

    @property
    def vocab_size(self) -> int:
        """Number of ids, added tokens included (upstream's `len(tokenizer)`): embedding rows needed."""
        return self.backend.get_vocab_size(with_added_tokens=True)

    def token_id(self, token: str) -> int:
        index = self.backend.token_to_id(token)
        return self.unk_id if index is None else index

    def tokenize(self, text: str) -> list[str]:
        """Token strings after upstream's multi-character Chinese split."""
        if not isinstance(text, str):
            raise TokenizerError(f"text must be a string, not {type(text).__name__}")
        tokens = []
        for token in self.backend.encode(text, add_special_tokens=False).tokens:
            bare = token.replace(WORD_MARK, "")
            if bare in self.multichar_tokens:
                tokens.extend(bare)
            else:
                tokens.append(token)
        return tokens

    def __call__(self, text: str) -> list[int]:
        return [self.token_id(t) for t in self.tokenize(text)]
