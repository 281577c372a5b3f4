"""IndexTTS 2 as one model: a speaker clip (and an emotion: a second clip, an 8-value vector, or the
speaker's own) conditions the GPT, whose codes and latent become a mel through the semantic codec,
the length regulator and flow matching, vocoded by BigVGAN v2 at 22.05 kHz.

What upstream's `IndexTTS2.infer` does on the CPU, in its order:
- the speaker clip read at 22.05 kHz (15 s at most), resampled to 16 kHz: w2v-BERT's normalised
  layer-17 features (the GPT's speaker conditioning), their semantic codes' frames (`S_ref`), the
  22.05 kHz mel, CAM++'s style of the 16 kHz clip, the prompt condition;
- the emotion clip (the speaker's own when none is given) read at 16 kHz: its w2v-BERT features;
- per text segment: the emotion vector (`merge_emovec`, or an emotion-vector mix), the code search
  (KV-cached, so numbered from 2), the latent pass, `gpt_layer` + the codes' semantic embedding,
  the length regulator, flow matching (25 steps, guidance 0.7), BigVGAN v2, `clamp(32767 * wav)`;
- the segments joined with `interval_silence` ms of zeros between them.

Its draws from torch's global generator: w2v-BERT's LayerDrop makes one `torch.rand([])` per layer
each time it runs (the speaker clip, then the emotion clip: upstream caches both per instance, so
only its first call with a clip draws them; koe draws them at every request, as that first call),
then per segment the search's multinomials and flow matching's start noise.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors.torch import load_file

from koe_indextts.beam import Sampling, search
from koe_indextts.bigvgan import to_pcm_scale
from koe_indextts.bigvgan2 import BigVGAN2, load_bigvgan2
from koe_indextts.campplus import CAMPPlus, load_campplus, most_similar_cosine
from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning, load_conditioning
from koe_indextts.config import Release2, aux_paths
from koe_indextts.mel22k import MelConfig, mel22k
from koe_indextts.model import exact_products
from koe_indextts.s2mel import S2Mel, S2MelConfig, load_s2mel
from koe_indextts.semantic_codec import SemanticCodec, SemanticCodecConfig, read_semantic_codec
from koe_indextts.voice_lm import EmotionSpeechLM, GPTConfig
from koe_indextts.w2vbert import (
    EMOTION_RATE,
    SPEAKER_RATE,
    FeatureConfig,
    SemanticStats,
    W2VBert,
    W2VBertConfig,
    extract_features,
    load_clip,
    load_stats,
    load_w2vbert,
    semantic_features,
    to_semantic_rate,
)

SAMPLE_RATE = 22050
DIFFUSION_STEPS = 25
GUIDANCE = 0.7
SPEAKER_PREFIXES = ("conditioning_encoder.", "perceiver_encoder.")
EMOTION_PREFIXES = ("emo_conditioning_encoder.", "emo_perceiver_encoder.")


@dataclass(frozen=True)
class Speaker:
    """What a speaker clip gives every segment (upstream's per-clip cache)."""

    features: torch.Tensor  # (1, T, 1024) w2v-BERT's normalised layer 17
    semantic: torch.Tensor  # (1, T, 1024) S_ref: the features' quantised frames
    mel: torch.Tensor  # (1, 80, frames) at 22.05 kHz
    style: torch.Tensor  # (1, 192) CAM++
    prompt: torch.Tensor  # (1, frames, C) the length regulator's prompt condition


@dataclass(frozen=True)
class Emotion:
    """How a request's emotion is given: `features` (1, T, 1024) of the emotion clip (the speaker's
    own read at 16 kHz when none is given) with `alpha`, and optionally an 8-value `vector` (upstream's
    `emo_vector`: its mix replaces the clip's share, `alpha` is then 1)."""

    features: torch.Tensor
    alpha: float = 1.0
    vector: tuple[float, ...] | None = None


class IndexTTS2:
    """A loaded release 2 folder (its auxiliary models under `hf_cache/`, as upstream keeps them)."""

    def __init__(self, release: Release2, parts: dict):
        self.release = release
        self.lm: EmotionSpeechLM = parts["lm"]
        self.speaker_conditioning: SpeechConditioning = parts["speaker"]
        self.emotion_conditioning: SpeechConditioning = parts["emotion"]
        self.s2mel: S2Mel = parts["s2mel"]
        self.codec: SemanticCodec = parts["codec"]
        self.w2v: W2VBert = parts["w2v"]
        self.w2v_features: FeatureConfig = parts["features"]
        self.stats: SemanticStats = parts["stats"]
        self.campplus: CAMPPlus = parts["campplus"]
        self.vocoder: BigVGAN2 = parts["vocoder"]
        self.mel_config: MelConfig = parts["mel"]
        self.emotion_rows: tuple[torch.Tensor, ...] = parts["emotion_rows"]
        self.speaker_rows: tuple[torch.Tensor, ...] = parts["speaker_rows"]

    @classmethod
    def load(cls, folder: str | Path, aux: Mapping[str, Path] | None = None) -> IndexTTS2:
        """A release 2 folder; its auxiliary models from the folder's `hf_cache/`, or from `aux`
        (upstream's `aux_paths`: the w2v_bert folder, the semantic_codec file, the campplus file,
        the bigvgan folder)."""
        folder = Path(folder)
        release = Release2.read(folder)
        aux = aux_paths(folder) if aux is None else aux
        state = torch.load(folder / release.gpt_checkpoint, map_location="cpu", weights_only=True, mmap=True)  # the file's pages, no copy
        state = state.get("model", state)
        speaker = load_conditioning(state, ConditioningConfig.speaker(release.gpt, input_size=1024))
        emotion = load_conditioning(state, ConditioningConfig.emotion(release.gpt), encoder="emo_conditioning_encoder", perceiver="emo_perceiver_encoder")
        with torch.device("meta"):
            lm = EmotionSpeechLM(GPTConfig.from_dict(release.gpt))
        own = {k: v for k, v in state.items() if not k.startswith(SPEAKER_PREFIXES + EMOTION_PREFIXES) and not k.startswith("inference_model.")}
        lm.load_state_dict(own, strict=True, assign=True)
        w2v_folder = Path(aux["w2v_bert"])
        w2v_config = W2VBertConfig.from_json(w2v_folder / "config.json")
        emo_matrix = torch.load(folder / release.emo_matrix, map_location="cpu", weights_only=True)
        spk_matrix = torch.load(folder / release.spk_matrix, map_location="cpu", weights_only=True)
        parts = {
            "lm": exact_products(lm.eval()),
            "speaker": speaker,
            "emotion": emotion,
            "s2mel": load_s2mel(folder / release.s2mel_checkpoint, S2MelConfig.from_dict(release.s2mel)),
            "codec": read_semantic_codec(aux["semantic_codec"], SemanticCodecConfig.from_dict(release.semantic_codec)),
            "w2v": load_w2vbert(load_file(str(w2v_folder / "model.safetensors")), w2v_config),
            "features": FeatureConfig.from_json(w2v_folder / "preprocessor_config.json"),
            "stats": load_stats(folder / release.w2v_stat),
            "campplus": load_campplus(aux["campplus"]),
            "vocoder": load_bigvgan2(aux["bigvgan"]),
            "mel": MelConfig.from_dict(release.s2mel["preprocess_params"]),
            "emotion_rows": torch.split(emo_matrix, list(release.emo_num)),
            "speaker_rows": torch.split(spk_matrix, list(release.emo_num)),
        }
        return cls(release, parts)

    @property
    def w2v_layers(self) -> int:
        return self.w2v.config.num_hidden_layers

    # -- the clips ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def speaker(self, source) -> Speaker:
        """A speaker clip (a path, its bytes, or (samples, rate)) as upstream's first `infer` reads it."""
        audio = load_clip(source, SPEAKER_RATE)
        audio_16k = to_semantic_rate(audio, SPEAKER_RATE)
        features = semantic_features(self.w2v, self.stats, *extract_features(audio_16k, self.w2v_features))
        _, semantic = self.codec.quantize(features)
        mel = mel22k(audio.float(), self.mel_config)
        style = self.campplus.style(audio_16k)
        return Speaker(features, semantic, mel, style, self.s2mel.prompt_condition(semantic, mel.size(2)))

    @torch.inference_mode()
    def emotion_features(self, source) -> torch.Tensor:
        """An emotion clip's w2v-BERT features (read at 16 kHz, as upstream reads it)."""
        audio = load_clip(source, EMOTION_RATE)
        return semantic_features(self.w2v, self.stats, *extract_features(audio, self.w2v_features))

    # -- a request ---------------------------------------------------------------------------------
    def layer_drop_draws(self) -> None:
        """The draws w2v-BERT makes for the speaker clip and the emotion clip in upstream's first call."""
        for _ in range(2 * self.w2v_layers):
            torch.rand([])

    @torch.inference_mode()
    def emotion_vector(self, speaker: Speaker, emotion: Emotion, rows: tuple[int, ...] | None = None) -> torch.Tensor:
        """(1, d): upstream's `merge_emovec` of the two clips, then the emotion-vector mix if any, from
        each emotion's matrix row most like the speaker's style (or the given `rows`: upstream's
        `use_random` picks them at random)."""
        base = self._emovec(speaker.features)
        wanted = self._emovec(emotion.features)
        emovec = base + emotion.alpha * (wanted - base)
        if emotion.vector is None:
            return emovec
        weights = torch.tensor(emotion.vector)
        picks = rows if rows is not None else [most_similar_cosine(speaker.style, part) for part in self.speaker_rows]
        chosen = torch.cat([part[index].unsqueeze(0) for index, part in zip(picks, self.emotion_rows)], 0)
        mix = torch.sum(weights.unsqueeze(1) * chosen, 0).unsqueeze(0)
        return mix + (1 - torch.sum(weights)) * emovec

    def _emovec(self, features: torch.Tensor) -> torch.Tensor:
        lengths = torch.tensor([features.shape[1]])
        return self.lm.emotion_vector(self.emotion_conditioning(features.transpose(1, 2), lengths).squeeze(1))

    @torch.inference_mode()
    def segment(self, ids: torch.Tensor, speaker: Speaker, emovec: torch.Tensor, sampling: Sampling, cancel=None) -> tuple[torch.Tensor, torch.Tensor]:
        """One text segment's (n,) ids → its audio at 16-bit scale (1, samples) and its codes."""
        lengths = torch.tensor([speaker.features.shape[1]])
        latents = self.speaker_conditioning(speaker.features.transpose(1, 2), lengths)
        conds = self.lm.conditioning(latents, emovec)
        codes = search(self.lm, conds, ids, sampling, cancel, cached_positions=True)
        stops = (codes == self.lm.cfg.stop_mel_token).nonzero()
        kept = codes[: int(stops[0]) if len(stops) else codes.numel()]
        latent = self.lm.latent(conds, ids, kept)
        semantic = self.codec.vq2emb(kept[None, None]).transpose(1, 2)
        condition = self.s2mel.target_condition(latent, semantic, torch.LongTensor([kept.numel()]))
        mel = self.s2mel.decode(speaker.prompt, condition, speaker.mel, speaker.style, DIFFUSION_STEPS, GUIDANCE)
        wav = self.vocoder(mel.float()).squeeze().unsqueeze(0)
        return to_pcm_scale(wav), codes
