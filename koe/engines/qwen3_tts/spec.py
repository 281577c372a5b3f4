"""Qwen3-TTS (12 Hz) without loading it: which folders are ours, what they can do, OpenAI voice names.

Torch-free: reads `config.json`, `generation_config.json` and `speech_tokenizer/config.json` only.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, DESIGN, PRESET, Capabilities, Option, OptionsSchema
from koe.engines.licenses import APACHE_2_0
from koe.engines.spec import ModelDescription, ModelInfo, ReleasedModel, VoiceAlias, folder_config, has_random_weights, read_json, safetensors_dtype

FAMILY = "qwen3_tts"
LICENSE = APACHE_2_0  # the released checkpoints' (Qwen/Qwen3-TTS-12Hz-*)
FRAME_RATE = 12.5  # codec frames per second of audio
VARIANTS = ("custom_voice", "voice_design", "base")
REQUIRED_FILES = ("config.json", "vocab.json", "merges.txt", "speech_tokenizer/config.json", "speech_tokenizer/model.safetensors")
USES = {
    "custom_voice": "preset speakers (--speaker), style instructions (--instruct)",
    "voice_design": "voices described in words (--design / --instruct)",
    "base": "voice cloning from a reference clip (--voice NAME or --ref clip.wav)",
}
VOICE_MODES = {"custom_voice": {PRESET}, "voice_design": {DESIGN}, "base": {CLONE, CLONE_WITHOUT_TRANSCRIPT}}
# upstream's defaults where generation_config.json leaves a value out
GENERATION_DEFAULTS = {
    "do_sample": True,
    "top_k": 50,
    "top_p": 1.0,
    "temperature": 0.9,
    "repetition_penalty": 1.05,
    "subtalker_dosample": True,
    "subtalker_top_k": 50,
    "subtalker_top_p": 1.0,
    "subtalker_temperature": 0.9,
    "max_new_tokens": 2048,
}

# OpenAI voice -> CustomVoice preset speaker.
OPENAI_SPEAKERS = {
    "alloy": "serena",
    "ash": "aiden",
    "ballad": "uncle_fu",
    "coral": "vivian",
    "echo": "ryan",
    "fable": "eric",
    "onyx": "uncle_fu",
    "nova": "sohee",
    "sage": "ono_anna",
    "shimmer": "vivian",
    "verse": "dylan",
    "marin": "serena",
    "cedar": "ryan",
}

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


PRECISIONS = ("fp32", "bf16", "int8", "int4")  # koe.runtime.precision: the talker declares its linears and norms (talker.backbone)


MAX_REF_PAD_SECONDS = 2.0
# Opt-in, Base models: silence appended to the reference clip before it is encoded, so the prompt's
# last codec frames are silence and the clip's last phoneme does not bleed into the start of the
# generated speech (faster-qwen3-tts appends 0.5 s). It changes the prompt, so the bits: off by default.
REF_PAD = Option(
    "ref_pad_seconds",
    "float",
    "cloning: seconds of silence appended to the reference before it is encoded "
    "(0.5 keeps its last phoneme out of the speech; changes the output, so 0 = off, as upstream)",
    0.0,
    low=0,
    high=MAX_REF_PAD_SECONDS,
)


def options_schema(defaults: dict, variant: str | None = None) -> OptionsSchema:
    """The sampling options, with this model's defaults (and, on Base models, `ref_pad_seconds`).
    The talker draws each frame's first codebook; the sub-talker (code predictor) the other 15."""
    d = {**GENERATION_DEFAULTS, **{k: v for k, v in defaults.items() if k in GENERATION_DEFAULTS}}
    clone = (REF_PAD,) if variant == "base" else ()
    return OptionsSchema(
        (
            Option("do_sample", "bool", "talker: sample (true) or take the likeliest code (false)", d["do_sample"]),
            Option("temperature", "float", "talker sampling temperature", d["temperature"], low=0, low_open=True),
            Option("top_k", "int", "talker top-k (0 = off)", d["top_k"], low=0),
            Option("top_p", "float", "talker nucleus top-p", d["top_p"], low=0, high=1, low_open=True),
            Option("repetition_penalty", "float", "talker repetition penalty", d["repetition_penalty"], low=0, low_open=True),
            Option("max_new_tokens", "int", f"cap on codec frames per segment ({FRAME_RATE:g} a second)", d["max_new_tokens"], low=2),
            Option("subtalker_dosample", "bool", "code predictor: sample or greedy", d["subtalker_dosample"]),
            Option("subtalker_temperature", "float", "code predictor temperature", d["subtalker_temperature"], low=0, low_open=True),
            Option("subtalker_top_k", "int", "code predictor top-k (0 = off)", d["subtalker_top_k"], low=0),
            Option("subtalker_top_p", "float", "code predictor top-p", d["subtalker_top_p"], low=0, high=1, low_open=True),
            Option(
                "non_streaming_mode",
                "bool",
                "feed the whole text before the first frame (default: as upstream, true for CustomVoice/VoiceDesign, false for Base)",
                None,
                null="false: the text fed along, as upstream's non_streaming_mode=None (it tests the flag's truth)",
            ),
            *clone,
        )
    )


