"""IndexTTS 2.5 as one model: a speaker clip (and an emotion: a second clip, an 8-value vector, or the
speaker's own) conditions the GPT, whose codes the 2.5 codec decodes to 50 Hz frames; s2mel's
length regulator and flow matching make a mel, BigVGAN v2 the 22.05 kHz audio.

What upstream's `infer_v2_5.IndexTTS2.infer` does on the CPU, in its order, where it differs from
release 2's (`koe_indextts.model2`):
- the speaker clip: w2v-BERT's normalised layer-17 features run twice (`spk_cond_emb`, then `S_ref`,
  unused, which makes its LayerDrop draws again), the 22.05 kHz mel, CAM++'s style; the prompt
  condition is the length regulator over the features themselves (not their codec frames);
- the emotion clip (the speaker's own when none is given) read at 16 kHz: its w2v-BERT features;
- the text through 2.5's front end (`koe_indextts.front25`: normalised, cased, annotated, cut by
  tokens), each segment as `<|lang|> ` + text, then the id 1, and the language id apart;
- per segment: the emotion vector as release 2's (`merge_emovec`, the emotion-vector mix), the code
  search with the GPT's conditioning row from CAM++'s style (`spk_emb_proj`) and the language
  embedding on the text rows; no latent pass: `S_infer = codec.decode(codes up to the first stop)`,
  `target_lengths = int(S_infer frames * 1.72 * duration_factor)` in Python floats; the length
  regulator, flow matching (25 steps, guidance 0.7), BigVGAN v2, `clamp(32767 * wav)`;
- the segments joined with `interval_silence` ms of zeros between them.

Its draws from torch's global generator: w2v-BERT's LayerDrop draws one `torch.rand([])` per layer
each time it runs: three times on a first call with a clip (the speaker's two, the emotion clip's
one; upstream caches the clips per instance, koe draws them at every request as that first call),
then per segment the search's multinomials and flow matching's start noise. The codec's decode
draws nothing (its `quantize`, which would, is not called).

Loading: koe loads `gpt.pth` strictly (upstream's `load_checkpoint` is not strict: it keeps a
missing key's random initialisation and skips an unexpected one, with a message), every file with
`weights_only=True`; the auxiliary models from the folder's `hf_cache/`, as upstream looks for them.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from koe_indextts.beam import Sampling, search
from koe_indextts.bigvgan import to_pcm_scale
from koe_indextts.bigvgan2 import load_bigvgan2
from koe_indextts.campplus import load_campplus
from koe_indextts.codec25 import Codec25, Codec25Config, read_codec25
from koe_indextts.conditioning import ConditioningConfig, load_conditioning
from koe_indextts.config25 import Release25, aux_paths25
from koe_indextts.front25 import MAX_TEXT_TOKENS_PER_SEGMENT, FrontEnd25
from koe_indextts.mel22k import MelConfig, mel22k
from koe_indextts.model import exact_products
from koe_indextts.model2 import DIFFUSION_STEPS, GUIDANCE, SAMPLE_RATE, Emotion, IndexTTS2
from koe_indextts.s2mel import LENGTH_RATIO, S2Mel, S2MelConfig, load_s2mel
from koe_indextts.text25 import language_id
from koe_indextts.voice_lm import CampPlusSpeechLM, GPTConfig, load_campplus_lm
from koe_indextts.w2vbert import (
    SPEAKER_RATE,
    FeatureConfig,
    W2VBertConfig,
    extract_features,
    load_clip,
    load_stats,
    load_w2vbert,
    semantic_features,
    to_semantic_rate,
)

__all__ = ["DIFFUSION_STEPS", "GUIDANCE", "SAMPLE_RATE", "Emotion", "IndexTTS25", "Speaker25"]


@dataclass(frozen=True)
class Speaker25:
    """What a speaker clip gives every segment (upstream's per-clip cache)."""

    features: torch.Tensor  # (1, T, 1024) w2v-BERT's normalised layer 17
    mel: torch.Tensor  # (1, 80, frames) at 22.05 kHz
    style: torch.Tensor  # (1, 192) CAM++
    prompt: torch.Tensor  # (1, frames, C) the length regulator over `features`


class IndexTTS25(IndexTTS2):
    """A loaded release 2.5 folder. The emotion side (`emotion_features`, `emotion_vector`) is release
    2's; the speaker, the GPT's conditioning, the codec and s2mel's condition are 2.5's."""

    def __init__(self, release: Release25, parts: dict[str, Any]):
        self.release = release
        self.lm: CampPlusSpeechLM = parts["lm"]
        self.emotion_conditioning = parts["emotion"]
        self.s2mel: S2Mel = parts["s2mel"]
        self.codec: Codec25 = parts["codec"]
        self.w2v = parts["w2v"]
        self.w2v_features: FeatureConfig = parts["features"]
        self.stats = parts["stats"]
        self.campplus = parts["campplus"]
        self.vocoder = parts["vocoder"]
        self.mel_config: MelConfig = parts["mel"]
        self.emotion_rows: tuple[torch.Tensor, ...] = parts["emotion_rows"]
        self.speaker_rows: tuple[torch.Tensor, ...] = parts["speaker_rows"]
        self.front: FrontEnd25 = parts["front"]

    @classmethod
    def load(cls, folder: str | Path) -> IndexTTS25:  # type: ignore[override]
        """A release 2.5 folder, its auxiliary models from its `hf_cache/`; every file strictly."""
        folder = Path(folder)
        release = Release25.read(folder)
        missing = release.missing(folder)
        if missing:
            raise FileNotFoundError(f"{folder}: not a whole IndexTTS 2.5 release: missing {list(missing)}")
        aux = aux_paths25(folder)
        state = torch.load(folder / release.gpt_checkpoint, map_location="cpu", weights_only=True, mmap=True)  # the file's pages, no copy
        state = state.get("model", state)
        emotion = load_conditioning(state, ConditioningConfig.emotion(release.gpt), encoder="emo_conditioning_encoder", perceiver="emo_perceiver_encoder")
        w2v_folder = aux["w2v_bert"]
        lm = load_campplus_lm(state, GPTConfig.from_dict(release.gpt))
        emo_matrix = torch.load(folder / release.emo_matrix, map_location="cpu", weights_only=True)
        spk_matrix = torch.load(folder / release.spk_matrix, map_location="cpu", weights_only=True)
        parts = {
            "lm": exact_products(lm),
            "emotion": emotion,
            "s2mel": load_s2mel(folder / release.s2mel_checkpoint, S2MelConfig.from_dict(release.s2mel), gpt_layer=False),
            "codec": read_codec25(folder / release.codec_checkpoint, Codec25Config.from_dict(release.semantic_codec)),
            "w2v": load_w2vbert(load_file(str(w2v_folder / "model.safetensors")), W2VBertConfig.from_json(w2v_folder / "config.json")),
            "features": FeatureConfig.from_json(w2v_folder / "preprocessor_config.json"),
            "stats": load_stats(folder / release.w2v_stat),
            "campplus": load_campplus(aux["campplus"]),
            "vocoder": load_bigvgan2(aux["bigvgan"]),
            "mel": MelConfig.from_dict(release.s2mel["preprocess_params"]),
            "emotion_rows": torch.split(emo_matrix, list(release.emo_num)),
            "speaker_rows": torch.split(spk_matrix, list(release.emo_num)),
            "front": FrontEnd25.from_folder(folder, lm.cfg.text_positions),  # its glossary.yaml, if any
        }
        return cls(release, parts)

    # -- the clips ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def speaker(self, source) -> Speaker25:  # type: ignore[override]
        """A speaker clip (a path, its bytes, or (samples, rate)) as upstream's first `infer` reads it."""
        audio = load_clip(source, SPEAKER_RATE)
        audio_16k = to_semantic_rate(audio, SPEAKER_RATE)
        features = semantic_features(self.w2v, self.stats, *extract_features(audio_16k, self.w2v_features))
        mel = mel22k(audio.float(), self.mel_config)
        style = self.campplus.style(audio_16k)
        return Speaker25(features, mel, style, self.s2mel.prompt_condition(features, mel.size(2)))

    # -- a request ---------------------------------------------------------------------------------
    def layer_drop_draws(self) -> None:
        """The draws w2v-BERT makes in upstream's first call: the speaker clip twice, the emotion clip once."""
        for _ in range(3 * self.w2v_layers):
            torch.rand([])

    def text_segments(
        self, text: str, lang: str, max_text_tokens_per_segment: int = MAX_TEXT_TOKENS_PER_SEGMENT, normalize: bool = True, strict: bool = True
    ) -> tuple[list[torch.Tensor], int]:
        """A request's text → each segment's (n,) ids (`<|lang|> ` + text, then the id 1) and the
        language id (`lang_to_token(lang)`), as upstream's infer makes them (`strict`: see front25)."""
        segments = self.front.segments(text, lang, max_text_tokens_per_segment, normalize, strict)
        return [torch.tensor(ids, dtype=torch.int32) for ids in segments], language_id(lang)

    @torch.inference_mode()
    def segment(  # type: ignore[override]
        self,
        ids: torch.Tensor,
        language: int,
        speaker: Speaker25,
        emovec: torch.Tensor,
        sampling: Sampling,
        duration_factor: float = 1.0,
        cancel=None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """One text segment's (n,) ids (the stop id 1 last) in language id `language` → its audio at
        16-bit scale (1, samples) and its codes."""
        conds = self.lm.conditioning(self.lm.speaker_latent(speaker.style), emovec)
        codes = search(self.lm, conds, ids, sampling, cancel, cached_positions=True, language=language)
        stops = (codes == self.lm.cfg.stop_mel_token).nonzero()
        kept = codes[: int(stops[0]) if len(stops) else codes.numel()]
        if not kept.numel():
            raise ValueError("the GPT stopped before its first code: nothing for the codec to decode (upstream fails here too)")
        frames = self.codec.decode(kept[None])  # (1, 2n, 1024)
        target = int(frames.shape[1] * LENGTH_RATIO * duration_factor)
        condition = self.s2mel.length_regulator(frames, torch.LongTensor([target]))[0]
        mel = self.s2mel.decode(speaker.prompt, condition, speaker.mel, speaker.style, DIFFUSION_STEPS, GUIDANCE)
        wav = self.vocoder(mel.float()).squeeze().unsqueeze(0)
        return to_pcm_scale(wav), codes
