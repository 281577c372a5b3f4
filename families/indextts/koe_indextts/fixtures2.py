"""A random-weight IndexTTS 2 release folder, written deterministically by koe, in the released
layout with its auxiliary models where upstream's downloader keeps them (`hf_cache/`): upstream's
`IndexTTS2(cfg_path, model_dir, aux_paths=...)` loads it with no missing or unexpected keys.

Two sizes. "tiny" (the goldens' folder: its bytes must not change): upstream hard-codes some
widths, so even it is not small: the GPT is 1280 wide (s2mel's `gpt_layer` takes 1280), w2v-BERT is
1024 wide with 17 layers (the GPT reads its layer 17 at width 1024), CAM++ has its released widths;
everything else is shrunk. "real" (the benchmark's): the released sizes, as IndexTeam/IndexTTS-2's
config.yaml gives them (GPT 24 x 1280 with 20 heads, 1815 mel and 600 text positions, 12000 text
tokens; conditioning 6 x 512 with 2048 units and 8 heads, emotion conditioning 4 x 512 with 1024
units and 4 heads; semantic codec 8192 x 8 with Vocos 384 / 2048 / 12; s2mel's DiT 13 x 512 with 8
heads, WaveNet 8 x 512, length regulator 512 channels), w2v-BERT 2.0 at transformers' defaults (24
layers, 4096 units, kernel 31), CAM++, and BigVGAN v2 22 kHz 80-band 256x at 1536 channels.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch
import yaml
from safetensors.torch import save_file

from koe_indextts.fixtures import random_state, state_sha256

EMO_NUM = [3, 17, 2, 8, 4, 5, 10, 24]  # the release's rows per emotion in feat1.pt / feat2.pt
STOP_BIAS = 3.25  # the tiny GPT's stop code head bias raised so that it ends its searches (the real size's is left as drawn: its searches reach the cap)
VOCODER_GAIN = 0.001  # conv_post's gain scaled down: BigVGAN v2's six stages grow its input some 50-fold
CONFORMER = {"output_size": 32, "linear_units": 64, "attention_heads": 2, "num_blocks": 1, "input_layer": "conv2d2", "perceiver_mult": 2}
W2V = {"hidden_size": 1024, "num_hidden_layers": 17, "num_attention_heads": 16, "intermediate_size": 8, "conv_depthwise_kernel_size": 3}
SIZES = ("tiny", "real")
# the released sizes where they differ from the tiny folder's (w2v-BERT 2.0: every key at transformers' default)
REAL_GPT = {
    "max_mel_tokens": 1815,
    "max_text_tokens": 600,
    "layers": 24,
    "number_text_tokens": 12000,
    "condition_module": {"output_size": 512, "linear_units": 2048, "attention_heads": 8, "num_blocks": 6, "input_layer": "conv2d2", "perceiver_mult": 2},
    "emo_condition_module": {"output_size": 512, "linear_units": 1024, "attention_heads": 4, "num_blocks": 4, "input_layer": "conv2d2", "perceiver_mult": 2},
}
REAL_CODEC = {"vocos_dim": 384, "vocos_intermediate_dim": 2048, "vocos_num_layers": 12}
REAL_S2MEL = {
    "length_regulator": {"channels": 512, "content_codebook_size": 2048},
    "DiT": {"hidden_dim": 512, "num_heads": 8, "depth": 13, "content_dim": 512, "content_codebook_size": 1024},
    "wavenet": {"hidden_dim": 512, "num_layers": 8},
}
REAL_W2V: dict = {}
REAL_VOCODER = {"upsample_initial_channel": 1536}
PREPROCESSOR = {
    "feature_extractor_type": "SeamlessM4TFeatureExtractor",
    "feature_size": 80,
    "num_mel_bins": 80,
    "padding_side": "right",
    "padding_value": 1,
    "processor_class": "Wav2Vec2BertProcessor",
    "return_attention_mask": True,
    "sampling_rate": 16000,
    "stride": 2,
}
VOCODER = {
    "resblock": "1",
    "upsample_rates": [4, 4, 2, 2, 2, 2],
    "upsample_kernel_sizes": [8, 8, 4, 4, 4, 4],
    "upsample_initial_channel": 64,
    "resblock_kernel_sizes": [3, 7, 11],
    "resblock_dilation_sizes": [[1, 3, 5], [1, 3, 5], [1, 3, 5]],
    "use_tanh_at_final": False,
    "use_bias_at_final": False,
    "activation": "snakebeta",
    "snake_logscale": True,
    "num_mels": 80,
    "n_fft": 1024,
    "hop_size": 256,
    "win_size": 1024,
    "sampling_rate": 22050,
    "fmin": 0,
    "fmax": None,
}


def _check(size: str) -> None:
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {list(SIZES)}")


def w2v_config(size: str = "tiny") -> dict:
    """w2v-BERT's `config.json` keys that differ from transformers' defaults at `size`."""
    _check(size)
    return dict(W2V) if size == "tiny" else dict(REAL_W2V)


def vocoder_config(size: str = "tiny") -> dict:
    """BigVGAN v2's `config.json` at `size`."""
    _check(size)
    return dict(VOCODER) if size == "tiny" else {**VOCODER, **REAL_VOCODER}


