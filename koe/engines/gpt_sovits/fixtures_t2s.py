"""A random GPT file (`s1*.ckpt`) in the released layout, for tests, goldens and the bench.

`write_gpt(path, size, seed)` writes upstream's dict `{"weight", "config", "info"}` with torch.save
(gpt_weights.py): `weight` under the released names (`model.*`, in upstream's order,
`released_shapes`), each tensor drawn in that order from one seeded `torch.Generator` in float32
and stored as float16, as the released files and upstream's trainer store them; `config` the
training YAML's sections as upstream's v2 config has them, with the size's `model` entries and
`data.max_sec`.

Sizes: `tiny` keeps the released phoneme vocabulary (732) and BERT width (1024, fixed upstream)
with a 64-wide, 2-layer, 2-head transformer and a 64-entry semantic codebook (+ EOS), so that a
random model reaches EOS within a few dozen steps; `max_sec` 1 (upstream stops after 50 new
tokens). `real` is v2's architecture (512 wide, 24 layers, 16 heads, 1024 codes + EOS, max_sec 54).

Scales: N(0, 1) embeddings, LayerNorm weights near 1, positional alphas near 1, small biases,
N(0, 1/fan_in) elsewhere; the output layer's EOS row 1.5 times louder, so that decoding ends at EOS
within a few dozen steps as often as at the early stop.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path

import torch

from koe.engines.gpt_sovits.gpt_weights import PREFIX, GPTConfig
from koe.engines.gpt_sovits.t2s import BERT_DIM

__all__ = ["SIZES", "gpt_config", "random_gpt_state", "released_shapes", "write_gpt", "yaml_config"]

SIZES = {
    "tiny": GPTConfig(vocab_size=65, phoneme_vocab_size=732, embedding_dim=64, hidden_dim=64, heads=2, layers=2, eos=64, max_sec=1),
    # tiny with the released vocabulary: the prompt's semantic codes (SoVITS's 1024-row codebook) fit it
    "tiny_vocab": GPTConfig(vocab_size=1025, phoneme_vocab_size=732, embedding_dim=64, hidden_dim=64, heads=2, layers=2, eos=1024, max_sec=1),
    "real": GPTConfig(vocab_size=1025, phoneme_vocab_size=732, embedding_dim=512, hidden_dim=512, heads=16, layers=24, eos=1024, max_sec=54),
}


EOS_GAIN = 1.5


def gpt_config(size: str = "tiny") -> GPTConfig:
    if size not in SIZES:
        raise ValueError(f"unknown GPT size {size!r}: one of {sorted(SIZES)}")
    return SIZES[size]


def released_shapes(config: GPTConfig) -> dict[str, tuple[int, ...]]:
    """Every tensor of a GPT file's `weight`, by its released name, in upstream's order."""
    c = config.hidden_dim
    shapes: dict[str, tuple[int, ...]] = {
        "bert_proj.weight": (c, BERT_DIM),
        "bert_proj.bias": (c,),
        "ar_text_embedding.word_embeddings.weight": (config.phoneme_vocab_size, c),
        "ar_text_position.alpha": (1,),
        "ar_audio_embedding.word_embeddings.weight": (config.vocab_size, c),
        "ar_audio_position.alpha": (1,),
    }
    for i in range(config.layers):
        layer = f"h.layers.{i}."
        shapes |= {
            layer + "self_attn.in_proj_weight": (3 * c, c),
            layer + "self_attn.in_proj_bias": (3 * c,),
            layer + "self_attn.out_proj.weight": (c, c),
            layer + "self_attn.out_proj.bias": (c,),
            layer + "linear1.weight": (4 * c, c),
            layer + "linear1.bias": (4 * c,),
            layer + "linear2.weight": (c, 4 * c),
            layer + "linear2.bias": (c,),
            layer + "norm1.weight": (c,),
            layer + "norm1.bias": (c,),
            layer + "norm2.weight": (c,),
            layer + "norm2.bias": (c,),
        }
    shapes["ar_predict_layer.weight"] = (config.vocab_size, c)
    return {PREFIX + name: shape for name, shape in shapes.items()}


def _random(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    noise = torch.randn(shape, generator=g)
    if name.endswith("alpha") or ("norm" in name and name.endswith("weight")):
        return 1.0 + 0.05 * noise
    if name.endswith("bias"):
        return 0.05 * noise
    if "embedding" in name:
        return noise
    return noise / math.sqrt(shape[-1])


def random_gpt_state(size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """The `weight` dict `write_gpt` saves: released names and order, float16, seeded."""
    config = gpt_config(size)
    g = torch.Generator().manual_seed(seed)
    state = OrderedDict((name, _random(name, shape, g)) for name, shape in released_shapes(config).items())
    state[PREFIX + "ar_predict_layer.weight"][config.eos] *= EOS_GAIN
    return OrderedDict((name, t.half()) for name, t in state.items())


def yaml_config(config: GPTConfig) -> dict:
    """The `config` upstream's trainer saves: its v2 YAML's sections, the size's entries set."""
    return {
        "train": {"seed": 1234, "epochs": 15, "batch_size": 8, "save_every_n_epoch": 5, "precision": "16-mixed", "gradient_clip": 1.0},
        "optimizer": {"lr": 0.01, "lr_init": 1e-05, "lr_end": 0.0001, "warmup_steps": 2000, "decay_steps": 40000},
        "data": {"max_eval_sample": 8, "max_sec": config.max_sec, "num_workers": 4, "pad_val": config.eos},
        "model": {
            "vocab_size": config.vocab_size,
            "phoneme_vocab_size": config.phoneme_vocab_size,
            "embedding_dim": config.embedding_dim,
            "hidden_dim": config.hidden_dim,
            "head": config.heads,
            "linear_units": 4 * config.hidden_dim,
            "n_layer": config.layers,
            "dropout": 0,
            "EOS": config.eos,
            "random_bert": 0,
        },
        "inference": {"top_k": 15},
    }


def write_gpt(path: str | Path, size: str = "tiny", seed: int = 0) -> Path:
    """Write a GPT file at `path` (see the module docstring) and return it; its weights'
    `state_sha256` is `koe.runtime.weights.state_sha256(random_gpt_state(size, seed))`."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save({"weight": random_gpt_state(size, seed), "config": yaml_config(gpt_config(size)), "info": "GPT-e1"}, path)
    return path
