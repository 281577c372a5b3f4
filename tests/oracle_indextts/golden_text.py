"""The `text` golden, upstream's side: IndexTTS's text front end on a corpus.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_indextts/golden_text.py <folder> <out.npz>
`folder` holds what tests/engines/indextts/golden_text.py `write_inputs` wrote. For each text `i`,
as `indextts/infer.py` (1.5: `TextNormalizer()`) and `infer_v2.py` (2: `TextNormalizer(
enable_glossary=True)` with the model's `glossary.yaml`) build their front end on Linux
(WeTextProcessing): `i.normalized` and `i.normalized_v2` (the normaliser alone), `i.tokens`
(`tokenizer.tokenize`), `i.tokens_v2`, `i.ids` (`convert_tokens_to_ids`), and for each segment
limit `m` the segments `split_segments(tokens, m)` as `i.seg{m}.tokens` (flat) and
`i.seg{m}.lengths` (a segment's ids are its tokens' ids), and with a quick first segment `i.seg{m}q{q}.*`.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

os.environ.setdefault("MKL_CBWR", "AUTO,STRICT")

import numpy as np  # noqa: E402
from indextts.utils.front import TextNormalizer, TextTokenizer  # noqa: E402


def strings(items: list[str]) -> np.ndarray:
    return np.array(items, dtype=str) if items else np.zeros(0, dtype="<U1")


def segments(tokenizer: TextTokenizer, tokens: list[str], limit: int, quick: int = 0) -> dict[str, np.ndarray]:
    segs = tokenizer.split_segments(tokens, limit, quick_streaming_tokens=quick)
    flat = [t for s in segs for t in s]
    return {
        "tokens": strings(flat),
        "lengths": np.array([len(s) for s in segs], dtype=np.int64),
    }


def main(folder: Path, out: Path) -> None:
    spec = json.loads((folder / "texts.json").read_text(encoding="utf-8"))
    bpe = str(folder / "bpe.model")
    v15 = TextNormalizer()
    v15.load()
    tokenizer = TextTokenizer(bpe, v15)
    v2 = TextNormalizer(enable_glossary=True)
    v2.load()
    assert v2.load_glossary_from_yaml(str(folder / "glossary.yaml"))
    tokenizer_v2 = TextTokenizer(bpe, v2)
    result: dict[str, np.ndarray] = {
        "state_sha256": np.array((folder / "state_sha256.txt").read_text().strip()),
        "vocab_size": np.array(tokenizer.vocab_size),
        "unk_id": np.array(tokenizer.unk_token_id),
        "count": np.array(len(spec["texts"])),
    }
    for i, text in enumerate(spec["texts"]):
        result[f"{i}.text"] = np.array(text)
        result[f"{i}.normalized"] = np.array(v15.normalize(text))
        result[f"{i}.normalized_v2"] = np.array(v2.normalize(text))
        tokens = tokenizer.tokenize(text)
        result[f"{i}.tokens"] = strings(tokens)
        result[f"{i}.tokens_v2"] = strings(tokenizer_v2.tokenize(text))
        result[f"{i}.ids"] = np.array(tokenizer.convert_tokens_to_ids(tokens), dtype=np.int64)
        for limit in spec["limits"]:
            for k, v in segments(tokenizer, tokens, limit).items():
                result[f"{i}.seg{limit}.{k}"] = v
        for limit, quick in spec["quick"]:
            for k, v in segments(tokenizer, tokens, limit, quick).items():
                result[f"{i}.seg{limit}q{quick}.{k}"] = v
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