def release_config(size: str = "tiny") -> dict:
    """A release 2 `config.yaml` as data (upstream's sections and keys) at `size`."""
    _check(size)
    gpt = {
        "model_dim": 1280,
        "max_mel_tokens": 250,
        "max_text_tokens": 120,
        "heads": 20,
        "use_mel_codes_as_input": True,
        "mel_length_compression": 1024,
        "layers": 1,
        "number_text_tokens": 600,
        "number_mel_codes": 8194,
        "start_mel_token": 8192,
        "stop_mel_token": 8193,
        "start_text_token": 0,
        "stop_text_token": 1,
        "train_solo_embeddings": False,
        "condition_type": "conformer_perceiver",
        "condition_module": dict(CONFORMER),
        "emo_condition_module": dict(CONFORMER),
    }
    s2mel = {
        "preprocess_params": {"sr": 22050, "spect_params": {"n_fft": 1024, "win_length": 1024, "hop_length": 256, "n_mels": 80, "fmin": 0, "fmax": "None"}},
        "dit_type": "DiT",
        "reg_loss_type": "l1",
        "style_encoder": {"dim": 192},
        "length_regulator": {
            "channels": 32,
            "is_discrete": False,
            "in_channels": 1024,
            "content_codebook_size": 16,
            "sampling_ratios": [1, 1, 1, 1],
            "vector_quantize": False,
            "n_codebooks": 1,
            "quantizer_dropout": 0.0,
            "f0_condition": False,
            "n_f0_bins": 512,
        },
        "DiT": {
            "hidden_dim": 64,
            "num_heads": 4,
            "depth": 3,
            "class_dropout_prob": 0.1,
            "block_size": 8192,
            "in_channels": 80,
            "style_condition": True,
            "final_layer_type": "wavenet",
            "target": "mel",
            "content_dim": 32,
            "content_codebook_size": 16,
            "content_type": "discrete",
            "f0_condition": False,
            "n_f0_bins": 512,
            "content_codebooks": 1,
            "is_causal": False,
            "long_skip_connection": True,
            "zero_prompt_speech_token": False,
            "time_as_token": False,
            "style_as_token": False,
            "uvit_skip_connection": True,
            "add_resblock_in_transformer": False,
        },
        "wavenet": {"hidden_dim": 64, "num_layers": 2, "kernel_size": 5, "dilation_rate": 1, "p_dropout": 0.2, "style_condition": True},
    }
    codec = {"codebook_size": 8192, "hidden_size": 1024, "codebook_dim": 8, "vocos_dim": 32, "vocos_intermediate_dim": 48, "vocos_num_layers": 1}
    if size == "real":
        gpt.update(REAL_GPT)
        codec.update(REAL_CODEC)
        for section, values in REAL_S2MEL.items():
            s2mel[section].update(values)
    return {
        "dataset": {"bpe_model": "bpe.model", "sample_rate": 24000, "squeeze": False},
        "gpt": gpt,
        "semantic_codec": codec,
        "s2mel": s2mel,
        "gpt_checkpoint": "gpt.pth",
        "w2v_stat": "wav2vec2bert_stats.pt",
        "s2mel_checkpoint": "s2mel.pth",
        "emo_matrix": "feat2.pt",
        "spk_matrix": "feat1.pt",
        "emo_num": list(EMO_NUM),
        "qwen_emo_path": "qwen0.6bemo4-merge/",
        "vocoder": {"type": "bigvgan", "name": "nvidia/bigvgan_v2_22khz_80band_256x"},
        "version": 2.0,
    }


