"""The `english` golden, upstream's side: GPT-SoVITS v2's English front end (`text/english.py`,
`text/cleaner.py:clean_text`, `cleaned_text_to_sequence`) on koe's corpus.

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_gpt_sovits/golden_english.py <folder> <out.npz>
`folder` holds what tests/engines/gpt_sovits/golden_english.py `write_inputs` wrote; upstream's
`text` package runs from a copy, with the stand-in tagger (text_oracle.py).

Recorded: `tagger.state_sha256` (the tagger files' hash, as the inputs recorded it),
`dictionaries.state_sha256` (upstream's cmudict.rep, cmudict-fast.rep, engdict-hot.rep, hashed
here from its own files), `names.state_sha256` (its namedict_cache.pickle's entries as `name
PHONEMES` lines); `symbols.v1` / `symbols.v2`; per sentence `i`: `en.<i>.norm`
(`text_normalize`), `en.<i>.g2p` (`english.g2p`), `<version>.<i>.phones`, `.ids`, `.norm`
(`clean_text` for v2 and v1, then `cleaned_text_to_sequence`), or `en.<i>.error` (the exception's
type name, when upstream fails on it); per word `word.<i>` (`_g2p.qryword`), per OOV word `oov.<i>`
(`_g2p.predict`), per tagged sentence `tagged.<i>.tokens` / `.tags` (`word_tokenize`, `pos_tag`);
`fuzz.norm` / `fuzz.g2p` (per random string: `text_normalize`, or `!error <type>`, and `g2p`'s
phonemes joined by spaces).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from text_oracle import use_upstream_text


def strings(items) -> np.ndarray:
    return np.array(list(items), dtype=str) if len(items) else np.zeros((0,), dtype="<U1")


def main(folder: Path, out: Path) -> None:
    corpus = json.loads((folder / "corpus.json").read_text(encoding="utf-8"))
    source = use_upstream_text(folder)

    import text.english as english
    from text import cleaned_text_to_sequence, symbols, symbols2
    from text.cleaner import clean_text

    result: dict[str, np.ndarray] = {}
    recorded = dict(line.split() for line in (folder / "state_sha256.txt").read_text().splitlines() if line.strip())
    result["tagger.state_sha256"] = np.array(recorded["tagger"])
    h = hashlib.sha256()
    for name in corpus["dictionaries"]:
        h.update((source / name.removesuffix(".gz")).read_bytes())
    result["dictionaries.state_sha256"] = np.array(h.hexdigest())
    names = english.get_namedict()
    result["names.state_sha256"] = np.array(hashlib.sha256("".join(f"{k} {' '.join(v[0])}\n" for k, v in names.items()).encode()).hexdigest())
    result["symbols.v1"] = strings(symbols.symbols)
    result["symbols.v2"] = strings(symbols2.symbols)

    for i, sentence in enumerate(corpus["sentences"]):
        try:
            norm = english.text_normalize(sentence)
            result[f"en.{i}.norm"] = np.array(norm)
            result[f"en.{i}.g2p"] = strings(english.g2p(norm))
            for version in ("v2", "v1"):
                phones, word2ph, norm_text = clean_text(sentence, "en", version)
                assert word2ph is None
                result[f"{version}.{i}.phones"] = strings(phones)
                result[f"{version}.{i}.ids"] = np.array(cleaned_text_to_sequence(phones, version), dtype=np.int64)
                result[f"{version}.{i}.norm"] = np.array(norm_text)
        except Exception as e:  # upstream fails on some inputs: koe must fail on them too
            for key in [k for k in result if k.startswith((f"en.{i}.", f"v2.{i}.", f"v1.{i}."))]:
                del result[key]
            result[f"en.{i}.error"] = np.array(type(e).__name__)
    norms, phones = [], []
    for text in corpus["fuzz"]:
        try:
            norm = english.text_normalize(text)
            norms.append(norm)
            phones.append(" ".join(english.g2p(norm)))
        except Exception as e:
            norms.append(f"!error {type(e).__name__}")
            phones.append("")
    result["fuzz.norm"], result["fuzz.g2p"] = strings(norms), strings(phones)
    g2p = english._g2p
    for i, word in enumerate(corpus["words"]):
        result[f"word.{i}"] = strings(g2p.qryword(word))
    for i, word in enumerate(corpus["oov"]):
        result[f"oov.{i}"] = strings(g2p.predict(word))
    for i, sentence in enumerate(corpus["tagged"]):
        tagged = english.pos_tag(english.word_tokenize(sentence))
        result[f"tagged.{i}.tokens"] = strings([w for w, _ in tagged])
        result[f"tagged.{i}.tags"] = strings([t for _, t in tagged])
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
