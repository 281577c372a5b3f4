"""Qwen3-TTS 12 Hz speech tokenizer (codec): codes <-> 24 kHz waveform, bit-exact with upstream."""

from .config import CodecConfigError, DecoderConfig, EncoderConfig, SpeechTokenizerConfig
from .decoder import CHUNK_FRAMES, LEFT_CONTEXT_FRAMES, SpeechDecoder, chunk_plan
from .encoder import SpeechEncoder
from .tokenizer import SpeechTokenizer, SpeechTokenizerModel, WeightsError

__all__ = [
    "CHUNK_FRAMES",
    "LEFT_CONTEXT_FRAMES",
    "CodecConfigError",
    "DecoderConfig",
    "EncoderConfig",
    "SpeechDecoder",
    "SpeechEncoder",
    "SpeechTokenizer",
    "SpeechTokenizerConfig",
    "SpeechTokenizerModel",
    "WeightsError",
    "chunk_plan",
]