def _gpt_state(config: dict, seed: int, stop_bias: float = STOP_BIAS) -> dict[str, torch.Tensor]:
    from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
    from koe_indextts.voice_lm import EmotionSpeechLM, GPTConfig

    gpt = config["gpt"]
    state: dict[str, torch.Tensor] = {}
    for offset, (prefix, cfg) in enumerate((("", ConditioningConfig.speaker(gpt, input_size=1024)), ("emo_", ConditioningConfig.emotion(gpt)))):
        module = SpeechConditioning(cfg)
        own = module.state_dict()
        for key, value in random_state(module, seed + offset).items():
            state[prefix + key] = own[key].clone() if key.endswith("pos_enc.pe") else value
    with torch.device("meta"):
        lm = EmotionSpeechLM(GPTConfig.from_dict(gpt))
    state.update(random_state(lm, seed + 2))
    if stop_bias:
        state["mel_head.bias"][gpt["stop_mel_token"]] += stop_bias
    return state


def _s2mel_checkpoint(config: dict, seed: int) -> dict:
    from koe_indextts.s2mel import S2Mel, S2MelConfig

    module = S2Mel(S2MelConfig.from_dict(config["s2mel"]))
    own = module.state_dict()
    state = random_state(module, seed)
    net: dict[str, dict[str, torch.Tensor]] = {}
    for key, value in state.items():
        group, rest = key.split(".", 1)
        net.setdefault(group, {})[rest] = own[key].clone() if key.endswith(".freqs") else value
    return {"net": net}


def _w2v_state(seed: int, size: str = "tiny") -> dict[str, torch.Tensor]:
    from koe_indextts.w2vbert import W2VBert, W2VBertConfig

    config = W2VBertConfig(**w2v_config(size))
    with torch.device("meta"):
        model = W2VBert(config, config.num_hidden_layers)
    return random_state(model, seed)


def _codec_state(config: dict, seed: int) -> dict[str, torch.Tensor]:
    from koe_indextts.semantic_codec import SemanticCodec, SemanticCodecConfig

    with torch.device("meta"):
        codec = SemanticCodec(SemanticCodecConfig.from_dict(config["semantic_codec"]))
    return random_state(codec, seed)


def _campplus_state(seed: int) -> dict[str, torch.Tensor]:
    from koe_indextts.campplus import CAMPPlus

    with torch.device("meta"):
        module = CAMPPlus()
    state = random_state(module, seed)
    for key in state:
        if key.endswith("running_var"):
            state[key] = state[key].abs() + 0.5
    return state


def _vocoder_state(seed: int, size: str = "tiny") -> dict[str, torch.Tensor]:
    from koe_indextts.bigvgan2 import BigVGAN2, BigVGAN2Config

    with torch.device("meta"):
        module = BigVGAN2(BigVGAN2Config.from_dict(vocoder_config(size)))
    own = BigVGAN2(BigVGAN2Config.from_dict(VOCODER)).state_dict()  # the anti-aliasing filters do not depend on widths
    state = random_state(module, seed)
    for key in state:
        if key.endswith(".filter"):
            state[key] = own[key].clone()
    state["conv_post.weight_g"] = state["conv_post.weight_g"] * VOCODER_GAIN
    return state


