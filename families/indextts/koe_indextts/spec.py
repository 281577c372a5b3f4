"""IndexTTS without loading it: which folders are its releases, what they can do, what a pull fetches.

Torch-free: reads file names and `config.yaml`. A 1.5 release folder is what the hub repo
`IndexTeam/IndexTTS-1.5` holds for inference: `config.yaml`, `gpt.pth` (the GPT with its
conformer/perceiver speech conditioning), `bigvgan_generator.pth` (the vocoder with its speaker
encoder) and `bpe.model` (the SentencePiece text vocabulary). Releases 2 and 2.5 are known and
refused with a clear message until koe runs them.

Code and weights are under the bilibili Model Use License, which a user accepts once before the
first pull (`koe models pull ... --accept-license` for scripts).
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE_WITHOUT_TRANSCRIPT, Capabilities, Option, OptionsSchema
from koe.engines.licenses import License
from koe.engines.spec import HubFiles, ModelDescription, ModelInfo, ReleasedModel, SpecError, has_random_weights

FAMILY = "indextts"
SAMPLE_RATE = 24000
CODE_RATE = 24000 / 1024  # mel codes a second (one code per 1024 samples)
LICENSE = License(
    "LicenseRef-bilibili-Model-Use-License",
    "bilibili Model Use License",
    "https://github.com/index-tts/index-tts/blob/main/LICENSE",
    needs_acceptance=True,
    summary=(
        "a licence for IndexTTS's code and weights that is not an open-source licence: keep its notice with every copy; "
        "products above 100 million monthly users or RMB 1 billion yearly revenue need a separate licence from bilibili"
    ),
)
REPO_15 = "IndexTeam/IndexTTS-1.5"
FILES_15 = ("config.yaml", "gpt.pth", "bigvgan_generator.pth", "bpe.model")
MIN_REFERENCE_S = 0.5
MAX_REFERENCE_S = 50.0  # upstream's fast path keeps 50 s of a clip; koe refuses (or trims, on request) longer ones
MAX_SPEECH_S = 600.0

DEFAULTS = {
    "do_sample": True,
    "top_k": 30,
    "top_p": 0.8,
    "temperature": 1.0,
    "num_beams": 3,
    "repetition_penalty": 10.0,
    "length_penalty": 0.0,
    "max_mel_tokens": 600,
    "max_text_tokens_per_segment": 120,
}


def options_schema() -> OptionsSchema:
    return OptionsSchema(
        (
            Option("do_sample", "bool", "sample the beams' candidates (upstream's default); false: plain beam search", True),
            Option("top_k", "int", "sample among the k likeliest codes (0: all)", 30, low=0, high=8194),
            Option("top_p", "float", "sample among the likeliest codes that hold this much probability", 0.8, low=0.01, high=1.0),
            Option("temperature", "float", "sampling temperature", 1.0, low=0.05, high=5.0),
            Option("num_beams", "int", "beams of the code search (1: plain sampling)", 3, low=1, high=16),
            Option("repetition_penalty", "float", "how much a code already said is held back (1: not at all)", 10.0, low=0.1, high=100.0),
            Option("length_penalty", "float", "beam scores divided by length to this power (0: not at all)", 0.0, low=-5.0, high=5.0),
            Option("max_mel_tokens", "int", "at most this many mel codes per text segment (about 23 a second)", 600, low=1, high=6000),
            Option("max_text_tokens_per_segment", "int", "a long text is cut into segments of at most this many text tokens", 120, low=1, high=1000),
        )
    )


def capabilities(variant: str = "IndexTTS-1.5") -> Capabilities:
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset({CLONE_WITHOUT_TRANSCRIPT}),
        languages=("auto",),
        sample_rate=SAMPLE_RATE,
        options=options_schema(),
        min_reference_s=MIN_REFERENCE_S,
        precisions=("fp32",),
        length_option="max_mel_tokens",
    )


class IndexTTSSpec:
    family = FAMILY
    title = "IndexTTS"
    engine = "koe_indextts.engine:IndexTTSEngine"
    fixture = "koe_indextts.fixtures:write_random_model"
    fixture_variants = ("IndexTTS-1.5",)
    bench = "koe_indextts.bench:BENCH"
    released = (
        ReleasedModel(REPO_15, "IndexTTS-1.5", "1.5", files=(HubFiles(REPO_15, FILES_15),), name="IndexTTS-1.5", license=LICENSE),
        ReleasedModel(
            "IndexTeam/IndexTTS-2",
            "IndexTTS-2",
            "2",
            name="IndexTTS-2",
            license=LICENSE,
            unsupported="IndexTTS 2 is not supported by koe yet (IndexTTS-1.5 is: koe models pull IndexTeam/IndexTTS-1.5)",
        ),
    )

    def probe(self, folder: Path) -> ModelInfo | None:
        from koe_indextts.config import release_of

        release = release_of(folder)
        if release is None:
            return None
        return ModelInfo(FAMILY, f"IndexTTS-{release}", release)

    def describe(self, folder: Path) -> ModelDescription:
        from koe_indextts.config import ConfigError, Release15, release_of

        folder = Path(folder)
        release = release_of(folder)
        if release is None:
            raise SpecError(f"{folder}: not an IndexTTS release (config.yaml with gpt.pth and bigvgan_generator.pth, s2mel.pth or codec.pth)")
        if release != "1.5":
            raise SpecError(f"{folder}: IndexTTS {release} is not supported by koe yet (IndexTTS-1.5 is)")
        try:
            config = Release15.read(folder)
        except ConfigError as e:
            raise SpecError(str(e)) from e
        required = ("config.yaml", config.gpt_checkpoint, config.bigvgan_checkpoint, config.bpe_model)
        gpt = config.gpt
        return ModelDescription(
            info=ModelInfo(FAMILY, config.variant, release),
            capabilities=capabilities(config.variant),
            required_files=required,
            missing=tuple(f for f in required if not (folder / f).is_file()),
            weight_files=tuple(folder / f for f in required[1:3] if (folder / f).is_file()),
            stored_dtype="float32",
            uses="a clone of a clip (--ref clip.wav; no transcript needed), Chinese and English",
            extra={"gpt_layers": gpt.get("layers"), "model_dim": gpt.get("model_dim")},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities):
        return None


SPEC = IndexTTSSpec()
