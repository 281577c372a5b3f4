"""CosyVoice 2 and 3 without loading them: which folders are ours, what they can do.

Torch-free: reads file names, the release's yaml (`cosyvoice2.yaml` / `cosyvoice3.yaml`, parsed as
data) and `CosyVoice-BlankEN/config.json`. A release folder is what the hub repos
`FunAudioLLM/CosyVoice2-0.5B` and `FunAudioLLM/Fun-CosyVoice3-0.5B-2512` hold: the yaml, `llm.pt`
(the Qwen2-based speech-token LM), `flow.pt` (v2: conformer encoder + causal flow matching; v3: a
DiT), `hift.pt` (the HiFT vocoder), `campplus.onnx` (speaker embedding), `speech_tokenizer_v2.onnx`
/ `_v3.onnx`, `CosyVoice-BlankEN/` (the Qwen2 config and tokenizer), and `spk2info.pt` where the
release has saved speakers. `koe models pull FunAudioLLM/CosyVoice2-0.5B` fetches them.

Two variants, both at 24 kHz: a clone of a clip with its transcript (zero-shot) or without it
(cross-lingual), a style instruction with a cloned voice (instruct), voice conversion (speech into
a cloned voice), the release's saved speakers, and text that arrives in pieces (from an LLM).
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, PRESET, Capabilities, Option, OptionsSchema
from koe.engines.licenses import APACHE_2_0
from koe.engines.spec import HubFiles, ModelDescription, ModelInfo, ReleasedModel, SpecError, has_random_weights
from koe.runtime.precision import PRECISIONS

FAMILY = "cosyvoice"
LICENSE = APACHE_2_0  # the released checkpoints' (FunAudioLLM/CosyVoice2-0.5B, Fun-CosyVoice3-0.5B)
SIZE = "0.5B"
SAMPLE_RATE = 24000
TOKEN_RATE = 25  # speech tokens per second
VARIANTS = {2: "CosyVoice2-0.5B", 3: "Fun-CosyVoice3-0.5B-2512"}
REPOS = {2: "FunAudioLLM/CosyVoice2-0.5B", 3: "FunAudioLLM/Fun-CosyVoice3-0.5B-2512"}
BLANK_FILES = tuple(
    f"CosyVoice-BlankEN/{f}" for f in ("config.json", "generation_config.json", "merges.txt", "model.safetensors", "tokenizer_config.json", "vocab.json")
)
MIN_REFERENCE_S = 1.0
MAX_REFERENCE_S = 30.0  # the speech tokenizer's limit (upstream asserts it)
MAX_SPEECH_S = 600.0


def yaml_name(version: int) -> str:
    return f"cosyvoice{version}.yaml"


def required_files(version: int) -> tuple[str, ...]:
    """What koe loads from a release folder (upstream also reads BlankEN's Qwen2 weights, which the
    LM's `llm.pt` holds again: a pull fetches them, koe does not need them)."""
    return (yaml_name(version), "llm.pt", "flow.pt", "hift.pt", "campplus.onnx", f"speech_tokenizer_v{version}.onnx", *BLANK_FILES[:3], *BLANK_FILES[4:])


def version_of(folder: Path) -> int | None:
    """2 or 3 by the yaml the folder holds (None: neither, or both)."""
    found = [v for v in VARIANTS if (Path(folder) / yaml_name(v)).is_file()]
    return found[0] if len(found) == 1 else None


# upstream's own v2 stream races its LM thread's draws against the vocoder's (its audio changes from run to run)
V2_STREAM_NOTE = (
    "; streamed audio is upstream's streamed mode, in a fixed order (upstream's own CosyVoice 2 stream races two threads, so its audio varies from run to run)"
)

DEFAULTS = {"speed": 1.0, "text_frontend": True, "max_tokens": None}


def options_schema() -> OptionsSchema:
    return OptionsSchema(
        (
            Option("speed", "float", "speaking rate (the mel stretched before the vocoder, as upstream's speed; one-shot only)", 1.0, low=0.5, high=2.0),
            Option(
                "text_frontend",
                "bool",
                "normalise the text first (numbers, dates and symbols in words; wetext and inflect, as upstream) and split it into pieces",
                True,
            ),
            Option(
                "max_tokens",
                "int",
                "at most this many speech tokens (25 a second) per request (none: upstream's own limit, 20 per text token)",
                None,
                low=1,
                high=int(MAX_SPEECH_S * TOKEN_RATE),
            ),
        )
    )


def capabilities(version: int = 2, speakers: tuple[str, ...] = ()) -> Capabilities:
    modes = {CLONE, CLONE_WITHOUT_TRANSCRIPT} | ({PRESET} if speakers else set())
    return Capabilities(
        family=FAMILY,
        variant=VARIANTS[version],
        voice_modes=frozenset(modes),
        languages=("auto",),
        sample_rate=SAMPLE_RATE,
        speakers=speakers,
        instruct=True,
        stream_step_s=1.0,  # the first chunk: 25 tokens (and the prompt's padding to a multiple of 25); then 50, 100
        native_speed=True,
        options=options_schema(),
        min_reference_s=MIN_REFERENCE_S,
        stream_is_one_shot=False,  # a stream's flow runs chunk-causal attention, upstream's streamed mode
        precisions=PRECISIONS,
        conversion=True,
        text_stream=True,
        length_option="max_tokens",
    )


class CosyVoiceSpec:
    family = FAMILY
    title = "CosyVoice"
    engine = "koe.engines.cosyvoice.engine:CosyVoiceEngine"
    fixture = "koe.engines.cosyvoice.fixtures:write_random_model"
    oracle = "koe.engines.cosyvoice.oracle:ORACLE"  # upstream's pinned source its parity tests compare against (koe.engines.oracle)
    bench = "koe.engines.cosyvoice.bench:BENCH"  # what `koe bench --family cosyvoice` runs (koe.engines.benchmark)
    fixture_variants = tuple(VARIANTS.values())
    released = tuple(
        ReleasedModel(
            REPOS[v],
            VARIANTS[v],
            SIZE,
            files=(HubFiles(REPOS[v], (*required_files(v), BLANK_FILES[3])), HubFiles(REPOS[v], ("spk2info.pt*", "cosyvoice*.yaml"))),
            name=VARIANTS[v],
            license=LICENSE,
        )
        for v in VARIANTS
    )

    def probe(self, folder: Path) -> ModelInfo | None:
        version = version_of(Path(folder))
        return None if version is None else ModelInfo(FAMILY, VARIANTS[version], SIZE)

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        version = version_of(folder)
        if version is None:
            raise SpecError(f"{folder}: not a CosyVoice 2/3 model (exactly one of cosyvoice2.yaml, cosyvoice3.yaml)")
        from koe.engines.cosyvoice.config import ConfigError, read_config

        try:
            config, qwen = read_config(folder) if (folder / BLANK_FILES[0]).is_file() else (None, None)
        except (ConfigError, ValueError) as e:
            raise SpecError(f"{folder}: {e}") from e
        required = required_files(version)
        missing = tuple(f for f in required if not (folder / f).is_file())
        weights = tuple(folder / f for f in ("llm.pt", "flow.pt", "hift.pt") if (folder / f).is_file())
        extra = {"version": version}
        if qwen is not None:
            extra |= {"lm_layers": qwen.num_hidden_layers, "hidden_size": qwen.hidden_size}
        return ModelDescription(
            info=ModelInfo(FAMILY, VARIANTS[version], SIZE),
            capabilities=capabilities(version),
            required_files=required,
            missing=missing,
            weight_files=weights,
            stored_dtype="float32",
            uses=(
                "a clone of a clip (--ref clip.wav, with --ref-text for zero-shot, without for cross-lingual), "
                'a style instruction (--instruct "speak happily"), voice conversion (koe convert), text streamed in pieces'
                + (V2_STREAM_NOTE if version == 2 else "")
            ),
            extra=extra,
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities):
        return None


SPEC = CosyVoiceSpec()