def release_states(seed: int = 0, size: str = "tiny") -> dict[str, dict]:
    """Every weight file's state at `size`, by file (relative to the folder)."""
    from koe_indextts.config import AUX_CAMPPLUS, AUX_SEMANTIC_CODEC, AUX_W2V_BERT

    config = release_config(size)
    g = torch.Generator().manual_seed(seed + 7)
    rows, width = sum(EMO_NUM), config["gpt"]["model_dim"]
    return {
        "gpt.pth": _gpt_state(config, seed, STOP_BIAS if size == "tiny" else 0.0),
        "s2mel.pth": _s2mel_checkpoint(config, seed + 3),
        f"{AUX_W2V_BERT}/model.safetensors": _w2v_state(seed + 4, size),
        AUX_SEMANTIC_CODEC: _codec_state(config, seed + 5),
        AUX_CAMPPLUS: _campplus_state(seed + 6),
        "hf_cache/bigvgan/bigvgan_generator.pt": {"generator": _vocoder_state(seed + 8, size)},
        "wav2vec2bert_stats.pt": {"mean": 0.1 * torch.randn(1024, generator=g), "var": 0.5 + torch.rand(1024, generator=g)},
        "feat1.pt": torch.randn(rows, 192, generator=g),
        "feat2.pt": 0.1 * torch.randn(rows, width, generator=g),
    }


def states_sha256(states: dict[str, dict]) -> dict[str, str]:
    """One hash per weight file (0-d tensors seen as 1-d)."""
    out = {}
    for name, state in states.items():
        if isinstance(state, torch.Tensor):
            state = {"": state}
        if "net" in state:
            state = {f"{g}.{k}": v for g, group in state["net"].items() for k, v in group.items()}
        if "generator" in state:
            state = state["generator"]
        out[name] = state_sha256({k: v.reshape(1) if v.dim() == 0 else v for k, v in state.items()})
    return out


def write_release_files(folder: str | Path, config: dict, states: dict[str, dict], size: str) -> Path:
    """What releases 2 and 2.5 write alike: `config.yaml`, each weight file of `states` (by its name:
    safetensors or `torch.save`) and the auxiliary models' configs (w2v-BERT's and its feature
    extractor's, BigVGAN's) at `size`."""
    from koe_indextts.config import AUX_BIGVGAN, AUX_W2V_BERT
    from koe_indextts.w2vbert import W2VBertConfig

    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
    for name, state in states.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if name.endswith(".safetensors"):
            save_file({k: v.contiguous() for k, v in state.items()}, str(path))
        else:
            torch.save(state, path)
    w2v = {
        "model_type": "wav2vec2-bert",
        "architectures": ["Wav2Vec2BertModel"],
        "apply_spec_augment": False,
        **dataclasses.asdict(W2VBertConfig(**w2v_config(size))),
    }
    (folder / AUX_W2V_BERT / "config.json").write_text(json.dumps(w2v, indent=2))
    (folder / AUX_W2V_BERT / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2))
    (folder / AUX_BIGVGAN / "config.json").write_text(json.dumps(vocoder_config(size), indent=2))
    return folder


def write_random_model2(folder: str | Path, seed: int = 0, size: str = "tiny") -> Path:
    """A release 2 folder at `size` ("tiny": the goldens'; "real": the released sizes), marked as random weights."""
    from koe.engines.spec import mark_random_weights
    from koe_indextts.fixtures_text import write_bpe_model

    folder = write_release_files(folder, release_config(size), release_states(seed, size), size)
    write_bpe_model(folder / "bpe.model")
    mark_random_weights(folder, "koe_indextts.fixtures2:write_random_model2")
    return folder


