"""Upstream's text tokenizer (the folder's, as `OmniVoice.from_pretrained` loads it) on strings.

Job: {"model": folder, "texts": [...], "special": bool}: each text through
`tokenizer(text, add_special_tokens=special).input_ids`. Info: {"ids": [[...], ...], "class"}.
"""

from __future__ import annotations

from common import read_job, write_results
from transformers import AutoTokenizer

job, out = read_job()
tok = AutoTokenizer.from_pretrained(job["model"])
special = bool(job.get("special", True))
write_results(out, {}, {"ids": [tok(t, add_special_tokens=special).input_ids for t in job["texts"]], "class": type(tok).__name__})
