"""Upstream's text tokenizer: `configs["get_tokenizer"]()` of a folder's yaml (`get_qwen_tokenizer`
on its CosyVoice-BlankEN, the version's special tokens added), encoding as the front end does
(`tokenizer.encode(text, allowed_special=...)`) and decoding as upstream's `decode` does.

Job: {"folders": [...], "texts": [...]}. Writes, per folder, the ids of each text, the decoded text
of those ids, and the tokenizer's size.
"""

from __future__ import annotations

from common import read_configs, read_job, write_results


def main() -> None:
    job, out = read_job()
    found = []
    for folder in job["folders"]:
        configs, version = read_configs(folder)
        tokenizer = configs["get_tokenizer"]()
        ids = [tokenizer.encode(text, allowed_special=configs["allowed_special"]) for text in job["texts"]]
        found.append({"version": version, "ids": ids, "decoded": [tokenizer.decode(i) for i in ids], "size": len(tokenizer.tokenizer)})
    write_results(out, {}, {"folders": found})


if __name__ == "__main__":
    main()