# -- the emotion LM (upstream's QwenEmotion folder, `qwen0.6bemo4-merge/`) ---------------------------
EMOTION_LM_FOLDER = "qwen0.6bemo4-merge"
EMOTION_LM_CONFIG = {  # Qwen3-0.6B's config.json, shrunk to 2 layers of width 16 (its vocabulary kept: the ids are Qwen3's)
    "architectures": ["Qwen3ForCausalLM"],
    "attention_bias": False,
    "attention_dropout": 0.0,
    "bos_token_id": 151643,
    "eos_token_id": 151645,
    "head_dim": 8,
    "hidden_act": "silu",
    "hidden_size": 16,
    "initializer_range": 0.02,
    "intermediate_size": 32,
    "max_position_embeddings": 40960,
    "max_window_layers": 2,
    "model_type": "qwen3",
    "num_attention_heads": 2,
    "num_hidden_layers": 2,
    "num_key_value_heads": 1,
    "rms_norm_eps": 1e-06,
    "rope_scaling": None,
    "rope_theta": 1000000,
    "sliding_window": None,
    "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
    "transformers_version": "4.51.0",
    "use_cache": True,
    "use_sliding_window": False,
    "vocab_size": 151936,
}
EMOTION_LM_GENERATION = {  # Qwen3-0.6B's generation_config.json
    "bos_token_id": 151643,
    "do_sample": True,
    "eos_token_id": [151645, 151643],
    "pad_token_id": 151643,
    "temperature": 0.6,
    "top_k": 20,
    "top_p": 0.95,
    "transformers_version": "4.51.0",
}
QWEN3_ADDED_TOKENS = 26  # Qwen3's added tokens: <|endoftext|> (151643) ... </think> (151668), the first of Qwen3-TTS's list
# A chat template in the shape of Qwen3's, shortened to what system, user and assistant messages reach
# (Qwen3's own also renders tools, tool calls and reasoning content).
EMOTION_LM_TEMPLATE = (
    "{%- if messages[0].role == 'system' %}\n"
    "    {{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}\n"
    "{%- endif %}\n"
    "{%- for message in messages %}\n"
    "    {%- if message.role == 'user' or (message.role == 'system' and not loop.first) %}\n"
    "        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}\n"
    "    {%- elif message.role == 'assistant' %}\n"
    "        {{- '<|im_start|>assistant\\n' + message.content + '<|im_end|>\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endfor %}\n"
    "{%- if add_generation_prompt %}\n"
    "    {{- '<|im_start|>assistant\\n' }}\n"
    "    {%- if enable_thinking is defined and enable_thinking is false %}\n"
    "        {{- '<think>\\n\\n</think>\\n\\n' }}\n"
    "    {%- endif %}\n"
    "{%- endif %}"
)
# What the tiny LM says: pieces of an answer (JSON's marks, digits, the labels), the ends of an answer
# and of a think block. Its head has rows for these only (the rest score 0), so that it answers in them.
ANSWER_PIECES = ("{", "}", '"', '":', ":", " ", ",", ".", *"0123456789", "高兴", "愤怒", "悲伤", "恐惧", "反感", "低落", "惊讶", "自然", "sad", "calm")
END_IDS = (151643, 151645)  # <|endoftext|>, <|im_end|>
THINK_IDS = (151667, 151668)  # <think>, </think>
EMOTION_LM_CHANNEL = 4.0  # hidden channel 0: a constant the layers leave alone (their outputs' row 0 zeroed) ...
EMOTION_LM_END_BIAS = 0.7  # ... which the end ids' head rows read, so that answers end within tens of tokens
EMOTION_LM_HEAD_GAIN = 2.0  # the answer pieces' head rows scaled up: their scores stand well above the rest's 0


