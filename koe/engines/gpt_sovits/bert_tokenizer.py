"""BERT's WordPiece tokenizer as upstream gets it from `AutoTokenizer.from_pretrained(folder)`
(transformers' `BertTokenizerFast`), through the `tokenizers` library without transformers.

* A folder with `tokenizer.json` (the GPT-SoVITS release has only that and `config.json`): the
  file as is, except that `BertTokenizerFast` rebuilds the normalizer when its own settings
  (`do_lower_case`, `strip_accents`, `tokenize_chinese_chars` from `tokenizer_config.json`, by
  default True / None / True) differ from the file's `BertNormalizer`; koe does the same.
* A folder with only `vocab.txt`: what transformers converts the slow tokenizer into — the vocab
  read line by line (only the newline stripped; a repeated token keeps its last line), WordPiece
  with `[UNK]` and 100 characters a word at most, `BertNormalizer(clean_text, chinese characters
  split, accents as configured, lower case)`, `BertPreTokenizer`, `[CLS] $A [SEP]` (type ids 0),
  and the five special tokens matched in the raw text before normalisation.

`encode(text)` gives what `tokenizer(text, return_tensors="pt")` gives: input ids with `[CLS]` and
`[SEP]`, token type ids, attention mask, each (1, T) int64.
"""

from __future__ import annotations

import json
from pathlib import Path

import torch
from tokenizers import Tokenizer, decoders, normalizers, pre_tokenizers, processors
from tokenizers.models import WordPiece

from koe.runtime.files import read_json_object

__all__ = ["BertTokenizer", "BertTokenizerError"]

SPECIAL_TOKENS = ("[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]")


class BertTokenizerError(ValueError):
    """A BERT folder has no usable tokenizer files."""


def _settings(folder: Path) -> dict:
    """`BertTokenizerFast`'s normalizer settings from `tokenizer_config.json` (transformers' defaults without one)."""
    path = folder / "tokenizer_config.json"
    config = read_json_object(path, BertTokenizerError) if path.is_file() else {}
    return {
        "lowercase": bool(config.get("do_lower_case", True)),
        "strip_accents": config.get("strip_accents"),
        "handle_chinese_chars": bool(config.get("tokenize_chinese_chars", True)),
    }


def read_vocab(path: Path) -> dict[str, int]:
    """vocab.txt as transformers' `load_vocab` reads it: one token a line, index = line number."""
    vocab: dict[str, int] = {}
    with open(path, encoding="utf-8") as f:
        for index, line in enumerate(f):
            vocab[line.rstrip("\n")] = index
    return vocab


def wordpiece_tokenizer(vocab: dict[str, int], lowercase: bool = True, strip_accents: bool | None = None, handle_chinese_chars: bool = True) -> Tokenizer:
    """The fast tokenizer transformers converts a `vocab.txt` BERT tokenizer into."""
    for token in ("[UNK]", "[CLS]", "[SEP]"):
        if token not in vocab:
            raise BertTokenizerError(f"the vocabulary has no {token}")
    tok = Tokenizer(WordPiece(vocab, unk_token="[UNK]", max_input_chars_per_word=100))
    tok.normalizer = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=handle_chinese_chars, strip_accents=strip_accents, lowercase=lowercase)
    tok.pre_tokenizer = pre_tokenizers.BertPreTokenizer()
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS]:0 $A:0 [SEP]:0",
        pair="[CLS]:0 $A:0 [SEP]:0 $B:1 [SEP]:1",
        special_tokens=[("[CLS]", vocab["[CLS]"]), ("[SEP]", vocab["[SEP]"])],
    )
    tok.decoder = decoders.WordPiece(prefix="##")
    tok.add_special_tokens([t for t in SPECIAL_TOKENS if t in vocab])
    return tok


class BertTokenizer:
    """A BERT folder's tokenizer (see the module docstring)."""

    def __init__(self, tokenizer: Tokenizer) -> None:
        self.tokenizer = tokenizer

    @classmethod
    def from_folder(cls, folder: str | Path) -> BertTokenizer:
        folder = Path(folder)
        settings = _settings(folder)
        if (folder / "tokenizer.json").is_file():
            try:
                tok = Tokenizer.from_file(str(folder / "tokenizer.json"))
            except Exception as e:  # noqa: BLE001 - tokenizers raises its own Exception type
                raise BertTokenizerError(f"{folder / 'tokenizer.json'}: not a tokenizer file ({e})") from e
            state = json.loads(tok.normalizer.__getstate__()) if tok.normalizer is not None else {}
            if state.get("type") == "BertNormalizer" and any(state.get(k, v) != v for k, v in settings.items()):
                tok.normalizer = normalizers.BertNormalizer(clean_text=state.get("clean_text", True), **settings)
            return cls(tok)
        if (folder / "vocab.txt").is_file():
            return cls(wordpiece_tokenizer(read_vocab(folder / "vocab.txt"), **settings))
        raise BertTokenizerError(f"no BERT tokenizer in {folder}: expected tokenizer.json or vocab.txt")

    def encode(self, text: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """(input_ids, token_type_ids, attention_mask), each (1, T) int64."""
        e = self.tokenizer.encode(text)
        return torch.tensor([e.ids]), torch.tensor([e.type_ids]), torch.tensor([e.attention_mask])
