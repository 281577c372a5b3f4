"""F5-TTS without loading it: which folders are ours, what they can do.

Torch-free: reads `config.yaml` (upstream's config schema), `vocos/config.yaml` and file names.
A folder koe loads holds the release's checkpoint (`model_<step>.safetensors` or `.pt`) and
`vocab.txt`, the architecture as `config.yaml`, and the Vocos vocoder in `vocos/`.

The releases carry no config: the architecture is known by name (`ARCHS`). `assemble` says what
a release's folder still needs (the named arch's `config.yaml`, the vocoder), so `koe models
import DIR --arch F5TTS_v1_Base [--vocoder DIR]` and `koe models pull SWivid/F5-TTS --arch
F5TTS_v1_Base` (the checkpoint repo's subfolder + the vocoder repo) write complete folders.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from koe.engines.base import CLONE, Capabilities, Option, OptionsSchema
from koe.engines.licenses import CC_BY_NC_4_0
from koe.engines.spec import (
    Assembly,
    HubFiles,
    ModelDescription,
    ModelInfo,
    ReleasedModel,
    SpecError,
    VoiceAlias,
    has_random_weights,
    safetensors_dtype,
    safetensors_header,
)

FAMILY = "f5_tts"
LICENSE = replace(  # the released weights' (SWivid/F5-TTS, SWivid/E2-TTS); F5-TTS's code is MIT
    CC_BY_NC_4_0, summary="the released weights: non-commercial use only, with credit to the authors (F5-TTS's code itself is MIT)"
)
SAMPLE_RATE = 24000
HOP = 256
MEL_FRAME_RATE = SAMPLE_RATE / HOP  # mel frames per second
LANGUAGES = ("auto", "chinese", "english")
REQUIRED_FILES = ("config.yaml", "vocab.txt", "vocos/config.yaml", "vocos/pytorch_model.bin")
CHECKPOINT_GLOBS = ("model_*.safetensors", "model_*.pt", "model.safetensors", "model.pt")
VOCODER_REPO = "charactr/vocos-mel-24khz"
VOCODER_FILES = ("config.yaml", "pytorch_model.bin")
ARCH_NAMES = ("F5TTS_v1_Base", "F5TTS_Base")  # the released architectures koe runs (`config.ARCHS` has their yaml)
E2_UNSUPPORTED = "E2-TTS (E2TTS_Base, the UNetT backbone) is not supported yet; koe runs the F5-TTS DiT: " + ", ".join(ARCH_NAMES)
BIGVGAN_UNSUPPORTED = (
    "F5-TTS with the BigVGAN vocoder (F5TTS_Base_bigvgan, nvidia/bigvgan_v2_24khz_100band_256x) is not "
    f"supported yet; koe runs F5-TTS with the Vocos vocoder ({VOCODER_REPO}): " + ", ".join(ARCH_NAMES)
)
MIN_REFERENCE_S = 0.3

# upstream's defaults (f5_tts.api.F5TTS.infer / infer_process)
DEFAULTS = {"nfe_step": 32, "cfg_strength": 2.0, "sway_sampling_coef": -1.0, "speed": 1.0, "fix_duration": None, "target_rms": 0.1, "cross_fade_duration": 0.15}


def options_schema() -> OptionsSchema:
    d = DEFAULTS
    return OptionsSchema(
        (
            Option("nfe_step", "int", "flow-matching steps (DiT evaluations); fewer is faster, 16 and 32 are the usual", d["nfe_step"], low=1, high=1024),
            Option("cfg_strength", "float", "classifier-free guidance strength (0: no guidance, one DiT pass per step)", d["cfg_strength"], low=0),
            Option(
                "sway_sampling_coef",
                "float",
                "sway sampling of the step times (-1 front-loads steps; 0 is a uniform grid)",
                d["sway_sampling_coef"],
                null="no sway: a uniform time grid, as upstream's sway_sampling_coef=None",
            ),
            Option("speed", "float", "speaking rate of the model itself (scales the duration estimate)", d["speed"], low=0, low_open=True, high=10),
            Option(
                "fix_duration",
                "float",
                "total seconds of reference + speech (instead of the estimate from the reference's rate)",
                None,
                low=0,
                low_open=True,
                high=600,
            ),
            Option(
                "target_rms", "float", "loudness a quieter reference is raised to (the output is scaled back)", d["target_rms"], low=0, low_open=True, high=1
            ),
            Option("cross_fade_duration", "float", "seconds of cross-fade between the text batches of a long text", d["cross_fade_duration"], low=0, high=5),
        )
    )


PRECISIONS = ("fp32", "bf16")  # koe.runtime.precision: the DiT in bfloat16 (the vocoder stays float32)


def capabilities(variant: str) -> Capabilities:
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset({CLONE}),
        languages=LANGUAGES,
        sample_rate=SAMPLE_RATE,
        instruct=False,
        stream_step_s=None,
        native_speed=True,
        batch=False,
        options=options_schema(),
        training=("finetune",),  # `koe train finetune` (finetune/)
        min_reference_s=MIN_REFERENCE_S,
        precisions=PRECISIONS,
    )


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
    except (OSError, yaml.YAMLError, UnicodeDecodeError, RecursionError):  # a yaml nested past Python's stack is no config
        return None
    model = raw.get("model", raw) if isinstance(raw, dict) else None
    if isinstance(model, dict) and "backbone" in model and "arch" in model:
        return model
    return None


VOCODER = HubFiles(VOCODER_REPO, VOCODER_FILES, dest="vocos")


def _release(repo: str, arch: str, checkpoint: str, unsupported: str = "") -> ReleasedModel:
    """A release on the hub: `repo`'s subfolder `arch` holds its checkpoint and vocab.txt."""
    files = () if unsupported else (HubFiles(repo, (checkpoint, "vocab.txt"), subfolder=arch), VOCODER)
    return ReleasedModel(repo, arch, "base", files=files, arch=arch, id=f"{repo}/{arch}", name=arch, unsupported=unsupported, license=LICENSE)


