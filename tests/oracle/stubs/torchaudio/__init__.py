"""Stub: qwen-tts imports torchaudio at start-up only for its 25 Hz tokenizer, which koe's tests never use."""
