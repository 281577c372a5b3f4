"""Random-weight pieces of an IndexTTS 2.5 release folder, written deterministically by koe in the
released layout: the semantic codec (`codec.pth`, with config.yaml's `semantic_codec:` section) and
the tiktoken vocabulary (`multilingual_zh_ja_yue_char_del.tiktoken`).

Codec sizes: "tiny" (the goldens': its bytes must not change) shrinks the Vocos backbones and the
codebook; "real" is 2.5's as derived in `koe_indextts.codec25` (8192 x 8, Vocos 384 / 2048 / 12,
1024 wide, downsampling by 2). The vocabulary is small at either size: the 256 bytes in GPT-2's
byte order (so id 1, which upstream appends to each segment, is `"` as in whisper's vocabularies)
and a few hundred merges learnt from a short mixed-language text by a plain BPE count.
"""

from __future__ import annotations

import base64
import re
from collections import Counter
from pathlib import Path

import torch
import yaml

from koe_indextts.codec25 import CODEC_FILE, Codec25, Codec25Config
from koe_indextts.fixtures import CODE_TOKENS, STOP_BIAS, TINY_CONFORMER, random_state, state_sha256
from koe_indextts.text25 import VOCAB_FILE, special_token_names

__all__ = [
    "SIZES",
    "codec_section",
    "codec_state",
    "gpt_section",
    "gpt_state",
    "release_config",
    "release_states",
    "states_sha256",
    "text_tokens",
    "vocabulary_ranks",
    "write_codec",
    "write_gpt25",
    "write_random_model",
    "write_vocabulary",
]

SIZES = ("tiny", "real")
TINY_CODEC = {
    "codebook_size": 64,
    "hidden_size": 16,
    "codebook_dim": 4,
    "vocos_dim": 24,
    "vocos_intermediate_dim": 40,
    "vocos_num_layers": 2,
    "num_quantizers": 1,
    "downsample_scale": 2,
}
REAL_CODEC = {
    "codebook_size": 8192,
    "hidden_size": 1024,
    "codebook_dim": 8,
    "vocos_dim": 384,
    "vocos_intermediate_dim": 2048,
    "vocos_num_layers": 12,
    "num_quantizers": 1,
    "downsample_scale": 2,
}
MERGES = 360
CORPUS = (
    "The weather is lovely today, and the river runs quietly past the old mill. "
    "She said: there are 3 reasons to stay, and 12 to leave! Isn't it strange? We'll see, they'd say. "
    "今天天气很好，我们一起去公园散步吧。他说这个问题很重要，我们要认真对待。你好，欢迎使用语音合成。"
    "今日はいい天気ですね。私は東京に住んでいます。ありがとうございます。"
    "El tiempo es muy bueno hoy y vamos a caminar por el parque. ¿Dónde está la estación? "
    "Le temps est beau aujourd'hui. Das Wetter ist heute schön. 오늘 날씨가 좋네요."
)


def _check(size: str) -> None:
    if size not in SIZES:
        raise ValueError(f"size {size!r}: one of {list(SIZES)}")


def codec_section(size: str = "tiny") -> dict:
    """config.yaml's `semantic_codec:` section at `size`."""
    _check(size)
    return dict(TINY_CODEC if size == "tiny" else REAL_CODEC)


def codec_state(seed: int = 0, size: str = "tiny", section: dict | None = None) -> dict[str, torch.Tensor]:
    """The codec's random state at `size`, or for `section` (what `codec.pth` holds under `model`)."""
    with torch.device("meta"):
        codec = Codec25(Codec25Config.from_dict(codec_section(size) if section is None else section))
    return random_state(codec, seed)


def write_codec(folder: str | Path, seed: int = 0, size: str = "tiny") -> str:
    """Writes `codec.pth` (`{"model": state}`, as upstream's checkpoints are) and the `semantic_codec`
    section into `folder/config.yaml` (created, or updated keeping its other sections); returns the
    state's `state_sha256`."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    state = codec_state(seed, size)
    torch.save({"model": state}, folder / CODEC_FILE)
    config_path = folder / "config.yaml"
    config = yaml.safe_load(config_path.read_text()) if config_path.is_file() else None
    config = dict(config or {})
    config["semantic_codec"] = codec_section(size)
    config_path.write_text(yaml.safe_dump(config, sort_keys=False))
    return state_sha256(state)


def _byte_order() -> list[int]:
    """GPT-2's byte order: the printable Latin-1 bytes first, then the rest."""
    printable = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    return printable + [b for b in range(256) if b not in printable]


