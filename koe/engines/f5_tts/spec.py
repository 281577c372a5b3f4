"""F5-TTS without loading it: which folders are ours, what they can do.

Torch-free: reads `config.yaml` (upstream's config schema), `vocos/config.yaml` and file names.
A folder koe loads holds the release's checkpoint (`model_<step>.safetensors` or `.pt`) and
`vocab.txt`, the architecture as `config.yaml`, and the Vocos vocoder in `vocos/`.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE, Capabilities, Option, OptionsSchema
from koe.engines.spec import ModelDescription, ModelInfo, ReleasedModel, SpecError, VoiceAlias, safetensors_dtype

FAMILY = "f5_tts"
SAMPLE_RATE = 24000
HOP = 256
MEL_FRAME_RATE = SAMPLE_RATE / HOP  # mel frames per second
LANGUAGES = ("auto", "chinese", "english")
REQUIRED_FILES = ("config.yaml", "vocab.txt", "vocos/config.yaml", "vocos/pytorch_model.bin")
CHECKPOINT_GLOBS = ("model_*.safetensors", "model_*.pt", "model.safetensors", "model.pt")
VOCODER_REPO = "charactr/vocos-mel-24khz"
MIN_REFERENCE_S = 0.3

# upstream's defaults (f5_tts.api.F5TTS.infer / infer_process)
DEFAULTS = {"nfe_step": 32, "cfg_strength": 2.0, "sway_sampling_coef": -1.0, "speed": 1.0, "fix_duration": None,
            "target_rms": 0.1, "cross_fade_duration": 0.15}  # fmt: skip


def options_schema() -> OptionsSchema:
    d = DEFAULTS
    return OptionsSchema((
        Option("nfe_step", "int", "flow-matching steps (DiT evaluations); fewer is faster, 16 and 32 are the usual", d["nfe_step"], low=1, high=1024),
        Option("cfg_strength", "float", "classifier-free guidance strength (0: no guidance, one DiT pass per step)", d["cfg_strength"], low=0),
        Option("sway_sampling_coef", "float", "sway sampling of the step times (-1 front-loads steps; 0 is a uniform grid)", d["sway_sampling_coef"]),
        Option("speed", "float", "speaking rate of the model itself (scales the duration estimate)", d["speed"], low=0, low_open=True, high=10),
        Option("fix_duration", "float", "total seconds of reference + speech (instead of the estimate from the reference's rate)", None, low=0, low_open=True, high=600),
        Option("target_rms", "float", "loudness a quieter reference is raised to (the output is scaled back)", d["target_rms"], low=0, low_open=True, high=1),
        Option("cross_fade_duration", "float", "seconds of cross-fade between the text batches of a long text", d["cross_fade_duration"], low=0, high=5),
    ))  # fmt: skip


def capabilities(variant: str) -> Capabilities:
    return Capabilities(
        family=FAMILY, variant=variant, voice_modes=frozenset({CLONE}), languages=LANGUAGES, sample_rate=SAMPLE_RATE,
        instruct=False, stream_step_s=None, native_speed=True, batch=False, options=options_schema(),
        training=(), min_reference_s=MIN_REFERENCE_S,
    )  # fmt: skip


def checkpoint_files(folder: Path) -> list[Path]:
    """The folder's DiT checkpoints (a release has one `model_<step>.safetensors`)."""
    found: list[Path] = []
    for pattern in CHECKPOINT_GLOBS:
        found += [p for p in sorted(Path(folder).glob(pattern)) if p not in found]
    return found


def _model_section(folder: Path) -> dict | None:
    path = folder / "config.yaml"
    if not path.is_file():
        return None
    import yaml

    try:
        raw = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError, UnicodeDecodeError):
        return None
    model = raw.get("model", raw) if isinstance(raw, dict) else None
    if isinstance(model, dict) and "backbone" in model and "arch" in model:
        return model
    return None


class F5Spec:
    family = FAMILY
    title = "F5-TTS"
    engine = "koe.engines.f5_tts.engine:F5TTSEngine"
    fixture = "koe.engines.f5_tts.fixtures:write_random_model"
    fixture_variants = ("F5TTS_v1_Base", "F5TTS_Base")
    released = (
        ReleasedModel("SWivid/F5-TTS", "F5TTS_v1_Base", "base"),
        ReleasedModel("SWivid/F5-TTS", "F5TTS_Base", "base"),
    )

    def probe(self, folder: Path) -> ModelInfo | None:
        folder = Path(folder)
        model = _model_section(folder)
        if model is not None:
            return ModelInfo(FAMILY, str(model.get("name") or model["backbone"]), "base")
        if (folder / "vocab.txt").is_file() and checkpoint_files(folder):
            return ModelInfo(FAMILY, "unknown", "")  # a bare release: the engine's load says how to import it
        return None

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        model = _model_section(folder)
        variant = str(model.get("name") or model["backbone"]) if model else "unknown"
        weights = tuple(checkpoint_files(folder))
        missing = [f for f in REQUIRED_FILES if not (folder / f).is_file()]
        if not weights:
            missing.append("model_<step>.safetensors")
        stored = (safetensors_dtype(weights[0]) if weights and weights[0].suffix == ".safetensors" else None) or "float32"
        try:
            from koe.engines.f5_tts.config import parse_config

            arch = parse_config(model, folder / "config.yaml").arch_family if model else None
        except ValueError as e:
            raise SpecError(str(e)) from e
        vocoder = folder / "vocos" / "pytorch_model.bin"
        return ModelDescription(
            info=ModelInfo(FAMILY, variant, "base"), capabilities=capabilities(variant), required_files=REQUIRED_FILES,
            missing=tuple(missing), weight_files=weights + ((vocoder,) if vocoder.is_file() else ()), stored_dtype=stored,
            uses="voice cloning from a reference clip and its transcript (--voice NAME or --ref clip.wav --ref-text ...)",
            extra={"arch": arch, "vocoder": "vocos"},
        )  # fmt: skip

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        return None  # F5-TTS has no preset voices: a library voice (a prepared reference) is the voice


SPEC = F5Spec()
