"""Random-weight F5-TTS model folders in the layout koe loads (the release plus its config).

A release is a checkpoint (`model_<step>.safetensors`, EMA weights under `ema_model.`) and
`vocab.txt`; the architecture is upstream's yaml, which koe writes as `config.yaml`; the vocoder
is Vocos in `vocos/` (`config.yaml` + `pytorch_model.bin`, as charactr/vocos-mel-24khz ships).
"tiny" runs in seconds; "real" is the released size (DiT dim 1024, depth 22, Vocos dim 512 x 8,
the released vocabulary's size) for the benchmark. Weight values are random: speed does not
depend on them. Upstream loads these folders with no missing or unexpected keys. The folder also
holds koe's random-weights marker (`koe.engines.spec.mark_random_weights`), which upstream never reads.
"""

from __future__ import annotations

import copy
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file

from koe.engines.f5_tts.config import ARCHS, arch_yaml, parse_config
from koe.engines.spec import mark_random_weights

__all__ = ["RELEASED_VOCAB_SIZE", "VARIANTS", "write_random_model", "write_vocab"]

VARIANTS = ("F5TTS_v1_Base", "F5TTS_Base")
RELEASED_VOCAB_SIZE = 2545  # lines of the released vocab.txt
CHECKPOINT_STEP = {"F5TTS_v1_Base": 1250000, "F5TTS_Base": 1200000}

_TINY_ARCH = {"dim": 64, "depth": 2, "heads": 2, "ff_mult": 2, "text_dim": 32, "conv_layers": 2}
_TINY_VOCOS = {"dim": 32, "intermediate_dim": 64, "num_layers": 2}
_REAL_VOCOS = {"dim": 512, "intermediate_dim": 1536, "num_layers": 8}
_PINYIN = [
    "a1",
    "ai4",
    "an1",
    "ba1",
    "bu4",
    "de5",
    "ge4",
    "guo2",
    "hao3",
    "hen3",
    "ji1",
    "jia1",
    "jin1",
    "le5",
    "ma5",
    "men5",
    "ni3",
    "qi4",
    "ren2",
    "shi4",
    "tian1",
    "wo3",
    "xie4",
    "yi1",
    "yi2",
    "yi4",
    "you3",
    "zai4",
    "zhong1",
    "zhe4",
]


def write_vocab(path: Path, size: int | None = None) -> list[str]:
    """A vocab.txt like the release's: space first (id 0, also the unknown token), ASCII, CJK
    punctuation, pinyin syllables; padded with placeholder tokens up to `size`."""
    tokens = [" "] + [chr(c) for c in range(33, 127)] + list("，。！？；：、“”‘’…—") + _PINYIN
    if size is not None:
        tokens += [f"<tok{i}>" for i in range(size - len(tokens))]
    path.write_text("".join(t + "\n" for t in tokens), encoding="utf-8")
    return tokens


def _vocos_config(v: dict) -> dict:
    return {
        "feature_extractor": {
            "class_path": "vocos.feature_extractors.MelSpectrogramFeatures",
            "init_args": {"sample_rate": 24000, "n_fft": 1024, "hop_length": 256, "n_mels": 100, "padding": "center"},
        },
        "backbone": {
            "class_path": "vocos.models.VocosBackbone",
            "init_args": {"input_channels": 100, "dim": v["dim"], "intermediate_dim": v["intermediate_dim"], "num_layers": v["num_layers"]},
        },
        "head": {"class_path": "vocos.heads.ISTFTHead", "init_args": {"dim": v["dim"], "n_fft": 1024, "hop_length": 256, "padding": "same"}},
    }


def _randomise(module: torch.nn.Module, generator: torch.Generator, scale: float) -> None:
    with torch.no_grad():
        for name, p in module.named_parameters():
            if name.endswith(("norm.weight",)):
                continue
            p.copy_(torch.randn(p.shape, generator=generator) * scale)


