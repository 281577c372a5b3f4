"""IndexTTS without loading it: which folders are its releases, what they can do, what a pull fetches.

Torch-free: reads file names and `config.yaml`. A 1.5 release folder is what the hub repo
`IndexTeam/IndexTTS-1.5` holds for inference: `config.yaml`, `gpt.pth` (the GPT with its
conformer/perceiver speech conditioning), `bigvgan_generator.pth` (the vocoder with its speaker
encoder) and `bpe.model` (the SentencePiece text vocabulary). A release 2 folder is
`IndexTeam/IndexTTS-2`'s files (`config.yaml`, `gpt.pth`, `s2mel.pth`, `bpe.model`,
`wav2vec2bert_stats.pt`, the emotion matrices `feat1.pt` / `feat2.pt`) and its auxiliary models
under `hf_cache/` as upstream's downloader keeps them (`w2v-bert-2.0/`, the MaskGCT semantic codec,
CAM++'s `campplus_cn_common.bin`, `bigvgan/`), with the emotion model that reads an emotion from a
text (`qwen0.6bemo4-merge/`, a Qwen3 LM): `koe models pull IndexTeam/IndexTTS-2` fetches them all.
A release 2.5 folder is `IndexTeam/IndexTTS-2.5`'s files (`config.yaml`, `gpt.pth`, `codec.pth`,
`s2mel.pth`, the tiktoken vocabulary, `wav2vec2bert_stats.pt`, `feat1.pt` / `feat2.pt`) with release
2's auxiliary models under `hf_cache/` but no MaskGCT codec, and the same emotion model folder.
2.5 speaks in a language named by the request (upstream's `lang`; `LANGUAGES_25`), guessed from the
text where none is given (`language_25`).

Code and weights are under the bilibili Model Use License, which a user accepts once before the
first pull (`koe models pull ... --accept-license` for scripts).
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE_WITHOUT_TRANSCRIPT, Capabilities, Option, OptionsSchema, UnsupportedLanguage
from koe.engines.licenses import License
from koe.engines.spec import HubFiles, ModelDescription, ModelInfo, ReleasedModel, SpecError, has_random_weights
from koe.text.language import NAMES, guess_language
from koe_indextts.text25 import LANGUAGES, VOCAB_FILE

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
SAMPLE_RATE_2 = 22050
REPO_15 = "IndexTeam/IndexTTS-1.5"
REPO_2 = "IndexTeam/IndexTTS-2"
FILES_2 = ("config.yaml", "gpt.pth", "s2mel.pth", "bpe.model", "wav2vec2bert_stats.pt", "feat1.pt", "feat2.pt")
EMOTIONS = ("happy", "angry", "sad", "afraid", "disgusted", "melancholic", "surprised", "calm")  # upstream's emotion vector, in its order
EMOTION_OPTIONS = tuple(f"emo_{name}" for name in EMOTIONS)  # its entries as options (emo_sad=0.6), beside upstream's emo_alpha
EMOTION_LM = "qwen0.6bemo4-merge"  # the release's emotion model (config.yaml's qwen_emo_path), fetched whole
FILES_15 = ("config.yaml", "gpt.pth", "bigvgan_generator.pth", "bpe.model")
REPO_25 = "IndexTeam/IndexTTS-2.5"
FILES_25 = ("config.yaml", "gpt.pth", "codec.pth", "s2mel.pth", VOCAB_FILE, "wav2vec2bert_stats.pt", "feat2.pt", "feat1.pt")  # config25.Release25's own
SPOKEN_25 = ("zh", "en", "ja", "es", "ar", "zhen")  # what 2.5 is made for (zhen: Chinese mixed with English), then its tokenizer's other codes
LANGUAGES_25 = (*SPOKEN_25, *(code for code in LANGUAGES if code not in SPOKEN_25))
NAMES_25 = {**NAMES, "arabic": "ar", "mandarin": "zh"}  # language names a request may give instead of a code
LANGUAGE_NAMES_25 = tuple(name for name, code in NAMES_25.items() if code in LANGUAGES_25)
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


DEFAULTS_2 = {
    "top_k": 30,
    "top_p": 0.8,
    "temperature": 0.8,
    "num_beams": 3,
    "repetition_penalty": 10.0,
    "length_penalty": 0.0,
    "max_mel_tokens": 1500,
    "max_text_tokens_per_segment": 120,
    "emo_alpha": 1.0,
    "interval_silence": 200,
    "use_random": False,
    "emo_text": False,
    **dict.fromkeys(EMOTION_OPTIONS, 0.0),
}


def options_schema_2() -> OptionsSchema:
    """Release 2's options: upstream's generation settings (it always samples), its emotion controls
    and the silence between segments."""
    generation = [o for o in options_schema().options if o.name != "do_sample"]
    generation = [Option(o.name, o.type, o.help, DEFAULTS_2[o.name], low=o.low, high=o.high) for o in generation]
    emotions = [
        Option(
            option,
            "float",
            f"how {name} the voice sounds (upstream's emotion vector; any of the eight above 0 replaces the clip's emotion)",
            0.0,
            low=0.0,
            high=1.0,
        )
        for name, option in zip(EMOTIONS, EMOTION_OPTIONS, strict=True)
    ]
    return OptionsSchema(
        (
            *generation,
            *emotions,
            Option("emo_alpha", "float", "the emotion vector's strength (upstream's emo_alpha)", 1.0, low=0.0, high=1.0),
            Option("use_random", "bool", "pick the emotion matrices' rows at random rather than by the voice's style (not reproducible upstream)", False),
            Option(
                "emo_text",
                "bool",
                "read the emotion from the text spoken, by the release's emotion model (upstream's use_emo_text; instructions give another text to read)",
                False,
            ),
            Option("interval_silence", "int", "milliseconds of silence between text segments", 200, low=0, high=10000),
        )
    )


def capabilities(variant: str = "IndexTTS-1.5") -> Capabilities:
    two = variant in ("IndexTTS-2", "IndexTTS-2.5")
    schema = options_schema_25() if variant == "IndexTTS-2.5" else options_schema_2() if two else options_schema()
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset({CLONE_WITHOUT_TRANSCRIPT}),
        languages=("auto", *LANGUAGES_25, *LANGUAGE_NAMES_25) if variant == "IndexTTS-2.5" else ("auto",),
        sample_rate=SAMPLE_RATE_2 if two else SAMPLE_RATE,
        options=schema,
        min_reference_s=MIN_REFERENCE_S,
        precisions=("fp32",),
        length_option="max_mel_tokens",
        emotion_reference=two,  # release 2 takes an emotion clip (upstream's emo_audio_prompt)
        instruct=two,  # and an emotion described in words (upstream's emo_text), read by its emotion model
    )


DEFAULTS_25 = {**DEFAULTS_2, "duration_factor": 1.0, "text_normalization": True}


def options_schema_25() -> OptionsSchema:
    """Release 2.5's options: release 2's, with upstream's `duration_factor` and `text_normalization`."""
    return OptionsSchema(
        (
            *options_schema_2().options,
            Option(
                "duration_factor", "float", "the speech's length against the model's own (upstream's duration_factor: 1.25 is slower)", 1.0, low=0.5, high=2.0
            ),
            Option("text_normalization", "bool", "read numbers, dates and symbols out as words first (zh, en and zhen; upstream's text_normalization)", True),
        )
    )


