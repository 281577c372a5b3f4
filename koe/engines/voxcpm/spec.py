"""VoxCPM without loading it: which folders are ours, what they can do.

Torch-free: reads `config.json` (upstream's `VoxCPMConfig`) and file names. A release folder is
what the hub repo holds: `config.json`, `model.safetensors` (or `pytorch_model.bin`),
`audiovae.safetensors` (or `audiovae.pth`) and the tokenizer files; `koe models pull
openbmb/VoxCPM2` fetches it whole.

Variants: `VoxCPM2` (architecture "voxcpm2": 30 languages, voice design, cloning from a clip
alone or with its transcript, 48 kHz out), `VoxCPM1.5` (architecture "voxcpm", 44.1 kHz) and
`VoxCPM-0.5B` (the first release: "voxcpm" at 16 kHz): continuation cloning from a clip and its
transcript, or the model's own voice.
"""

from __future__ import annotations

from pathlib import Path

from koe.engines.base import CLONE, CLONE_WITHOUT_TRANSCRIPT, DESIGN, NO_VOICE, Capabilities, Option, OptionsSchema
from koe.engines.licenses import APACHE_2_0
from koe.engines.spec import ModelDescription, ModelInfo, ReleasedModel, SpecError, VoiceAlias, folder_config, has_random_weights, safetensors_dtype

FAMILY = "voxcpm"
LICENSE = APACHE_2_0  # the released checkpoints' (openbmb/VoxCPM*)
LANGUAGES = ("auto",)  # the text's own language, no tag (VoxCPM2: 30 languages; 1.5: Chinese and English)
MIN_REFERENCE_S = 0.5
MAX_REFERENCE_S = 60.0
WEIGHTS = ("model.safetensors", "pytorch_model.bin")
VAE_WEIGHTS = ("audiovae.safetensors", "audiovae.pth")
TOKENIZER_FILES = ("tokenizer.json",)

# upstream's defaults (`VoxCPM.generate`); ranges as upstream's own CLI checks them where it does
DEFAULTS = {
    "cfg_value": 2.0,
    "inference_timesteps": 10,
    "min_len": 2,
    "max_len": 4096,
    "retry_badcase": True,
    "retry_badcase_max_times": 3,
    "retry_badcase_ratio_threshold": 6.0,
    "normalize": False,
    "denoise": False,
}


def options_schema() -> OptionsSchema:
    d = DEFAULTS
    return OptionsSchema(
        (
            Option(
                "cfg_value",
                "float",
                "classifier-free guidance of the patch DiT (higher follows the text and prompt more closely)",
                d["cfg_value"],
                low=0.1,
                high=10,
            ),
            Option("inference_timesteps", "int", "flow-matching steps per latent patch; fewer is faster", d["inference_timesteps"], low=1, high=100),
            Option("min_len", "int", "patches before the stop head may end the speech", d["min_len"], low=0, high=4096),
            Option("max_len", "int", "most patches of speech (also capped at 6 per text token + 10, as upstream)", d["max_len"], low=1, high=8192),
            Option(
                "retry_badcase",
                "bool",
                "make the speech again when it runs too long for the text (one-shot only, as upstream)",
                d["retry_badcase"],
                null="no retries, as upstream's retry_badcase=None (it tests the flag's truth)",
            ),
            Option("retry_badcase_max_times", "int", "runs at most with retry_badcase", d["retry_badcase_max_times"], low=1, high=20),
            Option(
                "retry_badcase_ratio_threshold",
                "float",
                "patches per text token that count as running too long",
                d["retry_badcase_ratio_threshold"],
                low=0,
                low_open=True,
                high=100,
            ),
            Option("normalize", "bool", "upstream's text normalisation (numbers, symbols): not supported yet", d["normalize"]),
            Option("denoise", "bool", "upstream's ZipEnhancer denoising of the prompt clips: not supported yet", d["denoise"]),
        )
    )


def _config(folder: Path) -> dict | None:
    raw = folder_config(folder)
    if raw is None:
        return None
    if "lm_config" in raw and "dit_config" in raw and str(raw.get("architecture", "voxcpm")).lower().startswith("voxcpm"):
        return raw
    return None


def variant_of(raw: dict) -> str:
    if str(raw.get("architecture", "voxcpm")).lower() == "voxcpm2":
        return "VoxCPM2"
    rate = (raw.get("audio_vae_config") or {}).get("sample_rate", 16000)
    return "VoxCPM1.5" if rate != 16000 else "VoxCPM-0.5B"


def output_rate(raw: dict) -> int:
    vae = raw.get("audio_vae_config") or {}
    if str(raw.get("architecture", "voxcpm")).lower() == "voxcpm2":
        return int(vae.get("out_sample_rate", 48000))
    return int(vae.get("sample_rate", 16000))


def stream_step(raw: dict) -> float:
    """Seconds of audio per latent patch (streaming's step)."""
    v2 = str(raw.get("architecture", "voxcpm")).lower() == "voxcpm2"
    vae = raw.get("audio_vae_config") or {}
    rates = vae.get("decoder_rates") or ([8, 6, 5, 2, 2, 2] if v2 else [8, 8, 5, 2])
    hop = 1
    for r in rates:
        hop *= int(r)
    return int(raw.get("patch_size", 4 if v2 else 2)) * hop / output_rate(raw)


