"""A tiny Llama-style fast tokenizer for VoxCPM test models, in the released folder layout.

VoxCPM's released folders carry a MiniCPM (Llama-style) tokenizer as `tokenizer.json` +
`tokenizer_config.json` (`"tokenizer_class": "LlamaTokenizerFast"`) + `special_tokens_map.json`,
which upstream loads with `LlamaTokenizerFast.from_pretrained(folder)`. `write_tokenizer` writes
the same three files for a vocabulary small enough for the tiny test models (every id < 400;
their embeddings have 1024 rows), built with the `tokenizers` library the way transformers'
sentencepiece converter lays out a Llama tokenizer:

- BPE with byte fallback and fused unknowns; ids 0/1/2 are `<unk>`/`<s>`/`</s>` (special added
  tokens), 3..258 the byte tokens `<0x00>`..`<0xFF>`, then `▁` and the pieces;
- `legacy=True` (default): a normalizer `Prepend("▁")` + `Replace(" ", "▁")` and no
  pre-tokenizer (older converted files, sentencepiece's own behaviour); `legacy=False`: no
  normalizer and a `Metaspace(prepend_scheme="first", split=False)` pre-tokenizer (newer ones);
- ASCII letters, digits and some punctuation (others, and emoji, go through byte fallback),
  merges for a few English words;
- single Chinese characters, and multi-character Chinese tokens reached by merges (你好, 世界,
  中国, and the word-initial 你好 as `▁你好`), which upstream's `mask_multichar_chinese_tokens`
  splits back into characters; `▁我们` whose bare form 我们 is not a token (so it is kept);
- one added (non-special) token 谢谢 whose character 谢 is not in the vocabulary: the split
  turns it into two unknown characters, `<unk>` each.

The files load unchanged through `LlamaTokenizerFast.from_pretrained` (its added-token and
special-token bookkeeping finds everything already there), as the tests check against upstream.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors

SPECIALS = ("<unk>", "<s>", "</s>")
BYTES = tuple(f"<0x{b:02X}>" for b in range(256))
ASCII = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.,!?'-:;\"()"
CHINESE = "你好世界中国人我们的是说再见"
# (left, right) merges in priority order; each result becomes a vocabulary token.
MERGES = (
    ("▁", "t"),
    ("h", "e"),
    ("▁t", "he"),
    ("l", "l"),
    ("he", "ll"),
    ("hell", "o"),
    ("▁", "hello"),
    ("▁", "w"),
    ("o", "r"),
    ("▁w", "or"),
    ("l", "d"),
    ("▁wor", "ld"),
    ("▁", "a"),
    ("i", "s"),
    ("▁", "is"),
    ("▁", "H"),
    ("▁H", "e"),
    ("▁He", "ll"),
    ("▁Hell", "o"),
    ("i", "n"),
    ("in", "g"),
    ("▁", "1"),
    ("0", "0"),
    ("你", "好"),
    ("世", "界"),
    ("中", "国"),
    ("▁", "你好"),
    ("▁", "我"),
    ("▁我", "们"),
    ("再", "见"),
)
ADDED = ("谢谢",)  # an added token whose characters are not in the vocabulary


def _vocab() -> tuple[dict[str, int], list[tuple[str, str]]]:
    pieces = list(SPECIALS) + list(BYTES) + ["▁"] + list(ASCII) + list(CHINESE)
    merges = []
    for left, right in MERGES:
        merges.append((left, right))
        if left + right not in pieces:
            pieces.append(left + right)
    missing = {p for m in merges for p in m} - set(pieces)
    if missing:
        raise AssertionError(f"merge parts not in the vocabulary: {sorted(missing)}")
    return {p: i for i, p in enumerate(pieces)}, merges


def build_tokenizer(legacy: bool = True) -> Tokenizer:
    vocab, merges = _vocab()
    tok = Tokenizer(models.BPE(vocab=vocab, merges=merges, unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    if legacy:
        tok.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    else:
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = decoders.Sequence(
        [
            decoders.Replace("▁", " "),
            decoders.ByteFallback(),
            decoders.Fuse(),
            decoders.Strip(" ", 1, 0),
        ]
    )
    tok.post_processor = processors.TemplateProcessing(single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", 1)])
    tok.add_special_tokens([AddedToken(t, lstrip=False, rstrip=False, normalized=False, single_word=False, special=True) for t in SPECIALS])
    tok.add_tokens([AddedToken(t, lstrip=False, rstrip=False, normalized=False, single_word=False, special=False) for t in ADDED])
    return tok


def _added_entry(token: str, special: bool) -> dict:
    return {"content": token, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": special}


def write_tokenizer(folder: Path, *, legacy: bool = True) -> None:
    """Write tokenizer.json, tokenizer_config.json and special_tokens_map.json into `folder`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    tok = build_tokenizer(legacy)
    tok.save(str(folder / "tokenizer.json"))
    decoder = {str(tok.token_to_id(t)): _added_entry(t, True) for t in SPECIALS}
    decoder.update({str(tok.token_to_id(t)): _added_entry(t, False) for t in ADDED})
    config = {
        "add_bos_token": True,
        "add_eos_token": False,
        "added_tokens_decoder": decoder,
        "bos_token": "<s>",
        "clean_up_tokenization_spaces": False,
        "eos_token": "</s>",
        "legacy": legacy,
        "model_max_length": 1000000000000000019884624838656,
        "pad_token": None,
        "sp_model_kwargs": {},
        "tokenizer_class": "LlamaTokenizerFast",
        "unk_token": "<unk>",
        "use_default_system_prompt": False,
    }
    (folder / "tokenizer_config.json").write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    special = {
        name: {k: v for k, v in _added_entry(t, True).items() if k != "special"}
        for name, t in (("bos_token", "<s>"), ("eos_token", "</s>"), ("unk_token", "<unk>"))
    }
    (folder / "special_tokens_map.json").write_text(json.dumps(special, indent=2) + "\n", encoding="utf-8")
