"""OmniVoice without loading it: which folders are ours, what they can do.

Torch-free: reads `config.json` (`model_type` "omnivoice" with a Qwen3 `llm_config`),
`audio_tokenizer/config.json` and file names. A release folder is what the hub repo
`k2-fsa/OmniVoice` holds: `config.json`, `model.safetensors`, the Qwen text tokenizer files and
the HiggsAudio-v2 audio tokenizer in `audio_tokenizer/`; `koe models pull k2-fsa/OmniVoice`
fetches those files.

One variant, "OmniVoice" (a Qwen3-0.6B backbone run bidirectionally over 8 audio codebooks, 24 kHz
out): the model's own voice, a voice designed from upstream's vocabulary of items (gender, age,
pitch, whisper, English accents, Chinese dialects), or a clone of a clip and its transcript; 646
languages by name or ISO 639 code.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE, DESIGN, NO_VOICE, Capabilities, Option, OptionsSchema
from koe.engines.licenses import APACHE_2_0
from koe.engines.spec import HubFiles, ModelDescription, ModelInfo, ReleasedModel, SpecError, VoiceAlias, folder_config, has_random_weights, safetensors_dtype
from koe.runtime.files import read_json_object

FAMILY = "omnivoice"
LICENSE = APACHE_2_0  # the released checkpoint's (k2-fsa/OmniVoice)
VARIANT = "OmniVoice"
SIZE = "0.6B"
REPO = "k2-fsa/OmniVoice"
SAMPLE_RATE = 24000
FRAME_RATE = 25  # audio frames per second (24 kHz / hop 960)
MIN_REFERENCE_S = 0.5
TEXT_FILES = ("tokenizer.json", "tokenizer_config.json")
AUDIO_TOKENIZER_FILES = ("audio_tokenizer/config.json", "audio_tokenizer/model.safetensors", "audio_tokenizer/preprocessor_config.json")
REQUIRED_FILES = ("config.json", "model.safetensors", *TEXT_FILES, *AUDIO_TOKENIZER_FILES)

# upstream's defaults (`OmniVoiceGenerationConfig`, and `generate`'s own speed / duration / normalize_text)
DEFAULTS = {
    "num_step": 32,
    "guidance_scale": 2.0,
    "t_shift": 0.1,
    "layer_penalty_factor": 5.0,
    "position_temperature": 5.0,
    "class_temperature": 0.0,
    "speed": 1.0,
    "duration": None,
    "denoise": True,
    "postprocess_output": True,
    "pad_duration": 0.1,
    "fade_duration": 0.1,
    "audio_chunk_duration": 15.0,
    "audio_chunk_threshold": 30.0,
    "normalize_text": False,
}
MAX_DURATION_S = 600.0  # the longest speech one request asks for (duration, and the estimate over speed)


def options_schema() -> OptionsSchema:
    d = DEFAULTS
    return OptionsSchema(
        (
            Option(
                "num_step", "int", "unmasking steps (one pass of the backbone each); fewer is faster, 32 and 16 are the usual", d["num_step"], low=1, high=1000
            ),
            Option("guidance_scale", "float", "classifier-free guidance (0: the conditional row alone)", d["guidance_scale"], low=0, high=100),
            Option(
                "t_shift", "float", "shift of the step schedule (smaller unmasks fewer tokens in the first steps)", d["t_shift"], low=0, low_open=True, high=100
            ),
            Option(
                "layer_penalty_factor",
                "float",
                "penalty per codebook index when choosing positions (earlier codebooks unmask first)",
                d["layer_penalty_factor"],
                low=0,
                high=100,
            ),
            Option(
                "position_temperature",
                "float",
                "Gumbel temperature of the positions unmasked each step (0: the best)",
                d["position_temperature"],
                low=0,
                high=100,
            ),
            Option("class_temperature", "float", "Gumbel temperature of the tokens (0: the most likely)", d["class_temperature"], low=0, high=100),
            Option("speed", "float", "speaking rate of the model itself (divides the estimated length)", d["speed"], low=0, low_open=True, high=10),
            Option("duration", "float", "seconds of speech (instead of the estimate; overrides speed)", None, low=0, low_open=True, high=MAX_DURATION_S),
            Option("denoise", "bool", "the <|denoise|> marker in a cloned voice's prompt (cleaner speech than the clip)", d["denoise"]),
            Option("postprocess_output", "bool", "cut long silences of the output (and trim its edges)", d["postprocess_output"]),
            Option("pad_duration", "float", "seconds of silence added at each end", d["pad_duration"], low=0, high=10),
            Option("fade_duration", "float", "seconds of linear fade at each end", d["fade_duration"], low=0, high=10),
            Option(
                "audio_chunk_duration",
                "float",
                "seconds of speech per chunk of a long text",
                d["audio_chunk_duration"],
                low=0,
                low_open=True,
                high=MAX_DURATION_S,
            ),
            Option(
                "audio_chunk_threshold",
                "float",
                "estimated seconds above which a text is spoken in chunks",
                d["audio_chunk_threshold"],
                low=0,
                high=MAX_DURATION_S,
            ),
            Option("normalize_text", "bool", "upstream's text normalisation (numbers, dates): not supported yet", d["normalize_text"]),
        )
    )


def voice_options() -> OptionsSchema:
    """What a prepared prompt takes (`prepare_voice(clip, text, preprocess_prompt=False)`)."""
    return OptionsSchema(
        (Option("preprocess_prompt", "bool", "cut the clip's long pauses and edges, and end its transcript with punctuation", True),),
    )


PRECISIONS = ("fp32", "bf16")


def languages() -> tuple[str, ...]:
    """ "auto" (no language in the prompt), then the model's language names (codes are taken too)."""
    from koe.engines.omnivoice.languages import language_names

    return ("auto", *sorted(language_names()))