PRECISIONS = ("fp32", "bf16", "int8")  # koe.runtime.precision: int8 in the two LMs (minicpm.MiniCPM.backbone)


def capabilities(variant: str, sample_rate: int, step_s: float) -> Capabilities:
    v2 = variant == "VoxCPM2"
    modes = {NO_VOICE, CLONE} | ({DESIGN, CLONE_WITHOUT_TRANSCRIPT} if v2 else set())
    return Capabilities(
        family=FAMILY,
        variant=variant,
        voice_modes=frozenset(modes),
        languages=LANGUAGES,
        sample_rate=sample_rate,
        instruct=v2,
        stream_step_s=round(step_s, 6),
        native_speed=False,
        batch=False,
        options=options_schema(),
        training=("finetune", "lora"),  # `koe train finetune` / `koe train lora` (finetune/)
        min_reference_s=MIN_REFERENCE_S,
        stream_is_one_shot=False,
        precisions=PRECISIONS,
        length_option="max_len",
    )


def _first(folder: Path, names: tuple[str, ...]) -> Path | None:
    return next((folder / n for n in names if (folder / n).is_file()), None)


def _size(variant: str) -> str:
    return {"VoxCPM2": "2B", "VoxCPM1.5": "0.8B", "VoxCPM-0.5B": "0.5B"}[variant]


class VoxCPMSpec:
    family = FAMILY
    title = "VoxCPM"
    engine = "koe.engines.voxcpm.engine:VoxCPMEngine"
    fixture = "koe.engines.voxcpm.fixtures:write_random_model"
    oracle = "koe.engines.voxcpm.oracle:ORACLE"  # the upstream package its parity tests compare against (koe.engines.oracle)
    bench = "koe.engines.voxcpm.bench:BENCH"  # what `koe bench --family voxcpm` runs (koe.engines.benchmark)
    fixture_variants = ("VoxCPM2", "VoxCPM1.5")
    trainers = {  # upstream's train_voxcpm_finetune.py recipe (finetune/): the whole model, or LoRA adapters (its lora config)
        "finetune": "koe.engines.voxcpm.finetune.run:train",
        "lora": "koe.engines.voxcpm.finetune.lora_run:train",
    }
    released = (
        ReleasedModel("openbmb/VoxCPM2", "VoxCPM2", "2B", name="VoxCPM2", license=LICENSE),
        ReleasedModel("openbmb/VoxCPM1.5", "VoxCPM1.5", "0.8B", name="VoxCPM1.5", license=LICENSE),
        ReleasedModel("openbmb/VoxCPM-0.5B", "VoxCPM-0.5B", "0.5B", name="VoxCPM-0.5B", license=LICENSE),
    )

    def probe(self, folder: Path) -> ModelInfo | None:
        raw = _config(Path(folder))
        if raw is None:
            return None
        variant = variant_of(raw)
        return ModelInfo(FAMILY, variant, _size(variant))

    def describe(self, folder: Path) -> ModelDescription:
        folder = Path(folder)
        raw = _config(folder)
        if raw is None:
            raise SpecError(f"{folder}: not a VoxCPM model (config.json with lm_config and dit_config)")
        from koe.engines.voxcpm.config import parse_config

        try:
            cfg = parse_config(raw, folder / "config.json")
        except ValueError as e:
            raise SpecError(str(e)) from e
        variant = variant_of(raw)
        weights, vae = _first(folder, WEIGHTS), _first(folder, VAE_WEIGHTS)
        missing = [f for f in TOKENIZER_FILES if not (folder / f).is_file()]
        if weights is None:
            missing.append("model.safetensors")
        if vae is None:
            missing.append("audiovae.safetensors")
        stored = (safetensors_dtype(weights) if weights is not None and weights.suffix == ".safetensors" else None) or cfg.dtype
        uses = (
            (
                'speech in the model\'s own voice, a designed voice (--instruct "a warm female voice"), or a clone of a clip '
                "(--ref clip.wav, with --ref-text for the closest clone)"
            )
            if cfg.v2
            else "speech in the model's own voice, or a clone of a clip and its transcript (--ref clip.wav --ref-text ...)"
        )
        return ModelDescription(
            info=ModelInfo(FAMILY, variant, _size(variant)),
            capabilities=capabilities(variant, output_rate(raw), stream_step(raw)),
            required_files=("config.json", *TOKENIZER_FILES, "model.safetensors|pytorch_model.bin", "audiovae.safetensors|audiovae.pth"),
            missing=tuple(missing),
            weight_files=tuple(p for p in (weights, vae) if p is not None),
            stored_dtype=stored,
            uses=uses,
            extra={
                "architecture": cfg.architecture,
                "patch_size": cfg.patch_size,
                "config_dtype": cfg.dtype,
                **({"lora_adapters": "lora_weights.safetensors (applied when loaded)"} if (folder / "lora_weights.safetensors").is_file() else {}),
            },
            random_weights=has_random_weights(folder),
            license=LICENSE,
        )

    def openai_voice(self, name: str, capabilities: Capabilities) -> VoiceAlias | None:
        return None  # no preset speakers: the model's own voice, a design, or a library voice


SPEC = VoxCPMSpec()
