"""OpenAI's names on koe's models: model aliases, voice names, and a speech body as a `SpeechRequest`.

Voices are looked up in this order: a library voice of that name, a preset speaker of the model,
then OpenAI's voice names, which mean:
- on a CustomVoice model, the preset speaker in `OPENAI_SPEAKERS` (or the model's first speaker);
- on a VoiceDesign model, the description in `OPENAI_DESIGNS` (unless `instructions` describes one);
- on a Base model, nothing: cloning needs a library voice (create one with POST /v1/audio/voices).
"""

from __future__ import annotations

from koe.service.errors import InvalidRequest
from koe.service.home import KoeHome
from koe.service.models import ModelDetails
from koe.service.plan import Planner
from koe.service.requests import SpeechRequest
from koe.server.schemas import SpeechBody

# OpenAI's model names; each means the configured default model.
OPENAI_MODELS = ("tts-1", "tts-1-hd", "gpt-4o-mini-tts")

# OpenAI voice -> Qwen3-TTS CustomVoice preset speaker.
OPENAI_SPEAKERS = {
    "alloy": "serena", "ash": "aiden", "ballad": "uncle_fu", "coral": "vivian", "echo": "ryan", "fable": "eric",
    "onyx": "uncle_fu", "nova": "sohee", "sage": "ono_anna", "shimmer": "vivian", "verse": "dylan",
    "marin": "serena", "cedar": "ryan",
}  # fmt: skip

# OpenAI voice -> a description for VoiceDesign models.
OPENAI_DESIGNS = {
    "alloy": "A balanced, neutral adult voice with a clear and even tone.",
    "ash": "A young adult male voice, relaxed and friendly, with a slightly husky tone.",
    "ballad": "A warm, expressive male voice with a gentle, storytelling cadence.",
    "coral": "A bright, cheerful female voice, clear and upbeat.",
    "echo": "A calm, steady male voice with a soft, resonant tone.",
    "fable": "An animated, narrative voice with lively expression, like a storyteller.",
    "onyx": "A deep, authoritative male voice, slow and resonant.",
    "nova": "A youthful, energetic female voice, crisp and bright.",
    "sage": "A calm, wise, measured voice with a soothing tone.",
    "shimmer": "A soft, airy female voice, gentle and light.",
    "verse": "A versatile, expressive voice with a natural conversational rhythm.",
    "marin": "A natural, warm female voice with a conversational tone.",
    "cedar": "A natural, grounded male voice with a relaxed conversational tone.",
}


def model_name(requested: str, home: KoeHome) -> str | None:
    """The store name a request's `model` means (None: the default); only installed names are
    accepted, so a client can never make the server load an arbitrary folder."""
    name = requested.strip()
    if name.lower() in OPENAI_MODELS or not name:
        return None
    if "/" in name or "\\" in name or name.startswith((".", "~")):
        raise InvalidRequest(f"model {requested!r}: give an installed model's name, not a path", param="model")
    return home.models.get(name).ref.name  # NotFound lists the installed models


def speech_request(body: SpeechBody, home: KoeHome, planner: Planner) -> SpeechRequest:
    """The service request for an OpenAI speech body, with the voice resolved as described above."""
    model = model_name(body.model, home)
    request = SpeechRequest(
        text=body.input, model=model, instruct=body.instructions, language=body.language, seed=body.seed,
        sampling=body.sampling(), speed=body.speed, format=body.response_format, save=False,
    )  # fmt: skip
    voice = body.voice_name.strip()
    if not voice:
        raise InvalidRequest("voice is empty: name a library voice, a preset speaker or an OpenAI voice", param="voice")
    details = planner.details(home.models.resolve(model, home.settings.models.default))
    alias = voice.lower()
    if home.voices.exists(voice) or alias in details.speakers or alias not in OPENAI_SPEAKERS:
        request.voice = voice  # the planner reports unknown voices with what there is
        return request
    _apply_alias(request, alias, details)
    return request


def _apply_alias(request: SpeechRequest, alias: str, details: ModelDetails) -> None:
    variant = details.ref.variant
    if variant == "custom_voice":
        speaker = OPENAI_SPEAKERS[alias]
        request.speaker = speaker if speaker in details.speakers else (details.speakers[0] if details.speakers else speaker)
    elif variant == "voice_design":
        if not request.instruct:
            request.design = OPENAI_DESIGNS[alias]
    else:
        raise InvalidRequest(
            f"OpenAI voice {alias!r} has no meaning on {details.ref.name!r}, a Base (voice cloning) model: "
            "use a library voice (POST /v1/audio/voices creates one)",
            param="voice",
        )