def emotion_lm_tokenizer_config() -> dict:
    """Qwen3's `tokenizer_config.json`: its 26 added tokens, ChatML's end as eos, the chat template."""
    from koe.engines.qwen3_tts.text.vocab import FIRST_ADDED_ID, QWEN3_TTS_ADDED_TOKENS

    added = QWEN3_TTS_ADDED_TOKENS[:QWEN3_ADDED_TOKENS]
    decoder = {
        str(FIRST_ADDED_ID + i): {"content": c, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False, "special": special}
        for i, (c, special) in enumerate(added)
    }
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": [c for c, special in added if special and c != "<|endoftext|>"],
        "bos_token": None,
        "chat_template": EMOTION_LM_TEMPLATE,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def emotion_lm_state(answer_ids: list[int], seed: int = 11, tied: bool = False) -> dict[str, torch.Tensor]:
    """The tiny emotion LM's weights (float32; written as bfloat16, as released): seeded draws, then
    shaped so that it answers in `answer_ids` and ends (see `EMOTION_LM_CHANNEL`). `tied`: no head of
    its own (Qwen3-0.6B's `tie_word_embeddings`): plain draws, for a check of its logits."""
    from koe_indextts.qwen_emotion import EmotionLM, EmotionLMConfig

    config = {**EMOTION_LM_CONFIG, "tie_word_embeddings": tied}
    with torch.device("meta"):
        lm = EmotionLM(EmotionLMConfig.from_dict(config))
    state = random_state(lm, seed)
    if tied:
        del state["lm_head.weight"]
        return state
    state["model.embed_tokens.weight"][:, 0] = EMOTION_LM_CHANNEL
    for i in range(config["num_hidden_layers"]):
        state[f"model.layers.{i}.self_attn.o_proj.weight"][0] = 0.0
        state[f"model.layers.{i}.mlp.down_proj.weight"][0] = 0.0
    head = torch.zeros_like(state["lm_head.weight"])
    head[:, 0] = -EMOTION_LM_HEAD_GAIN  # every id but the answer pieces' scores well below them
    live = sorted(set(answer_ids) | set(END_IDS) | set(THINK_IDS))
    head[live] = EMOTION_LM_HEAD_GAIN * state["lm_head.weight"][live]
    head[live, 0] = 0.0
    head[list(END_IDS), 0] = EMOTION_LM_END_BIAS
    state["lm_head.weight"] = head
    return state


def write_emotion_lm(folder: str | Path, seed: int = 11, tied: bool = False, vocabulary: str = "released", sliding_window: int | None = None) -> str:
    """A tiny emotion LM folder in the released layout (config.json, generation_config.json,
    model.safetensors in bfloat16, Qwen's vocab.json / merges.txt / tokenizer_config.json with the
    chat template); `vocabulary` as `koe.engines.qwen3_tts.text.vocab` takes it; `sliding_window`
    in its config.json (unused, as `use_sliding_window` is false, yet it moves transformers' masks). Returns the
    weights' `state_sha256` (of the bfloat16 tensors written)."""
    from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer
    from koe.engines.qwen3_tts.text.vocab import write_qwen_tokenizer_files

    folder = Path(folder)
    write_qwen_tokenizer_files(folder, transformers_version=EMOTION_LM_CONFIG["transformers_version"], vocabulary=vocabulary)
    (folder / "tokenizer_config.json").write_text(json.dumps(emotion_lm_tokenizer_config(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")
    tokenizer = QwenTokenizer.from_folder(folder, branch="qwen2")
    answer_ids = [i for piece in ANSWER_PIECES for i in tokenizer.encode(piece)]
    state = {k: v.to(torch.bfloat16).contiguous() for k, v in emotion_lm_state(answer_ids, seed, tied).items()}
    save_file(state, str(folder / "model.safetensors"), metadata={"format": "pt"})
    config = {**EMOTION_LM_CONFIG, "tie_word_embeddings": tied, "sliding_window": sliding_window}
    (folder / "config.json").write_text(json.dumps(config, indent=2) + "\n")
    (folder / "generation_config.json").write_text(json.dumps(EMOTION_LM_GENERATION, indent=2) + "\n")
    return state_sha256(state)