def vocabulary_ranks(merges: int = MERGES, corpus: str = CORPUS) -> dict[bytes, int]:
    """256 byte tokens and `merges` merged tokens, each merge the most frequent adjacent pair in the
    corpus's words (ties: the smallest pair), ranked in the order learnt."""
    ranks = {bytes([b]): i for i, b in enumerate(_byte_order())}
    words = Counter(tuple(bytes([b]) for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\s\w]+|\s+", corpus))
    for _ in range(merges):
        pairs: Counter = Counter()
        for word, count in words.items():
            for pair in zip(word, word[1:]):
                pairs[pair] += count
        if not pairs:
            break
        best = min(pairs, key=lambda p: (-pairs[p], p))
        joined = best[0] + best[1]
        ranks.setdefault(joined, len(ranks))
        merged: Counter = Counter()
        for word, count in words.items():
            out, i = [], 0
            while i < len(word):
                if i + 1 < len(word) and (word[i], word[i + 1]) == best:
                    out.append(joined)
                    i += 2
                else:
                    out.append(word[i])
                    i += 1
            merged[tuple(out)] += count
        words = merged
    return ranks


def write_vocabulary(folder: str | Path, merges: int = MERGES) -> Path:
    """`folder/multilingual_zh_ja_yue_char_del.tiktoken` in the released format (`<base64> <rank>` a line)."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    ranks = vocabulary_ranks(merges)
    path = folder / VOCAB_FILE
    path.write_text("".join(f"{base64.b64encode(token).decode()} {rank}\n" for token, rank in sorted(ranks.items(), key=lambda kv: kv[1])))
    return path


# -- the GPT -----------------------------------------------------------------------------------------
# the `gpt:` section upstream's UnifiedVoice reads (campplus mode ignores condition_type/condition_module)
TINY_GPT25 = {
    "model_dim": 64,
    "layers": 2,
    "heads": 4,
    "max_text_tokens": 40,
    "max_mel_tokens": 70,
    "number_text_tokens": 100,
    "max_conditioning_inputs": 1,
    "mel_length_compression": 1024,
    "use_mel_codes_as_input": True,
    "train_solo_embeddings": False,
    **CODE_TOKENS,
    "condition_num_latent": 32,
    "emo_condition_module": TINY_CONFORMER,
}


def gpt_section(**overrides) -> dict:
    """The tiny 2.5 `gpt:` section, with `overrides` (a copy: the caller may change it)."""
    section = {**TINY_GPT25, "emo_condition_module": dict(TINY_GPT25["emo_condition_module"])}
    section.update(overrides)
    return section


def gpt_state(section: dict, seed: int = 0, stop_bias: float = STOP_BIAS) -> dict[str, torch.Tensor]:
    """2.5's `gpt.pth` state for `section`: the emotion pair drawn from `seed + 1` (its positional
    tables as the conformer computes them), the LM from `seed + 2`; the stop code's head bias raised
    by `stop_bias` so that a random GPT ends its searches."""
    from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
    from koe_indextts.voice_lm import CampPlusSpeechLM, GPTConfig

    emotion = SpeechConditioning(ConditioningConfig.emotion(section))
    state = {"emo_" + k: v for k, v in random_state(emotion, seed + 1, keep=("pos_enc.pe",)).items()}
    with torch.device("meta"):
        lm = CampPlusSpeechLM(GPTConfig.from_dict(section))
    state.update(random_state(lm, seed + 2))
    if stop_bias:
        state["mel_head.bias"][section["stop_mel_token"]] += stop_bias
    return state


def write_gpt25(folder: str | Path, seed: int = 0, section: dict | None = None) -> Path:
    """`folder/gpt.pth` for `section` (the tiny one by default); returns its path."""
    path = Path(folder) / "gpt.pth"
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(gpt_state(gpt_section() if section is None else section, seed), path)
    return path


# -- a whole release ---------------------------------------------------------------------------------
def text_tokens(merges: int = MERGES) -> int:
    """The GPT's `number_text_tokens` for the vocabulary of `merges` merges: one per id (its ranks
    and the special tokens)."""
    return len(vocabulary_ranks(merges)) + len(special_token_names())


def release_config(size: str = "tiny") -> dict:
    """A release 2.5 `config.yaml` as data (the keys `infer_v2_5.IndexTTS2` reads) at `size`.

    "tiny": the GPT of `gpt_section()` with the whole vocabulary, the codec of "tiny" at w2v-BERT's
    width (s2mel's length regulator reads the codec's frames and w2v-BERT's alike: 1024) with a
    codebook for every GPT code (8192), release 2's tiny s2mel. "real": no released 2.5 config.yaml was found: the codec is 2.5's as derived in
    `koe_indextts.codec25`, the GPT and s2mel release 2's released sizes (a stand-in)."""
    from koe_indextts import fixtures2

    _check(size)
    two = fixtures2.release_config(size)
    if size == "tiny":
        gpt = gpt_section(number_text_tokens=text_tokens())
        codec = {**TINY_CODEC, "hidden_size": 1024, "codebook_size": CODE_TOKENS["start_mel_token"]}
    else:
        gpt = {k: v for k, v in two["gpt"].items() if k not in ("condition_type", "condition_module")}
        codec = dict(REAL_CODEC)
    return {
        "gpt": gpt,
        "semantic_codec": codec,
        "s2mel": two["s2mel"],
        "gpt_checkpoint": "gpt.pth",
        "w2v_stat": "wav2vec2bert_stats.pt",
        "s2mel_checkpoint": "s2mel.pth",
        "emo_matrix": "feat2.pt",
        "spk_matrix": "feat1.pt",
        "emo_num": list(fixtures2.EMO_NUM),
        "qwen_emo_path": "qwen0.6bemo4-merge/",
        "version": 2.5,
    }


def release_states(seed: int = 0, size: str = "tiny") -> dict[str, dict]:
    """Every weight file's state at `size`, by file (relative to the folder), as saved: `gpt.pth` a
    plain state, `codec.pth` `{"model": state}`, `s2mel.pth` `{"net": {"cfm", "length_regulator"}}`
    (no `gpt_layer`: 2.5's `MyModel` has none), BigVGAN's `{"generator": state}`."""
    from koe_indextts import fixtures2
    from koe_indextts.config import AUX_CAMPPLUS, AUX_W2V_BERT

    config = release_config(size)
    g = torch.Generator().manual_seed(seed + 7)
    rows, width = sum(fixtures2.EMO_NUM), config["gpt"]["model_dim"]
    s2mel = fixtures2._s2mel_checkpoint(config, seed + 3)
    del s2mel["net"]["gpt_layer"]
    return {
        "gpt.pth": gpt_state(config["gpt"], seed, STOP_BIAS if size == "tiny" else 0.0),
        CODEC_FILE: {"model": codec_state(seed + 5, section=config["semantic_codec"])},
        "s2mel.pth": s2mel,
        f"{AUX_W2V_BERT}/model.safetensors": fixtures2._w2v_state(seed + 4, size),
        AUX_CAMPPLUS: fixtures2._campplus_state(seed + 6),
        "hf_cache/bigvgan/bigvgan_generator.pt": {"generator": fixtures2._vocoder_state(seed + 8, size)},
        "wav2vec2bert_stats.pt": {"mean": 0.1 * torch.randn(1024, generator=g), "var": 0.5 + torch.rand(1024, generator=g)},
        "feat1.pt": torch.randn(rows, 192, generator=g),
        "feat2.pt": 0.1 * torch.randn(rows, width, generator=g),
    }


def states_sha256(states: dict[str, dict]) -> dict[str, str]:
    """One hash per weight file (as `fixtures2.states_sha256`, `codec.pth`'s `model` state unwrapped)."""
    from koe_indextts import fixtures2

    return fixtures2.states_sha256({name: state["model"] if name == CODEC_FILE else state for name, state in states.items()})


def write_random_model(folder: str | Path, seed: int = 0, size: str = "tiny") -> Path:
    """A release 2.5 folder at `size` (see `release_config`), marked as random weights."""
    from koe.engines.spec import mark_random_weights
    from koe_indextts import fixtures2

    folder = fixtures2.write_release_files(folder, release_config(size), release_states(seed, size), size)
    write_vocabulary(folder)
    mark_random_weights(folder, "koe_indextts.fixtures25:write_random_model")
    return folder
