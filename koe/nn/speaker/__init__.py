"""Speaker encoders: audio features -> a fixed-size speaker embedding."""

from .ecapa import SpeakerEncoder, SpeakerEncoderConfig

__all__ = ["SpeakerEncoder", "SpeakerEncoderConfig"]
