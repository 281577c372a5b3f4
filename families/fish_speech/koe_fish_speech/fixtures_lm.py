"""Random LMs in Fish Speech S2's released layout: `config.json` (`fish_qwen3_omni`, the released field
names) and `model.safetensors` (`text_model.model.*`, `audio_decoder.*`), deterministic.

`tiny`: 128-wide stacks of 2 slow and 2 fast layers (heads of 64), the released vocabulary (155,776
ids, so the tokenizer's real ids apply: `fixtures_tokenizer.write_tokenizer` writes its files),
10 codebooks of 4096, the released context (32,768). Weights are scaled so that sampling is not
degenerate: the token logits spread a few units over the semantic tokens, <|im_end|>'s row is made
unlikely enough that decoding runs a while before it. `real`: the released sizes (36 layers, 2560
wide, 32 / 8 heads of 128, fast 4 layers) in bfloat16, optionally with fewer slow `layers`.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe_fish_speech.fixtures_tokenizer import SEMANTIC_BEGIN_ID, SEMANTIC_END_ID, VOCAB_SIZE

__all__ = ["IM_END_ID", "lm_config_json", "lm_state", "write_lm"]

IM_END_ID = 151645
_SIZES = {
    "tiny": dict(dim=128, n_head=2, n_local_heads=1, head_dim=64, intermediate_size=256, n_layer=2, fast_layers=2),
    "real": dict(dim=2560, n_head=32, n_local_heads=8, head_dim=128, intermediate_size=9728, n_layer=36, fast_layers=4),
}


def lm_config_json(size: str = "tiny", layers: int | None = None) -> dict:
    """config.json of a `size` LM, as the release writes it."""
    if size not in _SIZES:
        raise ValueError(f"size must be one of {sorted(_SIZES)}, got {size!r}")
    s = _SIZES[size]
    common = dict(n_head=s["n_head"], n_local_heads=s["n_local_heads"], head_dim=s["head_dim"], dim=s["dim"], intermediate_size=s["intermediate_size"])
    common.update(rope_base=1000000, norm_eps=1e-06, attention_qkv_bias=False, attention_o_bias=False)
    return {
        "model_type": "fish_qwen3_omni",
        "dtype": "bfloat16",
        "eos_token_id": IM_END_ID,
        "pad_token_id": 151669,
        "audio_pad_token_id": 151677,
        "semantic_start_token_id": SEMANTIC_BEGIN_ID,
        "semantic_end_token_id": SEMANTIC_END_ID,
        "text_config": {
            **common,
            "model_type": "fish_qwen3",
            "vocab_size": VOCAB_SIZE,
            "n_layer": layers or s["n_layer"],
            "max_seq_len": 32768,
            "tie_word_embeddings": True,
            "attention_qk_norm": True,
        },
        "audio_decoder_config": {
            **common,
            "model_type": "fish_qwen3_audio_decoder",
            "vocab_size": 4096,
            "num_codebooks": 10,
            "n_layer": s["fast_layers"],
            "text_dim": s["dim"],
            "max_seq_len": 11,
            "attention_qk_norm": False,
        },
    }


def _shapes(config: dict) -> list[tuple[str, tuple[int, ...], str]]:
    """(released name, shape, kind) of every tensor, in the order they are filled."""
    t, a = config["text_config"], config["audio_decoder_config"]
    out: list[tuple[str, tuple[int, ...], str]] = [("text_model.model.embeddings.weight", (t["vocab_size"], t["dim"]), "embedding")]

    def stack(prefix: str, c: dict, qk_norm: bool) -> None:
        dim, heads, kv, hd, inter = c["dim"], c["n_head"], c["n_local_heads"], c["head_dim"], c["intermediate_size"]
        for i in range(c["n_layer"]):
            p = f"{prefix}layers.{i}."
            out.append((p + "attention.wqkv.weight", ((heads + 2 * kv) * hd, dim), "linear"))
            out.append((p + "attention.wo.weight", (dim, heads * hd), "linear"))
            if qk_norm:
                out.append((p + "attention.q_norm.weight", (hd,), "norm"))
                out.append((p + "attention.k_norm.weight", (hd,), "norm"))
            out.append((p + "feed_forward.w1.weight", (inter, dim), "linear"))
            out.append((p + "feed_forward.w3.weight", (inter, dim), "linear"))
            out.append((p + "feed_forward.w2.weight", (dim, inter), "linear"))
            out.append((p + "attention_norm.weight", (dim,), "norm"))
            out.append((p + "ffn_norm.weight", (dim,), "norm"))

    stack("text_model.model.", t, True)
    out.append(("text_model.model.norm.weight", (t["dim"],), "norm"))
    out.append(("audio_decoder.codebook_embeddings.weight", (a["vocab_size"] * a["num_codebooks"], t["dim"]), "codebook"))
    out.append(("audio_decoder.embeddings.weight", (a["vocab_size"], a["dim"]), "codebook"))
    stack("audio_decoder.", a, False)
    out.append(("audio_decoder.norm.weight", (a["dim"],), "norm"))
    out.append(("audio_decoder.output.weight", (a["vocab_size"], a["dim"]), "head"))
    return out


def lm_state(config: dict, seed: int = 0, dtype: torch.dtype = torch.float32) -> dict[str, torch.Tensor]:
    """The random tensors of an LM of `config` (released names), from a generator seeded with `seed`."""
    g = torch.Generator().manual_seed(seed)
    spread = 3.0  # the logits' spread over the vocabulary, in units
    state: dict[str, torch.Tensor] = {}
    for name, shape, kind in _shapes(config):
        if kind == "norm":
            w = 1.0 + 0.1 * torch.randn(shape, generator=g)
        elif kind == "linear":
            w = torch.randn(shape, generator=g) / math.sqrt(shape[1])
        elif kind in ("embedding", "head"):
            w = torch.randn(shape, generator=g) * (spread / math.sqrt(shape[1]))
        else:
            w = torch.randn(shape, generator=g) * (0.5 / math.sqrt(shape[1]))
        state[name] = w.to(dtype)
    state["text_model.model.embeddings.weight"][IM_END_ID] *= 2.0  # <|im_end|> likelier than a typical semantic token: decoding ends, after a while
    return state


def write_lm(folder: str | Path, size: str = "tiny", seed: int = 0, dtype: torch.dtype = torch.float32, layers: int | None = None) -> dict[str, torch.Tensor]:
    """Write config.json and model.safetensors of a random `size` LM into `folder`; returns its state (released names)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if size == "real" and dtype == torch.float32:
        dtype = torch.bfloat16  # the released dtype
    config = lm_config_json(size, layers)
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n", encoding="utf-8")
    state = lm_state(config, seed, dtype)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return state
