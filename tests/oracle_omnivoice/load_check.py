"""Upstream loads an OmniVoice folder: the strict key check of `common.load`, and what it built.

Job: {"model": folder}. Info: {"keys": {...}, "sampling_rate", "frame_rate", "hop_length",
"num_quantizers", "llm_class", "attn_implementation", "vocab_size", "marker_ids": {marker: id}}.
"""

from __future__ import annotations

from common import load, read_job, write_results

MARKERS = ("<|denoise|>", "<|lang_start|>", "<|lang_end|>", "<|instruct_start|>", "<|instruct_end|>", "<|text_start|>", "<|text_end|>")

job, out = read_job()
model, report = load(job["model"])
tok = model.text_tokenizer
info = {
    "keys": report,
    "sampling_rate": model.sampling_rate,
    "frame_rate": model.audio_tokenizer.config.frame_rate,
    "hop_length": model.audio_tokenizer.config.hop_length,
    "num_quantizers": model.audio_tokenizer.config.num_quantizers,
    "llm_class": type(model.llm).__name__,
    "attn_implementation": model.llm.config._attn_implementation,
    "vocab_size": len(tok),
    "marker_ids": {m: tok.convert_tokens_to_ids(m) for m in MARKERS},
}
write_results(out, {}, info)
