"""Inputs of the `w2vbert` golden (koe's side): voice clips, a narrow w2v-BERT with koe's seeded
weights, its normalisation stats, a tiny semantic codec, and the hashes the oracle copies.

The encoder is narrow (width 16, 2 heads) but 19 layers deep: upstream reads `hidden_states[17]`,
so 17 layers must run, and 19 draws (one per layer) show that the count follows the config, not
the layer read. The depthwise kernel (31) and the relative-position window (64 left, 8 right) are
w2v-bert-2.0's. The feature extractor's config is the hub's (`padding_value` 1: an odd frame count
pads one frame of ones, masked). Clips are WAV files at 16, 22.05 and 44.1 kHz, mono and stereo,
1 to 5 s; each goes through upstream's speaker path (`_load_and_cut_audio` at librosa's 22.05 kHz,
`Resample(22050, 16000)`, features, `get_emb`, `semantic_codec.quantize`), and two through its
emotion path (read at 16 kHz, features, `get_emb`).
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import torch
from koe_indextts.fixtures import random_state, state_sha256, tone_clip, wav_clips_sha256
from koe_indextts.semantic_codec import SemanticCodec, SemanticCodecConfig
from koe_indextts.w2vbert import FeatureConfig, W2VBert, W2VBertConfig
from safetensors.torch import save_file

from koe.audio.io import write_wav

CONFIG = W2VBertConfig(hidden_size=16, num_hidden_layers=19, num_attention_heads=2, intermediate_size=24)
FEATURES = FeatureConfig()
CODEC = SemanticCodecConfig(codebook_size=64, hidden_size=16, codebook_dim=4, vocos_dim=24, vocos_intermediate_dim=48, vocos_num_layers=2)
SEED = 71
# name -> (sample rate, channels, libsndfile subtype, seconds)
CLIPS: dict[str, tuple[int, int, str, float]] = {
    "16k_mono_pcm16": (16000, 1, "PCM_16", 1.0),
    "16k_stereo_float": (16000, 2, "FLOAT", 1.7),
    "22k_mono_float": (22050, 1, "FLOAT", 2.3),
    "22k_stereo_pcm16": (22050, 2, "PCM_16", 1.33),
    "44k_mono_pcm24": (44100, 1, "PCM_24", 3.1),
    "44k_stereo_pcm16": (44100, 2, "PCM_16", 5.0),
}
EMOTION = ("16k_stereo_float", "44k_mono_pcm24")  # also taken through the emotion path
FULL_FEATURES = ("16k_mono_pcm16",)  # features kept whole in the golden (the others by hash)


def clip_samples(name: str, rate: int, channels: int, seconds: float) -> np.ndarray:
    """Seeded voiced-like tones (seven partials, a slow envelope, a pause) plus noise: float32 `(n, channels)`."""
    return tone_clip(name, rate, int(round(rate * seconds)), channels, partials=7, noise=0.02, pause=True)


def clip_path(folder: Path, name: str) -> Path:
    return folder / f"{name}.wav"


def clips_sha256(folder: Path) -> str:
    """One hash of the clips' rates, formats and samples as read back (a float WAV's bytes carry a time stamp)."""
    return wav_clips_sha256({name: clip_path(folder, name) for name in CLIPS})


def model_state() -> dict[str, torch.Tensor]:
    """The whole 19-layer encoder's weights (the hub file's names)."""
    with torch.device("meta"):
        model = W2VBert(CONFIG, CONFIG.num_hidden_layers)
    return random_state(model, SEED)


def stats_state() -> dict[str, torch.Tensor]:
    g = torch.Generator().manual_seed(SEED + 1)
    return {"mean": 0.1 * torch.randn(CONFIG.hidden_size, generator=g), "var": 0.5 + torch.rand(CONFIG.hidden_size, generator=g)}


def codec_state() -> dict[str, torch.Tensor]:
    with torch.device("meta"):
        codec = SemanticCodec(CODEC)
    return random_state(codec, SEED + 2)


def hf_config() -> dict:
    """config.json as transformers writes it for these sizes (w2v-bert-2.0's other values)."""
    return {"model_type": "wav2vec2-bert", "architectures": ["Wav2Vec2BertModel"], "apply_spec_augment": False, **dataclasses.asdict(CONFIG)}


def preprocessor_config() -> dict:
    return {
        "feature_extractor_type": "SeamlessM4TFeatureExtractor",
        "processor_class": "Wav2Vec2BertProcessor",
        "return_attention_mask": True,
        **dataclasses.asdict(FEATURES),
    }


def write_inputs(folder: Path) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    w2v = folder / "w2v-bert-2.0"
    w2v.mkdir(exist_ok=True)
    state = model_state()
    save_file({k: v.contiguous() for k, v in state.items()}, str(w2v / "model.safetensors"), metadata={"format": "pt"})
    (w2v / "config.json").write_text(json.dumps(hf_config(), indent=1))
    (w2v / "preprocessor_config.json").write_text(json.dumps(preprocessor_config(), indent=1))
    stats = stats_state()
    torch.save(stats, folder / "wav2vec2bert_stats.pt")
    codec = codec_state()
    save_file(codec, str(folder / "semantic_codec.safetensors"))
    (folder / "semantic_codec.json").write_text(json.dumps(dataclasses.asdict(CODEC)))
    for name, (rate, channels, subtype, seconds) in CLIPS.items():
        write_wav(clip_path(folder, name), clip_samples(name, rate, channels, seconds), rate, subtype=subtype)
    (folder / "clips.json").write_text(json.dumps({"clips": list(CLIPS), "emotion": list(EMOTION), "full_features": list(FULL_FEATURES)}))
    (folder / "state_sha256.txt").write_text(
        f"w2vbert {state_sha256(state)}\nstats {state_sha256(stats)}\ncodec {state_sha256(codec)}\nclips {clips_sha256(folder)}\n"
    )
