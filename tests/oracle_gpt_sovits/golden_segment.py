"""The `segment` golden, upstream's side: GPT-SoVITS's text cutting methods and `split_big_text`
(`TTS_infer_pack/text_segmentation_method.py`), `TextPreprocessor`'s `pre_seg_text`,
`LangSegmenter.getTexts`, and for English texts `get_phones_and_bert` and `preprocess` (whose BERT
features are zeros for English: no BERT model is loaded).

Run in the oracle venv with upstream's source importable:
    <oracle python> tests/oracle_gpt_sovits/golden_segment.py <folder> <out.npz>
`folder` holds what tests/engines/gpt_sovits/golden_segment.py `write_inputs` wrote; upstream's
`text` package runs from a copy with the stand-in tagger, split-lang's fastText with the lite
model `folder/lid.176.ftz` (text_oracle.py).

Recorded: `tagger.state_sha256`, `langdetect.state_sha256` (hashed here from the model read);
`cut.<method>.<i>` (the method's output on cut text i), `big` (`split_big_text` of the long text);
`pre.<i>` (`pre_seg_text`'s sentences, or `pre.<i>.error`); `split.<default>.<i>.langs` / `.texts`
(`getTexts(text, default)`); `phones.<i>.ids` / `.norm` / `.bert_shape` (`get_phones_and_bert`);
`preprocess.<i>.<k>.ids` / `.norm` and `preprocess.<i>.count` (`preprocess`'s sentences);
`fuzz.split` / `fuzz.cut` / `fuzz.pre` (per random string, as JSON: `getTexts` without and with
"zh"; each method's cut; `pre_seg_text` per method for en then zh, or `!error <type>`).
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import numpy as np
from text_oracle import text_preprocessing, use_lite_langdetect, use_upstream_text


def strings(items) -> np.ndarray:
    return np.array(list(items), dtype=str) if len(items) else np.zeros((0,), dtype="<U1")


def main(folder: Path, out: Path) -> None:
    cases = json.loads((folder / "cases.json").read_text(encoding="utf-8"))
    source = use_upstream_text(folder)
    seg, TextPreprocessor = text_preprocessing(source)
    from text.LangSegmenter import LangSegmenter

    use_lite_langdetect(folder / "lid.176.ftz")  # after LangSegmenter's import, which sets its own
    result: dict[str, np.ndarray] = {}
    recorded = dict(line.split() for line in (folder / "state_sha256.txt").read_text().splitlines() if line.strip())
    result["tagger.state_sha256"] = np.array(recorded["tagger"])
    result["langdetect.state_sha256"] = np.array(hashlib.sha256((folder / "lid.176.ftz").read_bytes()).hexdigest())

    for method in cases["methods"]:
        for i, text in enumerate(cases["cut_texts"]):
            result[f"cut.{method}.{i}"] = np.array(seg.get_method(method)(text))
    result["big"] = strings(seg.split_big_text(cases["long"] * 3))

    pre = TextPreprocessor(None, None, "cpu")
    for i, (text, lang, method) in enumerate(cases["pre_segment"]):
        try:
            result[f"pre.{i}"] = strings(pre.pre_seg_text(text, lang, method))
        except Exception as e:
            result[f"pre.{i}.error"] = np.array(type(e).__name__)

    for default in cases["split_defaults"]:
        for i, text in enumerate(cases["mixed"]):
            pieces = LangSegmenter.getTexts(text, default) if default else LangSegmenter.getTexts(text)
            result[f"split.{default or 'none'}.{i}.langs"] = strings([p["lang"] for p in pieces])
            result[f"split.{default or 'none'}.{i}.texts"] = strings([p["text"] for p in pieces])

    for i, (text, language) in enumerate(cases["phones"]):
        phones, bert, norm_text = pre.get_phones_and_bert(text, language, "v2")
        result[f"phones.{i}.ids"] = np.array(phones, dtype=np.int64)
        result[f"phones.{i}.norm"] = np.array(norm_text)
        result[f"phones.{i}.bert_shape"] = np.array(bert.shape)

    for i, (text, lang, method) in enumerate(cases["preprocess"]):
        sentences = pre.preprocess(text, lang, method, "v2")
        result[f"preprocess.{i}.count"] = np.array(len(sentences))
        for k, s in enumerate(sentences):
            result[f"preprocess.{i}.{k}.ids"] = np.array(s["phones"], dtype=np.int64)
            result[f"preprocess.{i}.{k}.norm"] = np.array(s["norm_text"])
    fuzz = {"split": [], "cut": [], "pre": []}
    for text in cases["fuzz"]:
        splits = []
        for default in ("", "zh"):
            try:
                splits.append(LangSegmenter.getTexts(text, default))
            except Exception as e:  # split-lang fails on a text of blanks
                splits.append(f"!error {type(e).__name__}")
        fuzz["split"].append(json.dumps(splits, ensure_ascii=False))
        fuzz["cut"].append(json.dumps([seg.get_method(m)(text) for m in cases["methods"]], ensure_ascii=False))
        pres = []
        for method in cases["methods"]:
            for lang in ("en", "zh"):
                try:
                    pres.append(pre.pre_seg_text(text, lang, method))
                except Exception as e:
                    pres.append(f"!error {type(e).__name__}")
        fuzz["pre"].append(json.dumps(pres, ensure_ascii=False))
    for name, values in fuzz.items():
        result[f"fuzz.{name}"] = strings(values)
    out.parent.mkdir(parents=True, exist_ok=True)
    np.savez_compressed(out, **result)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
