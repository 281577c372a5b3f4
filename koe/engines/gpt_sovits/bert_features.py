"""BERT features of a text, per phoneme, as upstream's `TextPreprocessor` makes them
(`get_bert_feature`, `get_bert_inf`, and the concatenation in `get_phones_and_bert`).

* A Chinese piece (language `zh`, or `all_zh`): its normalised text is tokenized (`[CLS]` text
  `[SEP]`), the encoder's `hidden_states[-3]` taken without `[CLS]` and `[SEP]`, and row `i` (the
  i-th character's token) repeated `word2ph[i]` times: (1024, phonemes). Upstream asserts that
  there is one `word2ph` entry per character of the text and reads the rows by position (it
  expects one token per character, as Chinese text tokenizes); a text with fewer tokens than
  characters fails there, koe says so.
* Any other piece (English, Japanese, Korean, Cantonese `yue`...): zeros (1024, phonemes), 1024
  being upstream's constant, not the model's width.
* The pieces' features are joined along the phoneme axis.

Upstream's encoder runs all 24 layers and keeps `hidden_states[-3]`; koe runs only the 22 it needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import torch

from koe.engines.gpt_sovits.bert import Bert, read_bert
from koe.engines.gpt_sovits.bert_tokenizer import BertTokenizer

__all__ = ["FEATURE_WIDTH", "BertFeatures", "uses_bert"]

FEATURE_WIDTH = 1024  # upstream's width for the zero features of non-Chinese pieces
HIDDEN_STATE = -3  # upstream reads `hidden_states[-3]`


def uses_bert(language: str) -> bool:
    """Whether upstream computes BERT features for a piece in `language` (only Chinese)."""
    return language.replace("all_", "") == "zh"


class BertFeatures:
    """A BERT encoder and its tokenizer, making upstream's per-phoneme text features."""

    def __init__(self, bert: Bert, tokenizer: BertTokenizer) -> None:
        if len(bert.encoder.layer) < 2:
            raise ValueError("upstream reads hidden_states[-3]: the BERT needs at least 2 layers")
        self.bert, self.tokenizer = bert, tokenizer
        self.layers = len(bert.encoder.layer) + 1 + HIDDEN_STATE  # layers run to reach hidden_states[-3]

    @classmethod
    def from_folder(cls, folder: str | Path, dtype: torch.dtype = torch.float32) -> BertFeatures:
        """A `chinese-roberta-wwm-ext-large` folder's encoder and tokenizer."""
        return cls(read_bert(folder, dtype=dtype), BertTokenizer.from_folder(folder))

    @torch.inference_mode()
    def characters(self, norm_text: str, word2ph: Sequence[int]) -> torch.Tensor:
        """`get_bert_feature`: (1024, sum(word2ph)) for a Chinese piece's normalised text."""
        if len(word2ph) != len(norm_text):
            raise ValueError(f"word2ph has {len(word2ph)} entries for {len(norm_text)} characters of {norm_text!r}")
        states = self.bert(*self.tokenizer.encode(norm_text), layers=self.layers)
        rows = states[-1][0][1:-1]  # (tokens, C) without [CLS] and [SEP]
        if rows.shape[0] < len(word2ph):
            raise ValueError(f"{norm_text!r} tokenizes to {rows.shape[0]} tokens for {len(word2ph)} characters: upstream reads one token a character")
        counts = torch.tensor(list(word2ph), dtype=torch.long)
        return torch.repeat_interleave(rows[: len(word2ph)], counts, dim=0).T

    def piece(self, language: str, phones: int | Sequence[int], word2ph: Sequence[int] | None, norm_text: str) -> torch.Tensor:
        """`get_bert_inf`: a piece's (1024, phonemes) features; `phones` its phoneme ids or their count."""
        if uses_bert(language):
            if word2ph is None:
                raise ValueError("a Chinese piece needs its word2ph")
            return self.characters(norm_text, word2ph)
        count = phones if isinstance(phones, int) else len(phones)
        return torch.zeros((FEATURE_WIDTH, count), dtype=torch.float32)

    def pieces(self, pieces: Iterable[tuple[str, int | Sequence[int], Sequence[int] | None, str]]) -> torch.Tensor:
        """The features of a text's pieces `(language, phones, word2ph, norm_text)`, joined: (1024, phonemes)."""
        return torch.cat([self.piece(*p) for p in pieces], dim=1)
