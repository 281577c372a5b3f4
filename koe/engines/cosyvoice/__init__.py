"""CosyVoice 2 and 3 (FunAudioLLM): a Qwen2-based speech-token LM, a flow-matching model (v2: an
upsampling conformer encoder and a causal CFM; v3: a DiT) and the HiFT vocoder, with CAM++ speaker
embeddings and the S3 speech tokenizer.

Under construction (issue 37): the parts and their parity tests, no engine or spec yet, so the
family is not registered; its oracle (`oracle.py`) is built and its parity tests run all the same
(`koe.engines.oracle`).
"""
