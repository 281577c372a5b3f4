"""Upstream VoxCPM's text token ids: job {"model": folder, "texts": [...]} -> info {"ids": [[...], ...]}.

Builds only upstream's tokenizer, as `VoxCPMModel.from_local` / `VoxCPM2Model.from_local` do
(`LlamaTokenizerFast.from_pretrained(folder)`, wrapped by
`voxcpm.model.utils.mask_multichar_chinese_tokens`), without loading a model, and records
`text_tokenizer(text)` for each text. A text whose tokenization raises is recorded as
{"error": type name, "message": ...} in its place. Also reports `len(tokenizer)`, the
tokenizer's class and what `tokenize` gives before the Chinese split, for diagnosis.

(Not named tokenize.py: a script's folder is first on sys.path, and it would shadow the
standard library's `tokenize`, which transformers imports through `inspect`.)
"""

from __future__ import annotations

from common import read_job, write_results
from transformers import LlamaTokenizerFast
from voxcpm.model.utils import mask_multichar_chinese_tokens


def main() -> None:
    job, out = read_job()
    base = LlamaTokenizerFast.from_pretrained(job["model"])
    wrapped = mask_multichar_chinese_tokens(base)
    ids, tokens = [], []
    for text in job["texts"]:
        try:
            ids.append(wrapped(text))
            tokens.append(base.tokenize(text))
        except Exception as e:  # recorded, so a test can compare koe's error with upstream's
            ids.append({"error": type(e).__name__, "message": str(e)})
            tokens.append(None)
    info = {
        "ids": ids,
        "tokens": tokens,
        "len": len(base),
        "vocab_size": base.vocab_size,
        "class": type(base).__name__,
        "multichar_tokens": sorted(wrapped.multichar_tokens),
    }
    write_results(out, {}, info)


if __name__ == "__main__":
    main()
