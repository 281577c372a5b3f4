"""Text front ends every family shares: what a request's text may hold (checks), segmenting it
into sentences (segment, abbreviations) and language names (language). A family's own tokenizer
lives in its family's folder (Qwen3-TTS's: koe.engines.qwen3_tts.text)."""