def check_arch(arch: str) -> None:
    """`SpecError` unless koe runs architecture `arch` (E2-TTS and BigVGAN variants: not supported yet)."""
    if arch in ARCH_NAMES:
        return
    if arch.startswith("E2TTS"):
        raise SpecError(E2_UNSUPPORTED)
    if "bigvgan" in arch.lower():
        raise SpecError(BIGVGAN_UNSUPPORTED)
    raise SpecError(f"unknown F5-TTS architecture {arch!r}; koe knows: {', '.join(ARCH_NAMES)}")


def _parse(model: dict, where: Path):
    from koe.engines.f5_tts.config import parse_config

    try:
        return parse_config(model, where)
    except ValueError as e:
        raise SpecError(str(e)) from e


def _check_vocoder(folder: Path) -> None:
    """`SpecError` unless `folder` holds a Vocos vocoder (a BigVGAN one: not supported yet)."""
    if not folder.is_dir():
        raise SpecError(f"vocoder folder not found: {folder}")
    if any((folder / f).is_file() for f in ("bigvgan_generator.pt", "config.json")) and not (folder / "config.yaml").is_file():
        raise SpecError(f"{folder}: a BigVGAN vocoder is not supported yet; koe runs F5-TTS with the Vocos vocoder ({VOCODER_REPO})")
    missing = [f for f in VOCODER_FILES if not (folder / f).is_file()]
    if missing:
        raise SpecError(f"{folder}: not the Vocos vocoder: missing {', '.join(missing)} (get {VOCODER_REPO} from the hub)")


def _check_checkpoint(path: Path, model: dict, arch: str) -> None:
    """`SpecError` when a safetensors checkpoint's sizes are not those of `arch` (the wrong --arch)."""
    if path.suffix != ".safetensors":
        return  # a pickled checkpoint's shapes need torch to read: the strict load checks them
    shapes = {k.split("transformer.", 1)[-1]: v.get("shape") for k, v in safetensors_header(path).items() if isinstance(v, dict)}
    if not shapes:
        return
    blocks = {int(k.split(".")[1]) for k in shapes if k.startswith("transformer_blocks.") and k.split(".")[1].isdigit()}
    if not blocks:
        raise SpecError(f"{path}: not an F5-TTS DiT checkpoint (no transformer_blocks; E2-TTS is not supported yet)")
    out = shapes.get("proj_out.weight") or [None, None]
    text = shapes.get("text_embed.text_embed.weight") or [None, None]
    a = model["arch"]
    found = {"dim": out[-1], "depth": max(blocks) + 1, "text_dim": text[-1]}
    wanted = {"dim": a.get("dim"), "depth": a.get("depth"), "text_dim": a.get("text_dim") or model.get("mel_spec", {}).get("n_mel_channels", 100)}
    wrong = [k for k in found if found[k] is not None and wanted[k] is not None and int(found[k]) != int(wanted[k])]
    if wrong:
        has = ", ".join(f"{k} {found[k]}" for k in wrong)
        needs = ", ".join(f"{k} {wanted[k]}" for k in wrong)
        raise SpecError(f"{path}: this checkpoint has {has}, but {arch} has {needs}: is --arch right? (koe knows: {', '.join(ARCH_NAMES)})")