def drops_instruct(variant: str, size: str) -> bool:
    """Upstream ignores instructions on the 0.6B CustomVoice model (it tests `size in "0b6"`)."""
    return variant == "custom_voice" and size in "0b6"


def capabilities(variant: str, size: str, speakers, languages, sample_rate: int, defaults: dict) -> Capabilities:
    """Capabilities from config values (shared by `describe` and the loaded engine)."""
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset(VOICE_MODES.get(variant, set())),
        languages=tuple(languages),
        sample_rate=int(sample_rate),
        speakers=tuple(speakers),
        instruct=variant == "voice_design" or (variant == "custom_voice" and not drops_instruct(variant, size)),
        stream_step_s=1 / FRAME_RATE,
        native_speed=False,
        batch=True,
        batch_stream=True,
        options=options_schema(defaults, variant),
        training=("speaker",) if variant == "base" and size != "0b6" else (),
        min_reference_s=1.0,
        precisions=PRECISIONS,
        length_option="max_new_tokens",
        voice_options=OptionsSchema((REF_PAD,) if variant == "base" else ()),  # a Base prompt's padding (`prepare_voice(..., ref_pad_seconds=)`)
    )


class QwenSpec:
    family = FAMILY
    title = "Qwen3-TTS 12 Hz"
    engine = "koe.engines.qwen3_tts.engine:Qwen3TTSEngine"
    native = "koe.engines.qwen3_tts.native:Qwen3TTS"  # what koe.load returns: batches of texts, stream in frames (koe.engines.native)
    trainers = {"speaker": "koe.engines.qwen3_tts.finetune.run:train_speaker"}  # Base 1.7B (see finetune/run.py check_base)
    fixture = "koe.engines.qwen3_tts.fixtures:write_random_model"
    demo_fixture = "koe.engines.qwen3_tts.fixtures:write_demo_model"  # the released vocabulary where installed, else a synthetic one
    bench = "koe.engines.qwen3_tts.bench:BENCH"  # what `koe bench --family qwen3_tts` runs (koe.engines.benchmark)
    oracle = "koe.engines.qwen3_tts.oracle:ORACLE"  # the upstream package its parity tests compare against (koe.engines.oracle)
    fixture_variants = VARIANTS
    released = tuple(
        ReleasedModel(f"Qwen/Qwen3-TTS-12Hz-{size}-{name}", variant, tag, license=LICENSE)
        for size, tag, name, variant in (
            ("0.6B", "0b6", "CustomVoice", "custom_voice"),
            ("0.6B", "0b6", "Base", "base"),
            ("1.7B", "1b7", "CustomVoice", "custom_voice"),
            ("1.7B", "1b7", "VoiceDesign", "voice_design"),
            ("1.7B", "1b7", "Base", "base"),
        )
    )

    def probe(self, folder: Path) -> ModelInfo | None:
        cfg = folder_config(folder)
        if cfg is None:
            return None
        if cfg.get("model_type") != "qwen3_tts" and "tts_model_type" not in cfg:
            return None
        return ModelInfo(FAMILY, str(cfg.get("tts_model_type")), str(cfg.get("tts_model_size", "")))

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        cfg = read_json(folder / "config.json")
        info = ModelInfo(FAMILY, str(cfg.get("tts_model_type")), str(cfg.get("tts_model_size", "")))
        talker = cfg.get("talker_config") or {}
        speakers = sorted(k.lower() for k in (talker.get("spk_id") or {}))
        languages = ["auto", *sorted(k.lower() for k in (talker.get("codec_language_id") or {}) if "dialect" not in k.lower())]
        gen_path = folder / "generation_config.json"
        defaults = read_json(gen_path) if gen_path.is_file() else {}
        codec_path = folder / "speech_tokenizer" / "config.json"
        codec = read_json(codec_path) if codec_path.is_file() else {}
        weights = tuple(sorted(folder.glob("model*.safetensors")))
        missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
        if not weights:
            missing.append("model.safetensors")
        stored = str(cfg.get("torch_dtype") or (safetensors_dtype(weights[0]) if weights else None) or "float32")
        return ModelDescription(
            info=info,
            capabilities=capabilities(info.variant, info.size, speakers, languages, codec.get("output_sample_rate", 24000), defaults),
            required_files=REQUIRED_FILES,
            missing=tuple(missing),
            weight_files=weights + tuple(sorted((folder / "speech_tokenizer").glob("*.safetensors"))),
            stored_dtype=stored,
            uses=USES.get(info.variant, info.variant),
            extra={"size": info.size},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        name = name.lower()
        if PRESET in capabilities.voice_modes and name in OPENAI_SPEAKERS:
            speaker = OPENAI_SPEAKERS[name]
            return VoiceAlias(speaker=speaker if speaker in capabilities.speakers else (capabilities.speakers[0] if capabilities.speakers else speaker))
        if DESIGN in capabilities.voice_modes and name in OPENAI_DESIGNS:
            return VoiceAlias(design=OPENAI_DESIGNS[name])
        return None


SPEC = QwenSpec()
