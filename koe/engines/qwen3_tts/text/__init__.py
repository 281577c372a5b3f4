"""Qwen3-TTS's text: `tokenizer` reproduces upstream's byte-level BPE ids from a folder's vocab.json,
merges.txt and tokenizer_config.json; `vocab` writes those files into a random-weight folder (the
released Qwen vocabulary, or a synthetic one on a runtime-only install)."""
