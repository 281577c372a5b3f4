"""Qwen's byte-level BPE text tokenizer, built on the `tokenizers` library.

A model folder of the released Qwen3-TTS layout holds `vocab.json`, `merges.txt` and
`tokenizer_config.json` (no `tokenizer.json`). Upstream turns these into a fast tokenizer whose
pipeline is: NFC normalization, a regex split (behaviour "isolated"), byte-level mapping without a
prefix space, BPE without dropout, unknown token or word affixes; the 33 added tokens of
`tokenizer_config.json`'s `added_tokens_decoder` are matched before all of that.

Which split regex applies is decided per folder (see `pretokenizer_branch`): upstream loads the
processor with `fix_mistral_regex=True`, and transformers 4.57.3 then swaps the Qwen2 regex for a
corrected Mistral one when the folder's `config.json` names a transformers version it distrusts.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

RegexBranch = Literal["qwen2", "mistral_fix"]

#: The split regex a Qwen2 tokenizer is built with (contractions first, letters with at most one
#: leading non-letter, single digits, punctuation runs, newlines, whitespace).
QWEN2_SPLIT_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"""
    r"""|\s*[\r\n]+|\s+(?!\S)|\s+"""
)

#: The regex transformers 4.57.3 installs under `fix_mistral_regex=True`: words split at
#: lower→upper case changes, no contraction rule, `/` may trail punctuation runs.
MISTRAL_FIX_SPLIT_REGEX = (
    r"[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+"
    r"|[^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*"
    r"|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)

#: `model_type`s transformers still treats as Mistral tokenizers for configs of <= 4.57.2.
MISTRAL_MODEL_TYPES = frozenset({"mistral", "mistral3", "voxtral", "ministral", "pixtral"})

#: Last transformers version whose saved configs are trusted for non-Mistral models.
_LAST_TRUSTED = "4.57.2"
#: First transformers version whose saved configs are trusted for every model.
_FIRST_FIXED = "5.0.0"
#: Transformers only considers the swap for tokenizers with a base vocabulary above this.
_PATCH_MIN_VOCAB = 100_000

_TOKENIZER_FILES = ("vocab.json", "merges.txt", "tokenizer_config.json")


class TokenizerFilesError(ValueError):
    """A tokenizer file of a model folder is missing or malformed."""


# --------------------------------------------------------------------------- version ordering

_PEP440 = re.compile(
    r"""^\s*v?(?:(?P<epoch>\d+)!)?(?P<release>\d+(?:\.\d+)*)
    (?:[-_.]?(?P<pre_l>alpha|a|beta|b|preview|pre|c|rc)[-_.]?(?P<pre_n>\d+)?)?
    (?:-(?P<post_n1>\d+)|[-_.]?(?P<post_l>post|rev|r)[-_.]?(?P<post_n2>\d+)?)?
    (?:[-_.]?(?P<dev_l>dev)[-_.]?(?P<dev_n>\d+)?)?
    (?:\+(?P<local>[a-z0-9]+(?:[-_.][a-z0-9]+)*))?\s*$""",
    re.VERBOSE | re.IGNORECASE,
)
_PRE_LETTER = {"alpha": "a", "a": "a", "beta": "b", "b": "b", "c": "rc", "rc": "rc", "pre": "rc", "preview": "rc"}
_LOW: tuple = (0,)
_HIGH: tuple = (2,)


def version_key(text: str) -> tuple:
    """A sort key that orders PEP 440 version strings as `packaging.version` does."""
    m = _PEP440.match(text)
    if m is None:
        raise ValueError(f"not a PEP 440 version: {text!r}")
    release = [int(p) for p in m["release"].split(".")]
    while len(release) > 1 and release[-1] == 0:
        release.pop()
    has_post = m["post_n1"] is not None or m["post_l"] is not None
    has_dev = m["dev_l"] is not None
    if m["pre_l"] is not None:
        pre: tuple = (1, _PRE_LETTER[m["pre_l"].lower()], int(m["pre_n"] or 0))
    elif has_dev and not has_post:
        pre = _LOW
    else:
        pre = _HIGH
    post = (1, int(m["post_n1"] or m["post_n2"] or 0)) if has_post else _LOW
    dev = (1, int(m["dev_n"] or 0)) if has_dev else _HIGH
    if m["local"] is None:
        local: tuple = _LOW
    else:
        parts = re.split(r"[-_.]", m["local"].lower())
        local = (1, tuple((1, int(p), "") if p.isdigit() else (0, 0, p) for p in parts))
    return (int(m["epoch"] or 0), tuple(release), pre, post, dev, local)


# --------------------------------------------------------------------------- regex decision


def _read_json(path: Path) -> Any:
    """Parse a JSON file, naming it in any error."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TokenizerFilesError(f"{path.name} not found in {path.parent}") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise TokenizerFilesError(f"{path} is not valid UTF-8 JSON: {e}") from None
    except RecursionError:
        raise TokenizerFilesError(f"{path} is not a usable JSON file (nested too deeply)") from None


def branch_for_config(config: dict | None) -> RegexBranch:
    """Which split regex a model folder gets, given its parsed `config.json` (None: no file).

    Mirrors transformers 4.57.3 under `fix_mistral_regex=True` for a local folder: no
    `config.json` keeps the Qwen2 regex; a `transformers_version` of at most 4.57.2 keeps it
    unless `model_type` is absent or a Mistral type; 5.0.0 or later keeps it; anything else
    (4.57.3 … 5.0.0 pre-releases, or no/empty version) installs the Mistral-fix regex.
    """
    if config is None:
        return "qwen2"
    version = config.get("transformers_version")
    model_type = config.get("model_type")
    if version:
        if not isinstance(version, str):
            raise TokenizerFilesError(f"config.json: transformers_version must be a string, got {version!r}")
        try:
            key = version_key(version)
        except ValueError as e:
            raise TokenizerFilesError(f"config.json: {e}") from None
        if key <= version_key(_LAST_TRUSTED):
            if model_type is not None and model_type not in MISTRAL_MODEL_TYPES:
                return "qwen2"
        elif key >= version_key(_FIRST_FIXED):
            return "qwen2"
    return "mistral_fix"


def pretokenizer_branch(folder: str | Path) -> RegexBranch:
    """Which split regex upstream's processor uses for the model folder (reads its `config.json`)."""
    path = Path(folder) / "config.json"
    if not path.is_file():
        return "qwen2"
    config = _read_json(path)
    if not isinstance(config, dict):
        raise TokenizerFilesError(f"{path} must hold a JSON object")
    return branch_for_config(config)


def split_regex(branch: RegexBranch) -> str:
    """The split regex of a branch."""
    if branch == "qwen2":
        return QWEN2_SPLIT_REGEX
    if branch == "mistral_fix":
        return MISTRAL_FIX_SPLIT_REGEX
    raise ValueError(f"unknown regex branch {branch!r}")


# --------------------------------------------------------------------------- file reading


@dataclass(frozen=True)
class AddedTokenSpec:
    """One entry of `added_tokens_decoder`."""

    id: int
    content: str
    special: bool
    normalized: bool
    lstrip: bool = False
    rstrip: bool = False
    single_word: bool = False


def read_vocab(path: Path) -> dict[str, int]:
    """`vocab.json`: a JSON object of token → id."""
    vocab = _read_json(path)
    if not isinstance(vocab, dict) or not vocab:
        raise TokenizerFilesError(f"{path} must hold a non-empty JSON object of token -> id")
    for token, index in vocab.items():
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise TokenizerFilesError(f"{path}: id of {token!r} is not a non-negative integer: {index!r}")
    return vocab


def read_merges(path: Path) -> list[tuple[str, str]]:
    """`merges.txt`: one `left right` pair a line; a first `#version:` line and blank lines skipped."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TokenizerFilesError(f"{path.name} not found in {path.parent}") from None
    except UnicodeDecodeError as e:
        raise TokenizerFilesError(f"{path} is not valid UTF-8: {e}") from None
    merges: list[tuple[str, str]] = []
    for number, raw in enumerate(text.split("\n")):
        line = raw.strip()
        if not line or (number == 0 and line.startswith("#version:")):
            continue
        parts = line.split()
        if len(parts) != 2:
            raise TokenizerFilesError(f"{path}:{number + 1}: expected two symbols, got {raw!r}")
        merges.append((parts[0], parts[1]))
    if not merges:
        raise TokenizerFilesError(f"{path} holds no merges")
    return merges


def read_added_tokens(path: Path) -> list[AddedTokenSpec]:
    """The `added_tokens_decoder` of `tokenizer_config.json`, sorted by id."""
    config = _read_json(path)
    if not isinstance(config, dict):
        raise TokenizerFilesError(f"{path} must hold a JSON object")
    decoder = config.get("added_tokens_decoder", {})
    if not isinstance(decoder, dict):
        raise TokenizerFilesError(f"{path}: added_tokens_decoder must be an object of id -> token")
    specs = []
    for key, entry in decoder.items():
        try:
            index = int(key)
            specs.append(
                AddedTokenSpec(
                    id=index,
                    content=str(entry["content"]),
                    special=bool(entry.get("special", False)),
                    normalized=bool(entry.get("normalized", not entry.get("special", False))),
                    lstrip=bool(entry.get("lstrip", False)),
                    rstrip=bool(entry.get("rstrip", False)),
                    single_word=bool(entry.get("single_word", False)),
                )
            )
        except (ValueError, TypeError, KeyError) as e:
            raise TokenizerFilesError(f"{path}: bad added_tokens_decoder entry {key!r}: {e!r}") from None
    return sorted(specs, key=lambda s: s.id)


# --------------------------------------------------------------------------- building


def build_backend(vocab: dict[str, int], merges: Sequence[tuple[str, str]], added: Sequence[AddedTokenSpec], branch: RegexBranch) -> Tokenizer:
    """The `tokenizers` pipeline upstream's fast Qwen2 tokenizer runs, with the branch's regex."""
    tok = Tokenizer(
        models.BPE(
            vocab=vocab,
            merges=list(merges),
            dropout=None,
            unk_token=None,
            continuing_subword_prefix="",
            end_of_word_suffix="",
            fuse_unk=False,
            byte_fallback=False,
        )
    )
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(split_regex(branch)), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    for spec in added:
        token = AddedToken(
            spec.content,
            single_word=spec.single_word,
            lstrip=spec.lstrip,
            rstrip=spec.rstrip,
            normalized=spec.normalized,
            special=spec.special,
        )
        if spec.special:
            tok.add_special_tokens([token])
        else:
            tok.add_tokens([token])
        got = tok.token_to_id(spec.content)
        if got != spec.id:
            raise TokenizerFilesError(f"tokenizer_config.json: added token {spec.content!r} declared as id {spec.id} but lands at {got}")
    return tok


class QwenTokenizer:
    """Text → ids as upstream Qwen3-TTS's processor gives them (and back)."""

    def __init__(self, backend: Tokenizer, branch: RegexBranch, special_ids: frozenset[int]) -> None:
        self._backend = backend
        self.branch: RegexBranch = branch
        self.special_ids = special_ids

    @classmethod
    def from_folder(cls, folder: str | Path, *, branch: RegexBranch | None = None) -> QwenTokenizer:
        """Load from a model folder; `branch` overrides the regex decision read from `config.json`."""
        root = Path(folder)
        if not root.is_dir():
            raise TokenizerFilesError(f"tokenizer folder not found: {root}")
        for name in _TOKENIZER_FILES:
            if not (root / name).is_file():
                raise TokenizerFilesError(f"{name} not found in {root}")
        vocab = read_vocab(root / "vocab.json")
        merges = read_merges(root / "merges.txt")
        added = read_added_tokens(root / "tokenizer_config.json")
        chosen = pretokenizer_branch(root) if branch is None else branch
        if len(vocab) <= _PATCH_MIN_VOCAB:
            chosen = "qwen2"  # transformers never swaps the regex of a small vocabulary
        backend = build_backend(vocab, merges, added, chosen)
        return cls(backend, chosen, frozenset(s.id for s in added if s.special))

    @property
    def vocab_size(self) -> int:
        """Size of the base vocabulary (without added tokens)."""
        return self._backend.get_vocab_size(with_added_tokens=False)

    def __len__(self) -> int:
        return self._backend.get_vocab_size(with_added_tokens=True)

    def encode(self, text: str) -> list[int]:
        """Token ids of `text`; added tokens written in the text are matched as single ids."""
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        return self._backend.encode(text, add_special_tokens=True).ids

    def decode(self, ids: Sequence[int], *, skip_special_tokens: bool = False) -> str:
        """Text of `ids` (added tokens written out unless skipped)."""
        return self._backend.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_to_id(self, token: str) -> int | None:
        """Id of a vocabulary or added token, None when unknown."""
        return self._backend.token_to_id(token)
