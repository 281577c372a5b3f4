"""The sine family without loading it (torch-free): which folders are ours, what they can do.

A model folder holds `config.json` (`model_type` "koe_sine", `sample_rate`, `speakers`,
`word_seconds`) and `model.safetensors` (`pitch` and `amplitude` per speaker, one `noise` level).
The service, the server and the CLI plan requests, list models and map OpenAI voices from these
answers alone; the engine (`koe_sine.engine`) is imported only to load a model.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE_WITHOUT_TRANSCRIPT, PRESET, Capabilities, Option, OptionsSchema
from koe.engines.licenses import License
from koe.engines.spec import ModelDescription, ModelInfo, ReleasedModel, SpecError, VoiceAlias, has_random_weights, read_json, safetensors_dtype

FAMILY = "sine"
MODEL_TYPE = "koe_sine"
REQUIRED_FILES = ("config.json", "model.safetensors")
PRECISIONS = ("fp32",)  # koe.runtime.precision's names: the tones are computed in float32 only
MIN_REFERENCE_S = 0.5  # a clip's mean pitch needs half a second
LICENSE = License(  # a toy licence that must be accepted, as some releases' are: the family kit's acceptance flow, tested
    "LicenseRef-koe-sine-Tone-Terms-1.0",
    "koe-sine Tone Terms 1.0",
    file="TERMS.md",
    needs_acceptance=True,
    summary="a test licence: tones for tests only; accepting it grants nothing",
)
OPENAI_VOICES = ("alloy", "ash", "ballad", "coral", "echo", "fable", "nova", "onyx", "sage", "shimmer", "verse")


def options_schema() -> OptionsSchema:
    """The family's one request option (a flag `--pitch-shift` in `koe speak`, a field of /v1/audio/speech)."""
    return OptionsSchema((Option("pitch_shift", "float", "semitones every tone is moved up (+) or down (-)", 0.0, low=-24, high=24),))


def read_config(folder: Path) -> dict:
    """`config.json` of a sine model, checked; `SpecError` naming what is wrong."""
    path = Path(folder) / "config.json"
    config = read_json(path)
    rate, speakers, word = config.get("sample_rate"), config.get("speakers"), config.get("word_seconds")
    if isinstance(rate, bool) or not isinstance(rate, int) or not 8000 <= rate <= 48000:
        raise SpecError(f"{path}: sample_rate must be a whole number of Hz in 8000-48000, got {rate!r}")
    if not isinstance(speakers, list) or not speakers or not all(isinstance(s, str) and s for s in speakers):
        raise SpecError(f"{path}: speakers must be a list of names, got {speakers!r}")
    if isinstance(word, bool) or not isinstance(word, (int, float)) or not 0.01 <= word <= 2:
        raise SpecError(f"{path}: word_seconds must be a number in [0.01, 2], got {word!r}")
    return config


def capabilities(config: dict) -> Capabilities:
    """What a sine model can do: its preset speakers, or a voice cloned from a clip alone; one option."""
    return Capabilities(
        family=FAMILY,
        variant="base",
        voice_modes=frozenset({PRESET, CLONE_WITHOUT_TRANSCRIPT}),
        languages=("auto",),
        sample_rate=config["sample_rate"],
        speakers=tuple(config["speakers"]),
        stream_step_s=float(config["word_seconds"]),
        options=options_schema(),
        min_reference_s=MIN_REFERENCE_S,
        precisions=PRECISIONS,
        conversion=True,
    )


def _is_ours(folder: Path) -> bool:
    path = Path(folder) / "config.json"
    if not path.is_file():
        return False
    try:
        return read_json(path).get("model_type") == MODEL_TYPE
    except SpecError:
        return False  # not our config (another family's probe says what is wrong with it)


class SineSpec:
    family = FAMILY
    title = "Sine"
    engine = "koe_sine.engine:SineEngine"
    fixture = "koe_sine.fixtures:write_random_model"
    fixture_variants = ("base",)
    bench = "koe_sine.bench:BENCH"  # `koe bench --family sine`: requests only (koe.bench.contract times them)
    released = (ReleasedModel("koe-sine/tones", "base", "tiny", name="tones", license=LICENSE),)  # on tests' fake hub only (tests/hub_server.py)

    def probe(self, folder: Path) -> ModelInfo | None:
        return ModelInfo(FAMILY, "base", "tiny") if _is_ours(folder) else None

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        config = read_config(folder)
        weights = folder / "model.safetensors"
        return ModelDescription(
            info=ModelInfo(FAMILY, "base", "tiny"),
            capabilities=capabilities(config),
            required_files=REQUIRED_FILES,
            missing=tuple(f for f in REQUIRED_FILES if not (folder / f).is_file()),
            weight_files=(weights,) if weights.is_file() else (),
            stored_dtype=(safetensors_dtype(weights) if weights.is_file() else None) or "float32",
            uses="a tone per word: a preset speaker (--voice NAME) or the pitch of a clip (--ref clip.wav)",
            extra={"word_seconds": config["word_seconds"]},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        """OpenAI's voice names take the preset speakers in turn (alloy: the first, ash: the second, ...)."""
        if name not in OPENAI_VOICES or not capabilities.speakers:
            return None
        return VoiceAlias(speaker=capabilities.speakers[OPENAI_VOICES.index(name) % len(capabilities.speakers)])


SPEC = SineSpec()
