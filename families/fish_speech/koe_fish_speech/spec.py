"""Fish Speech S2 without loading it: which folders are its releases, what they can do, what a pull fetches.

Torch-free: reads file names and `config.json`. A release folder is what the hub repo
`fishaudio/s2-pro` holds: `config.json` (`model_type` "fish_qwen3_omni": the slow transformer's
`text_config`, the fast one's `audio_decoder_config`), the weights (`model.safetensors`, or shards
with `model.safetensors.index.json`; the older `model.pth`), the tokenizer (`tokenizer.json`,
`tokenizer_config.json`: Qwen3's BPE with Fish's special and `<|semantic:N|>` tokens) and the codec
(`codec.pth`, a causal modded DAC at 44.1 kHz). `koe models pull fishaudio/s2-pro` fetches it whole.

S2 clones a voice from a clip with its transcript (upstream needs both), or speaks in a voice of its
own choosing without one; a text may hold several speakers' turns (`<|speaker:0|>Hi.<|speaker:1|>Hello.`).

Code and weights are under the Fish Audio Research License (research and non-commercial use; a
separate licence from Fish Audio for commercial use), which a user accepts once before the first pull.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE, NO_VOICE, Capabilities, Option, OptionsSchema
from koe.engines.licenses import License
from koe.engines.spec import ModelDescription, ModelInfo, ReleasedModel, SpecError, has_random_weights, read_json, safetensors_dtype

FAMILY = "fish_speech"
MODEL_TYPE = "fish_qwen3_omni"
REPO = "fishaudio/s2-pro"
VARIANT = "s2-pro"
SAMPLE_RATE = 44100
FRAME_RATE = SAMPLE_RATE / 2048  # codec frames a second (hop 512, then the quantizer's 2 x 2 downsampling)
MIN_REFERENCE_S = 1.0
MAX_REFERENCE_S = 60.0
LICENSE = License(
    "LicenseRef-Fish-Audio-Research-License-2026-03-07",
    "Fish Audio Research License",
    "https://github.com/fishaudio/fish-speech/blob/main/LICENSE",
    needs_acceptance=True,
    summary=(
        "Fish Speech's code and weights are for research and non-commercial use only; "
        "commercial use needs a separate licence from Fish Audio; keep the licence with every copy"
    ),
)
PRECISIONS = ("fp32", "bf16", "int8", "int4")  # fp32 and bf16: upstream's bits (its server engine's); int8 / int4: both transformers' layers quantized
CODEC_FILE = "codec.pth"
TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json")
WEIGHT_INDEX = "model.safetensors.index.json"

# Upstream's request defaults (its server's ServeTTSRequest, which its web page and API use), with
# the bounds it validates them against.
DEFAULTS = {
    "temperature": 0.8,
    "top_p": 0.8,
    "top_k": 30,
    "repetition_penalty": 1.1,
    "max_new_tokens": 1024,
    "chunk_length": 200,
    "stream_frames": False,
}


def options_schema() -> OptionsSchema:
    return OptionsSchema(
        (
            Option("temperature", "float", "sampling temperature of every code", 0.8, low=0.1, high=1.0),
            Option("top_p", "float", "sample among the likeliest codes that hold this much probability", 0.8, low=0.1, high=1.0),
            Option("top_k", "int", "sample among the k likeliest codes", 30, low=1, high=4096),
            Option(
                "repetition_penalty",
                "float",
                "accepted for upstream's API and, as upstream S2 does, not applied (its repetition-aware resampling is always on)",
                1.1,
                low=0.9,
                high=2.0,
            ),
            Option("max_new_tokens", "int", "at most this many frames (about 21.5 a second) per batch of text (0: up to the context)", 1024, low=0, high=32768),
            Option(
                "chunk_length",
                "int",
                "a dialogue's speaker turns are spoken in batches of at most this many UTF-8 bytes (and 5 turns)",
                200,
                low=100,
                high=1000,
            ),
            Option(
                "stream_frames",
                "bool",
                "a streamed request decodes its frames as they come, a chunk every chunk_s (koe's own; each sample within about 1e-6 "
                "of the one-shot's, which upstream's bits need the whole batch for); default: a chunk per batch, as upstream streams",
                False,
            ),
        )
    )


def capabilities(variant: str = VARIANT) -> Capabilities:
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset({CLONE, NO_VOICE}),
        languages=("auto",),
        sample_rate=SAMPLE_RATE,
        options=options_schema(),
        min_reference_s=MIN_REFERENCE_S,
        precisions=PRECISIONS,
        length_option="max_new_tokens",
    )


def read_config(folder: Path) -> dict:
    """`config.json` of an S2 release, checked for the sections koe reads; `SpecError` naming what is wrong."""
    path = Path(folder) / "config.json"
    config = read_json(path)
    if config.get("model_type") != MODEL_TYPE:
        raise SpecError(f"{path}: model_type must be {MODEL_TYPE!r} (a Fish Speech S2 release), got {config.get('model_type')!r}")
    for section in ("text_config", "audio_decoder_config"):
        if not isinstance(config.get(section), dict):
            raise SpecError(f"{path}: the section {section!r} is missing or not an object (a damaged file: pull the release again)")
    return config


def weight_files(folder: Path) -> tuple[str, ...]:
    """The LM's weight files the folder holds, relative: the shards an index names, one
    `model.safetensors`, or the older `model.pth` (upstream's order of preference)."""
    folder = Path(folder)
    if (folder / WEIGHT_INDEX).is_file():
        index = read_json(folder / WEIGHT_INDEX)
        shards = index.get("weight_map")
        if not isinstance(shards, dict) or not shards or not all(isinstance(v, str) for v in shards.values()):
            raise SpecError(f"{folder / WEIGHT_INDEX}: weight_map must map tensor names to shard files")
        names = sorted(set(shards.values()))
        bad = [n for n in names if Path(n).is_absolute() or ".." in Path(n).parts]
        if bad:
            raise SpecError(f"{folder / WEIGHT_INDEX}: shard {bad[0]!r} is outside the model folder")
        return (WEIGHT_INDEX, *names)
    if (folder / "model.pth").is_file() and not (folder / "model.safetensors").is_file():
        return ("model.pth",)
    return ("model.safetensors",)


def _is_ours(folder: Path) -> bool:
    path = Path(folder) / "config.json"
    if not path.is_file():
        return False
    try:
        return read_json(path).get("model_type") == MODEL_TYPE
    except SpecError:
        return False


class FishSpeechSpec:
    family = FAMILY
    title = "Fish Speech"
    engine = "koe_fish_speech.engine:FishSpeechEngine"
    fixture = "koe_fish_speech.fixtures:write_random_model"
    fixture_variants = (VARIANT,)
    bench = "koe_fish_speech.bench:BENCH"
    released = (ReleasedModel(REPO, VARIANT, "4B", name="Fish-Speech-S2-Pro", license=LICENSE),)

    def probe(self, folder: Path) -> ModelInfo | None:
        return ModelInfo(FAMILY, VARIANT, "4B") if _is_ours(folder) else None

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        config = read_config(folder)
        weights = weight_files(folder)
        required = ("config.json", *weights, *TOKENIZER_FILES, CODEC_FILE)
        text = config["text_config"]
        stored = [folder / f for f in weights if f.endswith(".safetensors") and (folder / f).is_file()]
        return ModelDescription(
            info=ModelInfo(FAMILY, VARIANT, "4B"),
            capabilities=capabilities(),
            required_files=required,
            missing=tuple(f for f in required if not (folder / f).is_file()),
            weight_files=tuple(folder / f for f in (*weights, CODEC_FILE) if f != WEIGHT_INDEX and (folder / f).is_file()),
            stored_dtype=(safetensors_dtype(stored[0]) if stored else None) or "bfloat16",
            uses=(
                "a clone of a clip with its transcript (--ref clip.wav --ref-text '...'), or a voice of the model's own; "
                "dialogue with speaker tags (<|speaker:0|>Hi.<|speaker:1|>Hello.), at 44.1 kHz"
            ),
            extra={"layers": text.get("n_layer"), "dim": text.get("dim")},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities):
        return None


SPEC = FishSpeechSpec()