class F5Spec:
    family = FAMILY
    title = "F5-TTS"
    engine = "koe.engines.f5_tts.engine:F5TTSEngine"
    fixture = "koe.engines.f5_tts.fixtures:write_random_model"
    oracle = "koe.engines.f5_tts.oracle:ORACLE"  # the upstream package its parity tests compare against (koe.engines.oracle)
    bench = "koe.engines.f5_tts.bench:BENCH"  # what `koe bench --family f5_tts` runs (koe.engines.benchmark)
    fixture_variants = ("F5TTS_v1_Base", "F5TTS_Base")
    archs = ARCH_NAMES
    trainers = {"finetune": "koe.engines.f5_tts.finetune.run:train"}  # upstream's finetune_cli.py recipe (finetune/)
    released = (
        _release("SWivid/F5-TTS", "F5TTS_v1_Base", "model_1250000.safetensors"),
        _release("SWivid/F5-TTS", "F5TTS_Base", "model_1200000.safetensors"),
        _release("SWivid/E2-TTS", "E2TTS_Base", "model_1200000.safetensors", E2_UNSUPPORTED),
        _release("SWivid/F5-TTS", "F5TTS_Base_bigvgan", "model_1250000.pt", BIGVGAN_UNSUPPORTED),
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
            info=ModelInfo(FAMILY, variant, "base"),
            capabilities=capabilities(variant),
            required_files=REQUIRED_FILES,
            missing=tuple(missing),
            weight_files=weights + ((vocoder,) if vocoder.is_file() else ()),
            stored_dtype=stored,
            uses="voice cloning from a reference clip and its transcript (--voice NAME or --ref clip.wav --ref-text ...)",
            extra={"arch": arch, "vocoder": "vocos"},
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        return None  # F5-TTS has no preset voices: a library voice (a prepared reference) is the voice

    def assemble(self, folder: Path, arch: str | None = None, vocoder: Path | None = None) -> Assembly:
        """What `folder` (a release: checkpoint + vocab.txt) still needs: `config.yaml` for `arch`
        (when it has none) and the Vocos vocoder in `vocos/` (from `vocoder`, when given)."""
        folder = Path(folder)
        if arch is not None:
            check_arch(arch)
        checkpoints = checkpoint_files(folder)
        if not checkpoints:
            raise SpecError(f"{folder}: no F5-TTS checkpoint (model_<step>.safetensors or .pt)")
        if not (folder / "vocab.txt").is_file():
            raise SpecError(f"{folder}: missing vocab.txt (the release's token list, next to its checkpoint)")
        write: dict[str, str] = {}
        if (folder / "config.yaml").is_file():
            model = _model_section(folder)
            if model is None:
                raise SpecError(f"{folder}/config.yaml is not an F5-TTS config (upstream's schema: a `model:` section with `backbone` and `arch`)")
            _parse(model, folder / "config.yaml")
            name = str(model.get("name") or "")
            if arch is not None and name != arch:
                raise SpecError(f"{folder} already has a config.yaml (for {name or 'an unnamed arch'}): drop --arch, or remove that config.yaml to use {arch}")
        elif arch is None:
            raise SpecError(
                f"{folder}: an F5-TTS checkpoint without config.yaml (the release carries no config, the architecture is known by name): "
                f"pass --arch NAME, one of {', '.join(ARCH_NAMES)}"
            )
        else:
            from koe.engines.f5_tts.config import ARCHS, arch_yaml

            _check_checkpoint(checkpoints[0], ARCHS[arch], arch)
            write["config.yaml"] = arch_yaml(arch)
        copy: dict[str, Path] = {}
        if vocoder is not None:
            _check_vocoder(Path(vocoder))
            copy = {f"vocos/{f}": Path(vocoder) / f for f in VOCODER_FILES}
        elif not all((folder / "vocos" / f).is_file() for f in VOCODER_FILES):
            if (folder / "vocos").is_dir():
                _check_vocoder(folder / "vocos")
            raise SpecError(
                f"{folder}: no vocoder: F5-TTS needs the Vocos vocoder in vocos/ ({', '.join(VOCODER_FILES)}). Pass --vocoder DIR, "
                f"a download of {VOCODER_REPO} (`huggingface-cli download {VOCODER_REPO} --local-dir DIR`), "
                "or `koe models pull SWivid/F5-TTS --arch NAME` for the whole release"
            )
        return Assembly(write=write, copy=copy)

    def custom_release(self, ref: str, arch: str) -> ReleasedModel:
        """A checkpoint repo koe does not list (a fine-tune: `OWNER/NAME`, or `OWNER/NAME/SUBFOLDER`)
        of a known `arch`: its checkpoint and vocab.txt, plus the Vocos vocoder."""
        check_arch(arch)
        parts = ref.split("/")
        if len(parts) < 2 or any(not p for p in parts):
            raise SpecError(f"hub id {ref!r} should look like OWNER/NAME or OWNER/NAME/SUBFOLDER")
        repo, sub = "/".join(parts[:2]), "/".join(parts[2:])
        files = (HubFiles(repo, (*CHECKPOINT_GLOBS, "vocab.txt"), subfolder=sub), VOCODER)
        return ReleasedModel(repo, arch, "base", files=files, arch=arch, id=ref, name=parts[-1])


SPEC = F5Spec()