def _triangles(bins: int, mels: int, sr: int) -> torch.Tensor:
    """An HTK-scale triangular filterbank (bins, mels): a plausible stand-in for the stored buffer."""
    hz = torch.linspace(0, sr / 2, bins)
    top = 2595.0 * torch.log10(torch.tensor(1.0 + sr / 2 / 700.0))
    edges = 700.0 * (10 ** (torch.linspace(0, float(top), mels + 2) / 2595.0) - 1.0)
    rise = (hz[:, None] - edges[None, :-2]) / (edges[1:-1] - edges[:-2])
    fall = (edges[None, 2:] - hz[:, None]) / (edges[2:] - edges[1:-1])
    return torch.clamp(torch.minimum(rise, fall), min=0.0)


def write_vocoder(folder: Path, size: str = "tiny", seed: int = 1) -> Path:
    """A random-weight Vocos in `folder` (config.yaml + pytorch_model.bin)."""
    from koe.nn.vocos import Vocos, VocosConfig

    folder.mkdir(parents=True, exist_ok=True)
    v = _REAL_VOCOS if size == "real" else _TINY_VOCOS
    (folder / "config.yaml").write_text(yaml.safe_dump(_vocos_config(v), sort_keys=False))
    vocos = Vocos(VocosConfig.from_yaml(folder / "config.yaml"))
    _randomise(vocos, torch.Generator().manual_seed(seed), 0.05)
    state = {k: t.contiguous() for k, t in vocos.state_dict().items()}
    # the feature extractor's buffers, as the release carries them (koe decodes only and skips them)
    state["feature_extractor.mel_spec.spectrogram.window"] = torch.hann_window(1024)
    state["feature_extractor.mel_spec.mel_scale.fb"] = _triangles(513, 100, 24000)
    torch.save(state, folder / "pytorch_model.bin")
    return folder


def write_random_model(folder: str | Path, variant: str = "F5TTS_v1_Base", size: str = "tiny", *, seed: int = 0, checkpoint: str = "safetensors") -> Path:
    """Write a random-weight F5-TTS folder for `variant` (F5TTS_v1_Base, F5TTS_Base) at `size`
    ("tiny" or "real"); `checkpoint="pt"` writes a training-style `.pt` with `ema_model_state_dict`."""
    from koe.engines.f5_tts.dit import F5Model

    if variant not in VARIANTS:
        raise ValueError(f"unknown F5-TTS variant {variant!r}; choose one of {', '.join(VARIANTS)}")
    if size not in ("tiny", "real"):
        raise ValueError(f"unknown size {size!r}; choose tiny or real")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    model = copy.deepcopy(ARCHS[variant])
    if size == "tiny":
        model["arch"].update(_TINY_ARCH)
    (folder / "config.yaml").write_text(arch_yaml(variant, model))
    tokens = write_vocab(folder / "vocab.txt", RELEASED_VOCAB_SIZE if size == "real" else None)
    cfg = parse_config(model)
    net = F5Model(cfg, vocab_size=len(tokens))
    _randomise(net, torch.Generator().manual_seed(seed), 0.05 if size == "tiny" else 0.02)
    state = {f"ema_model.{k}": t.contiguous() for k, t in net.state_dict().items()}
    # the EMA's own counters, as in the release (fine-tuning loads them into its EMA; inference skips them)
    state.update(initted=torch.tensor(True), step=torch.tensor(CHECKPOINT_STEP[variant]))
    name = f"model_{CHECKPOINT_STEP[variant]}"
    if checkpoint == "pt":
        torch.save({"ema_model_state_dict": state, "step": CHECKPOINT_STEP[variant]}, folder / f"{name}.pt")
    else:
        save_file(state, str(folder / f"{name}.safetensors"))
    write_vocoder(folder / "vocos", size, seed + 1)
    mark_random_weights(folder, __name__)
    return folder
