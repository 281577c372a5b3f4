"""Upstream's text front end: `CosyVoiceFrontEnd.text_normalize` on a folder's tokenizer, with
wetext (0.1.8, its FSTs in the wheel) and inflect as upstream loads them, and with no normaliser
(what upstream falls back to when wetext cannot load; inflect is always there).

The front end is made without its `__init__` (which opens the ONNX models the text path never
uses): the attributes `text_normalize` reads are set as `__init__` sets them.

Job: {"folder": ..., "texts": [...]}. Writes, per front end ("wetext", "none"), each text's pieces
(split=True) and normalised text (split=False); and what the normalisers gave for the calls the
front end made ("zh", "en": stripped text -> normalised; "number": digit run -> words), so koe's
side can be given the same normalisers' outputs.
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


def main() -> None:
    job, out = read_job()
    configs, _ = read_configs(job["folder"])
    calls: dict[str, dict] = {"zh": {}, "en": {}, "number": {}}
    parser = inflect.engine()
    recording_parser = type("Parser", (), {"number_to_words": staticmethod(_Recording(parser.number_to_words, calls["number"]))})()
    zh, en = Normalizer(remove_erhua=False), Normalizer()
    found = {}
    for name in ("wetext", "none"):
        front = CosyVoiceFrontEnd.__new__(CosyVoiceFrontEnd)
        front.tokenizer = configs["get_tokenizer"]()
        front.allowed_special = configs["allowed_special"]
        front.inflect_parser = recording_parser
        front.text_frontend = "wetext" if name == "wetext" else ""
        front.zh_tn_model = type("Zh", (), {"normalize": staticmethod(_Recording(zh.normalize, calls["zh"]))})()
        front.en_tn_model = type("En", (), {"normalize": staticmethod(_Recording(en.normalize, calls["en"]))})()
        results = []
        for text in job["texts"]:
            try:
                results.append({"pieces": front.text_normalize(text, split=True), "text": front.text_normalize(text, split=False)})
            except Exception as e:  # noqa: BLE001 - upstream's own failures are part of what is compared
                results.append({"error": f"{type(e).__name__}: {e}"})
        found[name] = results
    write_results(out, {}, {"front_ends": found, "calls": calls})


if __name__ == "__main__":
    main()