def language_25(language: str | None, text: str = "") -> tuple[str, bool]:
    """The language code 2.5's front end takes (upstream's `lang`) and whether it was guessed.

    A code of `LANGUAGES_25` in any case ("ZH", "zhen"), a name ("english", "Chinese"), or a regional
    code ("en-US", "zh_CN") names it; None, "" or "auto" guesses it from the text: Arabic script ->
    "ar", else `koe.text.language.guess_language` (kana -> ja, han -> zh, Latin script by its common
    words: en, es, ...; English where nothing stands out). Anything else is an `UnsupportedLanguage`."""
    name = (language or "").strip().lower().replace("_", "-")
    if name in ("", "auto"):
        arabic = sum(1 for ch in text[:4000] if "\u0600" <= ch <= "\u06ff")
        latin = sum(1 for ch in text[:4000] if ch.isascii() and ch.isalpha())
        return ("ar" if arabic and arabic >= latin else guess_language(text)), True
    for code in (name, NAMES_25.get(name), name.split("-")[0]):
        if code in LANGUAGES_25:
            return code, False
    raise UnsupportedLanguage(
        f"unsupported language {language!r}: IndexTTS 2.5 speaks {', '.join(SPOKEN_25[:-1])} (zhen: Chinese mixed with English); "
        "its tokenizer also knows the codes koe models info lists, or leave it unset (auto) to guess it from the text"
    )


