"""koe's service layer: settings, storage, voice library, model store, encoding and the synthesizer.

Torch-free at import. The CLI and the HTTP server are thin shells over these names:

    home = KoeHome(load_settings())                  # KOE_HOME: koe.db, models/, voices/, outputs/
    synth = Synthesizer(home)                        # model cache + request planning
    out = synth.speak(SpeechRequest(text="Hi", model="my-model", format="mp3"))
    for chunk in synth.stream(SpeechRequest(...), cancel=token): send(chunk.data)
"""

from koe.service.config.settings import Settings, load_settings
from koe.service.errors import (
    AlreadyExists,
    Busy,
    ConfigError,
    InvalidRequest,
    KoeError,
    NotFound,
    PayloadTooLarge,
    RequestCancelled,
    StorageError,
    Unavailable,
)
from koe.service.home import KoeHome
from koe.service.names import check_name
from koe.service.store.models import ModelDetails, ModelRef, ModelStore
from koe.service.synthesis.encode import FORMATS, AudioFormat, EncodedAudio, StreamEncoder, encode_audio, format_for_path, get_format
from koe.service.synthesis.plan import SpeechPlan
from koe.service.synthesis.requests import SpeechOutput, SpeechRequest, StreamChunk
from koe.service.synthesis.synthesizer import Synthesizer
from koe.service.synthesis.tempo import TempoChanger, change_speed
from koe.service.voices.library import Voice, VoiceLibrary

__all__ = [
    "FORMATS",
    "AlreadyExists",
    "AudioFormat",
    "Busy",
    "ConfigError",
    "EncodedAudio",
    "InvalidRequest",
    "KoeError",
    "KoeHome",
    "ModelDetails",
    "ModelRef",
    "ModelStore",
    "NotFound",
    "PayloadTooLarge",
    "RequestCancelled",
    "Settings",
    "SpeechOutput",
    "SpeechPlan",
    "SpeechRequest",
    "StorageError",
    "StreamChunk",
    "StreamEncoder",
    "Synthesizer",
    "TempoChanger",
    "Unavailable",
    "Voice",
    "VoiceLibrary",
    "change_speed",
    "check_name",
    "encode_audio",
    "format_for_path",
    "get_format",
    "load_settings",
]