def capabilities(variant: str = VARIANT) -> Capabilities:
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset({NO_VOICE, DESIGN, CLONE}),
        languages=languages(),
        sample_rate=SAMPLE_RATE,
        instruct=False,
        stream_step_s=DEFAULTS["audio_chunk_duration"],  # one streamed piece per text chunk of a long text
        native_speed=True,
        batch=False,
        options=options_schema(),
        voice_options=voice_options(),
        training=("finetune",),  # `koe train finetune` (finetune/)
        min_reference_s=MIN_REFERENCE_S,
        stream_is_one_shot=False,
        precisions=PRECISIONS,
    )


def _config(folder: Path) -> dict | None:
    raw = folder_config(folder)
    return raw if raw is not None and raw.get("model_type") == FAMILY else None


# OpenAI's voice names as designed voices (upstream's vocabulary: gender, age, pitch, accent)
OPENAI_DESIGNS = {
    "alloy": "female, young adult, moderate pitch",
    "ash": "male, young adult, low pitch",
    "ballad": "male, middle-aged, moderate pitch",
    "coral": "female, young adult, high pitch",
    "echo": "male, middle-aged, low pitch",
    "fable": "male, young adult, moderate pitch, british accent",
    "onyx": "male, middle-aged, very low pitch",
    "nova": "female, teenager, high pitch",
    "sage": "female, middle-aged, low pitch",
    "shimmer": "female, young adult, moderate pitch, whisper",
    "verse": "male, young adult, high pitch",
    "marin": "female, middle-aged, moderate pitch",
    "cedar": "male, elderly, low pitch",
}


class OmniVoiceSpec:
    family = FAMILY
    title = "OmniVoice"
    engine = "koe.engines.omnivoice.engine:OmniVoiceEngine"
    native = "koe.engines.omnivoice.native:OmniVoiceTTS"
    fixture = "koe.engines.omnivoice.fixtures:write_random_model"
    oracle = "koe.engines.omnivoice.oracle:ORACLE"  # the upstream package its parity tests compare against (koe.engines.oracle)
    bench = "koe.engines.omnivoice.bench:BENCH"  # what `koe bench --family omnivoice` runs (koe.engines.benchmark)
    fixture_variants = (VARIANT,)
    trainers = {"finetune": "koe.engines.omnivoice.finetune.run:train"}  # upstream's OmniTrainer recipe (finetune/)
    released = (ReleasedModel(REPO, VARIANT, SIZE, files=(HubFiles(REPO, REQUIRED_FILES),), name=VARIANT, license=LICENSE),)

    def probe(self, folder: Path) -> ModelInfo | None:
        return ModelInfo(FAMILY, VARIANT, SIZE) if _config(Path(folder)) is not None else None

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        raw = _config(folder)
        if raw is None:
            raise SpecError(f"{folder}: not an OmniVoice model (config.json with model_type 'omnivoice')")
        from koe.engines.omnivoice.config import ConfigError, parse_audio_tokenizer_config, parse_config

        try:
            cfg = parse_config(raw)
            tokenizer = folder / "audio_tokenizer" / "config.json"
            if tokenizer.is_file():
                parse_audio_tokenizer_config(read_json_object(tokenizer))
        except ConfigError as e:
            raise SpecError(f"{folder}: {e}") from e
        except ValueError as e:  # an unreadable audio_tokenizer/config.json
            raise SpecError(str(e)) from e
        missing = tuple(f for f in REQUIRED_FILES if not (folder / f).is_file())
        weights = tuple(folder / f for f in ("model.safetensors", "audio_tokenizer/model.safetensors") if (folder / f).is_file())
        stored = (safetensors_dtype(weights[0]) if weights else None) or str(raw.get("dtype") or "float32")
        return ModelDescription(
            info=ModelInfo(FAMILY, VARIANT, SIZE),
            capabilities=capabilities(),
            required_files=REQUIRED_FILES,
            missing=missing,
            weight_files=weights,
            stored_dtype=stored,
            uses=(
                'speech in the model\'s own voice, a designed voice (--instruct "female, low pitch, british accent"), '
                "or a clone of a clip and its transcript (--ref clip.wav --ref-text ...); 646 languages (--language)"
            ),
            extra={"backbone_layers": cfg.llm.num_hidden_layers, "hidden_size": cfg.llm.hidden_size, "codebooks": cfg.num_audio_codebook},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        name = name.lower()
        if DESIGN in capabilities.voice_modes and name in OPENAI_DESIGNS:
            return VoiceAlias(design=OPENAI_DESIGNS[name])
        return None


SPEC = OmniVoiceSpec()
