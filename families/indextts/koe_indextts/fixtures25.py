"""Random-weight pieces of an IndexTTS 2.5 release folder, written deterministically by koe in the
released layout: the semantic codec (`codec.pth`, with config.yaml's `semantic_codec:` section) and
the tiktoken vocabulary (`multilingual_zh_ja_yue_char_del.tiktoken`).

Codec sizes: "tiny" (the goldens': its bytes must not change) shrinks the Vocos backbones and the
codebook; "real" is 2.5's as derived in `koe_indextts.codec25` (8192 x 8, Vocos 384 / 2048 / 12,
1024 wide, downsampling by 2). The vocabulary is small at either size: the 256 bytes in GPT-2's
byte order (so id 1, which upstream appends to each segment, is `"` as in whisper's vocabularies)
and a few hundred merges learnt from a short mixed-language text by a plain BPE count.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from pathlib import Path

import torch
import yaml

from koe_indextts.codec25 import CODEC_FILE, Codec25, Codec25Config
from koe_indextts.fixtures import random_state, state_sha256
from koe_indextts.text25 import VOCAB_FILE

__all__ = ["SIZES", "codec_section", "codec_state", "vocabulary_ranks", "write_codec", "write_vocabulary"]

SIZES = ("tiny", "real")
TINY_CODEC = {
    "codebook_size": 64,
    "hidden_size": 16,
    "codebook_dim": 4,
    "vocos_dim": 24,
    "vocos_intermediate_dim": 40,
    "vocos_num_layers": 2,
    "num_quantizers": 1,
    "downsample_scale": 2,
}
REAL_CODEC = {
    "codebook_size": 8192,
    "hidden_size": 1024,
    "codebook_dim": 8,
    "vocos_dim": 384,
    "vocos_intermediate_dim": 2048,
    "vocos_num_layers": 12,
    "num_quantizers": 1,
    "downsample_scale": 2,
}
MERGES = 360
CORPUS = (
    "The weather is lovely today, and the river runs quietly past the old mill. "
    "She said: there are 3 reasons to stay, and 12 to leave! Isn't it strange? We'll see, they'd say. "
    "今天天气很好，我们一起去公园散步吧。他说这个问题很重要，我们要认真对待。你好，欢迎使用语音合成。"
    "今日はいい天気ですね。私は東京に住んでいます。ありがとうございます。"
    "El tiempo es muy bueno hoy y vamos a caminar por el parque. ¿Dónde está la estación? "
    "Le temps est beau aujourd'hui. Das Wetter ist heute schön. 오늘 날씨가 좋네요."
)


def _check(size: str) -> None:
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {list(SIZES)}")


def codec_section(size: str = "tiny") -> dict:
    """config.yaml's `semantic_codec:` section at `size`."""
    _check(size)
    return dict(TINY_CODEC if size == "tiny" else REAL_CODEC)


def codec_state(seed: int = 0, size: str = "tiny") -> dict[str, torch.Tensor]:
    """The codec's random state at `size` (what `codec.pth` holds under `model`)."""
    with torch.device("meta"):
        codec = Codec25(Codec25Config.from_dict(codec_section(size)))
    return random_state(codec, seed)


def write_codec(folder: str | Path, seed: int = 0, size: str = "tiny") -> str:
    """Writes `codec.pth` (`{"model": state}`, as upstream's checkpoints are) and the `semantic_codec`
    section into `folder/config.yaml` (created, or updated keeping its other sections); returns the
    state's `state_sha256`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = codec_state(seed, size)
    torch.save({"model": state}, folder / CODEC_FILE)
    config_path = folder / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else None
    config = dict(config or {})
    config["semantic_codec"] = codec_section(size)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return state_sha256(state)


def _byte_order() -> list[int]:
    """GPT-2's byte order: the printable Latin-1 bytes first, then the rest."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return printable + [b for b in range(256) if b not in printable]


def vocabulary_ranks(merges: int = MERGES, corpus: str = CORPUS) -> dict[bytes, int]:
    """256 byte tokens and `merges` merged tokens, each merge the most frequent adjacent pair in the
    corpus's words (ties: the smallest pair), ranked in the order learnt."""
    ranks = {bytes([b]): i for i, b in enumerate(_byte_order())}
    words = Counter(tuple(bytes([b]) for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\s\w]+|\s+", corpus))
    for _ in range(merges):
        pairs: Counter = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        joined = best[0] + best[1]
        ranks.setdefault(joined, len(ranks))
        merged: Counter = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return ranks


def write_vocabulary(folder: str | Path, merges: int = MERGES) -> Path:
    """`folder/multilingual_zh_ja_yue_char_del.tiktoken` in the released format (`<base64> <rank>` a line)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ranks = vocabulary_ranks(merges)
    path = folder / VOCAB_FILE
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in sorted(ranks.items(), key=lambda kv: kv[1])))
    return path
