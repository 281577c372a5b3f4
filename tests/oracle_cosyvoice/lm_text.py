"""Upstream's text front end and tokenizer on folders' CosyVoice-BlankEN.

Tokenizer: `configs["get_tokenizer"]()` of each folder's yaml (`get_qwen_tokenizer`, the version's
special tokens added), encoding as the front end does (`tokenizer.encode(text,
allowed_special=...)`) and decoding as upstream's `decode` does.

Front end (on the first folder): `CosyVoiceFrontEnd.text_normalize` with wetext (0.1.8, its FSTs
in the wheel) and inflect as upstream loads them, and with no normaliser (upstream's fallback when
wetext cannot load; inflect is always there). The front end is made without its `__init__` (which
opens the ONNX models the text path never uses): the attributes `text_normalize` reads are set as
`__init__` sets them.

Job: {"folders": [...], "texts": [...], "front_texts": [...]}. Writes, per folder, the ids of each
text, the decoded text of those ids and the tokenizer's size; per front end ("wetext", "none"),
each front text's pieces (split=True) and normalised text (split=False); and what the normalisers
gave for the calls the front end made ("zh", "en": stripped text -> normalised; "number": digit
run -> words), so koe's side can be given the same normalisers' outputs.
"""

from __future__ import annotations

import inflect
from common import read_configs, read_job, write_results
from cosyvoice.cli.frontend import CosyVoiceFrontEnd
from wetext import Normalizer


class _Recording:
    def __init__(self, fn, log: dict):
        self.fn, self.log = fn, log

    def __call__(self, text):
        self.log[text] = self.fn(text)
        return self.log[text]


def front_ends(configs, tokenizer, texts: list[str]) -> tuple[dict, dict]:
    calls: dict[str, dict] = {"zh": {}, "en": {}, "number": {}}
    number = _Recording(inflect.engine().number_to_words, calls["number"])
    zh, en = _Recording(Normalizer(remove_erhua=False).normalize, calls["zh"]), _Recording(Normalizer().normalize, calls["en"])
    found = {}
    for name in ("wetext", "none"):
        front = CosyVoiceFrontEnd.__new__(CosyVoiceFrontEnd)
        front.tokenizer = tokenizer
        front.allowed_special = configs["allowed_special"]
        front.inflect_parser = type("Parser", (), {"number_to_words": staticmethod(number)})()
        front.text_frontend = "wetext" if name == "wetext" else ""
        front.zh_tn_model = type("Zh", (), {"normalize": staticmethod(zh)})()
        front.en_tn_model = type("En", (), {"normalize": staticmethod(en)})()
        results = []
        for text in texts:
            try:
                results.append({"pieces": front.text_normalize(text, split=True), "text": front.text_normalize(text, split=False)})
            except Exception as e:  # noqa: BLE001 - upstream's own failures are part of what is compared
                results.append({"error": f"{type(e).__name__}: {e}"})
        found[name] = results
    return found, calls


def main() -> None:
    job, out = read_job()
    found, front = [], {}
    for f, folder in enumerate(job["folders"]):
        configs, version = read_configs(folder)
        tokenizer = configs["get_tokenizer"]()
        ids = [tokenizer.encode(text, allowed_special=configs["allowed_special"]) for text in job["texts"]]
        found.append({"version": version, "ids": ids, "decoded": [tokenizer.decode(i) for i in ids], "size": len(tokenizer.tokenizer)})
        if f == 0:
            front["front_ends"], front["calls"] = front_ends(configs, tokenizer, job["front_texts"])
    write_results(out, {}, {"folders": found, **front})


if __name__ == "__main__":
    main()