class IndexTTSSpec:
    family = FAMILY
    title = "IndexTTS"
    engine = "koe_indextts.engine:IndexTTSEngine"
    fixture = "koe_indextts.fixtures:write_random_model"
    fixture_variants = ("IndexTTS-1.5", "IndexTTS-2", "IndexTTS-2.5")
    bench = "koe_indextts.bench:BENCH"
    released = (
        ReleasedModel(REPO_15, "IndexTTS-1.5", "1.5", files=(HubFiles(REPO_15, FILES_15),), name="IndexTTS-1.5", license=LICENSE),
        ReleasedModel(
            REPO_2,
            "IndexTTS-2",
            "2",
            files=(
                HubFiles(REPO_2, FILES_2),
                HubFiles("facebook/w2v-bert-2.0", ("config.json", "preprocessor_config.json", "model.safetensors"), dest="hf_cache/w2v-bert-2.0"),
                HubFiles("amphion/MaskGCT", ("semantic_codec/model.safetensors",), dest="hf_cache"),
                HubFiles("funasr/campplus", ("campplus_cn_common.bin",), dest="hf_cache"),
                HubFiles("nvidia/bigvgan_v2_22khz_80band_256x", ("config.json", "bigvgan_generator.pt"), dest="hf_cache/bigvgan"),
                HubFiles(REPO_2, subfolder=EMOTION_LM, dest=EMOTION_LM),
            ),
            name="IndexTTS-2",
            license=LICENSE,
        ),
        ReleasedModel(
            REPO_25,
            "IndexTTS-2.5",
            "2.5",
            files=(
                HubFiles(REPO_25, FILES_25),
                HubFiles("facebook/w2v-bert-2.0", ("config.json", "preprocessor_config.json", "model.safetensors"), dest="hf_cache/w2v-bert-2.0"),
                HubFiles("funasr/campplus", ("campplus_cn_common.bin",), dest="hf_cache"),
                HubFiles("nvidia/bigvgan_v2_22khz_80band_256x", ("config.json", "bigvgan_generator.pt"), dest="hf_cache/bigvgan"),
                HubFiles(REPO_25, subfolder=EMOTION_LM, dest=EMOTION_LM),
            ),
            name="IndexTTS-2.5",
            license=LICENSE,
        ),
    )

    def probe(self, folder: Path) -> ModelInfo | None:
        from koe_indextts.config import release_of

        release = release_of(folder)
        if release is None:
            return None
        return ModelInfo(FAMILY, f"IndexTTS-{release}", release)

    def describe(self, folder: Path) -> ModelDescription:
        from koe_indextts.config import ConfigError, Release2, Release15, release_of

        folder = Path(folder)
        release = release_of(folder)
        if release is None:
            raise SpecError(f"{folder}: not an IndexTTS release (config.yaml with gpt.pth and bigvgan_generator.pth, s2mel.pth or codec.pth)")
        try:
            if release == "2.5":
                from koe_indextts.config25 import Release25

                config = Release25.read(folder)
            else:
                config = Release2.read(folder) if release == "2" else Release15.read(folder)
        except ConfigError as e:
            raise SpecError(str(e)) from e
        if release == "2.5":
            required, missing = config.files, config.missing(folder)
            aux = ("hf_cache/w2v-bert-2.0/model.safetensors", "hf_cache/campplus_cn_common.bin", "hf_cache/bigvgan/bigvgan_generator.pt")
            weights = (config.gpt_checkpoint, config.codec_checkpoint, config.s2mel_checkpoint, *aux)
            uses = (
                "a clone of a clip (--ref clip.wav; no transcript needed) with its own emotion, another clip's (--emotion-ref), the one "
                "the eight emotion options give (--option emo_sad=0.6) or one read from a text (--instruct); Chinese, English, Japanese, "
                "Spanish and Arabic (--language, guessed from the text when left out), its length set by --option duration_factor, at 22.05 kHz"
            )
        elif release == "2":
            required, missing = config.files, config.missing(folder)
            codec = next((f for f in ("hf_cache/semantic_codec_model.safetensors", "hf_cache/semantic_codec/model.safetensors") if (folder / f).is_file()), "")
            aux = ("hf_cache/w2v-bert-2.0/model.safetensors", codec, "hf_cache/campplus_cn_common.bin", "hf_cache/bigvgan/bigvgan_generator.pt")
            weights = (config.gpt_checkpoint, config.s2mel_checkpoint, *(f for f in aux if f))
            uses = (
                "a clone of a clip (--ref clip.wav; no transcript needed) with its own emotion, another clip's (--emotion-ref), the one "
                "the eight emotion options give (--option emo_sad=0.6) or one read from a text (--instruct, or --option emo_text=true "
                "for the text spoken), Chinese and English, at 22.05 kHz"
            )
        else:
            required = ("config.yaml", config.gpt_checkpoint, config.bigvgan_checkpoint, config.bpe_model)
            missing = tuple(f for f in required if not (folder / f).is_file())
            weights = required[1:3]
            uses = "a clone of a clip (--ref clip.wav; no transcript needed), Chinese and English"
        gpt = config.gpt
        return ModelDescription(
            info=ModelInfo(FAMILY, config.variant, release),
            capabilities=capabilities(config.variant),
            required_files=required,
            missing=missing,
            weight_files=tuple(folder / f for f in weights if (folder / f).is_file()),
            stored_dtype="float32",
            uses=uses,
            extra={"gpt_layers": gpt.get("layers"), "model_dim": gpt.get("model_dim")},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities):
        return None


SPEC = IndexTTSSpec()
