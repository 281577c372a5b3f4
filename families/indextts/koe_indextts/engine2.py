"""The IndexTTS 2 engine: text + a cloned voice (+ an emotion) -> upstream's front end -> per segment
the GPT's codes and latent, the semantic codec, flow matching, BigVGAN v2 -> 22.05 kHz audio.

One request is one upstream `IndexTTS2.infer` call (`koe_indextts.model2`), its first with the
voice's clip: a request with `seed=N` gives upstream's samples after `torch.manual_seed(N)` (the
draws w2v-BERT makes for the clip in that first call are made again at every request). The emotion:
the clip's own; another clip's, the request's emotion reference (upstream's `emo_audio_prompt`,
blended with the voice's own by `emo_alpha`); or the one the eight emotion options give (upstream's
`emo_vector`, scaled by `emo_alpha`; an emotion reference is then left out, as upstream drops it);
or one read from a text by the release's emotion model (upstream's `use_emo_text`: the request's
instructions, upstream's `emo_text`, or with the option `emo_text` the text spoken), which replaces
the emotion options and the emotion reference as upstream's does. Segments are joined with
`interval_silence` ms of zeros; a stream yields each segment, then its silence. Audio is upstream's
16-bit-scale wave divided back by 32767.

The order of the draws from torch's generator is upstream's: after the seed, the emotion model's
sampling (one multinomial per token it writes), then w2v-BERT's LayerDrop draws, then per segment
the code search's and flow matching's.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping
from pathlib import Path

import numpy as np
import torch

from koe.engines.base import RequestError, UnsupportedVoice, VoicePromptMismatch, VoiceReference
from koe.engines.engine import Checked, reference_frames
from koe.engines.pipeline import Piece, Segment, steps_for
from koe.engines.spec import SpecError
from koe.runtime.device import resolve_device
from koe_indextts import spec
from koe_indextts.beam import Sampling
from koe_indextts.config import ConfigError, emotion_lm_folder
from koe_indextts.engine import PCM16_MAX, IndexTTSBase, sampling_of, segment_ids
from koe_indextts.model2 import SAMPLE_RATE, Emotion, IndexTTS2, Speaker
from koe_indextts.qwen_emotion import EmotionAnswerError, EmotionLMError, QwenEmotion
from koe_indextts.text import TextNormalizer, read_glossary
from koe_indextts.text_tokenizer import BpeModelError, TextTokenizer
from koe_indextts.voice import EMOTION_RATE, MAX_CLIP_S, SPEAKER_RATE, IndexTTS2Voice, IndexTTSVoiceError
from koe_indextts.w2vbert import load_clip

__all__ = ["IndexTTS2Engine"]

CODE_RATE = 22050 / 256 / 1.72  # mel codes a second (a code is 1.72 mel frames of 256 samples)


class IndexTTS2Engine(IndexTTSBase):
    """A loaded IndexTTS 2 release. Not re-entrant: one call at a time."""

    voice_type, voice_error = IndexTTS2Voice, IndexTTSVoiceError
    sample_rate = SAMPLE_RATE
    defaults = {**spec.DEFAULTS_2, "do_sample": True}  # upstream's release 2 always samples

    def __init__(self, folder: Path, model: IndexTTS2, text: TextTokenizer, device: torch.device) -> None:
        self.folder, self.model, self.text, self.device = folder, model, text, device
        self._voice_cache: tuple[IndexTTS2Voice, Speaker, torch.Tensor] | None = None
        self._emotion_cache: tuple[IndexTTS2Voice, torch.Tensor] | None = None
        self._emotion_lm: QwenEmotion | None = None

    @classmethod
    def load(cls, folder: Path, device: torch.device, aux: Mapping[str, Path] | None = None) -> IndexTTS2Engine:
        """A release 2 folder (checked by `IndexTTSEngine.load`), strictly, in float32 on the CPU; its
        auxiliary models from `aux` where given (`IndexTTS2.load`)."""
        try:
            model = IndexTTS2.load(folder, aux)
        except KeyError as e:
            raise SpecError(f"{folder / 'config.yaml'}: the setting {e.args[0]!r} is missing: a damaged file; pull the release again") from e
        try:
            text = TextTokenizer(folder / model.release.bpe_model, TextNormalizer(read_glossary(folder / "glossary.yaml")))
        except BpeModelError as e:
            raise FileNotFoundError(str(e)) from e
        return cls(folder, model, text, resolve_device(device))

    def release(self) -> None:
        self.model = None
        self._voice_cache = None
        self._emotion_cache = None
        self._emotion_lm = None

    # -- voices ------------------------------------------------------------------------------------
    def build_voice(self, reference: VoiceReference) -> IndexTTS2Voice:
        """A voice from a clip (no transcript needed): the clip as upstream reads it, at 22.05 kHz
        for the speaker and at 16 kHz for its emotion, each cut to 15 s as upstream cuts it."""
        frames, rate = reference_frames(reference.audio, title="IndexTTS", min_s=spec.MIN_REFERENCE_S, max_s=spec.MAX_REFERENCE_S, trim=reference.trim)
        if not np.any(frames):
            raise UnsupportedVoice("the voice clip is silent (every sample is zero): IndexTTS clones a voice from a clip of speech")
        clip = (frames, rate)
        speaker = load_clip(clip, SPEAKER_RATE, MAX_CLIP_S)
        emotion = load_clip(clip, EMOTION_RATE, MAX_CLIP_S)
        seconds = min(frames.shape[0] / rate, MAX_CLIP_S)
        return IndexTTS2Voice(speaker, emotion, {"ref_seconds": round(seconds, 3)})

    def check_prompt(self, voice: IndexTTS2Voice) -> IndexTTS2Voice:
        if not isinstance(voice, IndexTTS2Voice):
            raise VoicePromptMismatch("this voice prompt was made by an IndexTTS 1.5 model: prepare the voice again with this model")
        return voice

    def _voice(self, voice: IndexTTS2Voice) -> tuple[Speaker, torch.Tensor]:
        """The voice's speaker features and its own emotion's, computed once per voice."""
        if self._voice_cache is None or self._voice_cache[0] is not voice:
            speaker = self.model.speaker((voice.speaker_audio[0].numpy(), SPEAKER_RATE))
            emotion = self.model.emotion_features((voice.emotion_audio[0].numpy(), EMOTION_RATE))
            self._voice_cache = (voice, speaker, emotion)
        return self._voice_cache[1], self._voice_cache[2]

    def _emotion_features(self, voice: IndexTTS2Voice) -> torch.Tensor:
        """An emotion reference's features (its clip at 16 kHz, as upstream reads `emo_audio_prompt`), once per voice."""
        if self._emotion_cache is None or self._emotion_cache[0] is not voice:
            self._emotion_cache = (voice, self.model.emotion_features((voice.emotion_audio[0].numpy(), EMOTION_RATE)))
        return self._emotion_cache[1]

    # -- requests ----------------------------------------------------------------------------------
    def check_instruct(self, instruct: str | None) -> str | None:
        """An emotion described in words: upstream's `emo_text`, read by the release's emotion model
        (loaded on first use; a release folder without it is a clear error naming the folder)."""
        if not instruct or not instruct.strip():
            return None
        self.emotion_lm(param="instructions")
        return instruct

    def check_options(self, request, checked: Checked) -> Checked:
        checked = super().check_options(request, checked)
        if checked.settings["emo_text"]:
            self.emotion_lm(param="emo_text")
        return checked

    def emotion_lm(self, param: str | None = None) -> QwenEmotion:
        """The release's emotion model (`<folder>/<qwen_emo_path>`), loaded once, in float16 as
        upstream loads it; a `RequestError` (for `param`) where the folder lacks it."""
        if self._emotion_lm is None:
            try:
                self._emotion_lm = QwenEmotion.load(emotion_lm_folder(self.folder, self.model.release))
            except (ConfigError, EmotionLMError) as e:
                raise RequestError(
                    f"{self.model.release.variant} reads an emotion described in words with upstream's Qwen emotion model: {e}", param=param
                ) from e
        return self._emotion_lm

    def emotion_from_text(self, text: str, cancel=None) -> tuple[float, ...]:
        """Upstream's `QwenEmotion.inference(text)`: the eight emotion weights (happy, angry, sad,
        afraid, disgusted, melancholic, surprised, calm) the emotion model reads in `text`, drawing
        from torch's global generator as upstream's does."""
        try:
            return self.emotion_lm().read(text, check=None if cancel is None else cancel.raise_if_cancelled).weights
        except EmotionAnswerError as e:
            raise RequestError(str(e), param="instructions") from e

    def _emotion(
        self, speaker: Speaker, own: torch.Tensor, settings: dict, seed: int | None, reference: IndexTTS2Voice | None, read: tuple[float, ...] | None = None
    ) -> torch.Tensor:
        """Upstream's emotion vector for the request: the weights `read` from a text where given, else
        the emotion options' mix where any is set (an emotion reference is then dropped, as upstream
        drops it), else the emotion reference's clip blended with the voice's own by `emo_alpha`,
        else the voice's own."""
        vector = list(read) if read is not None else [float(settings[name]) for name in spec.EMOTION_OPTIONS]
        if read is None and not any(vector):
            if reference is not None:
                return self.model.emotion_vector(speaker, Emotion(self._emotion_features(reference), float(settings["emo_alpha"])))
            return self.model.emotion_vector(speaker, Emotion(own))
        scale = max(0.0, min(1.0, float(settings["emo_alpha"])))
        if scale != 1.0:
            vector = [int(x * scale * 10000) / 10000 for x in vector]
        rows = None
        if settings["use_random"]:
            rng = random.Random(seed)
            rows = tuple(rng.randint(0, n - 1) for n in self.model.release.emo_num)
        return self.model.emotion_vector(speaker, Emotion(own, 1.0, tuple(vector)), rows)

    # -- what release 2.5 replaces ----------------------------------------------------------------
    def text_pieces(self, text: str, c: Checked) -> list[torch.Tensor]:
        """A request's text as the ids of upstream's segments, each (n,) (errors: `RequestError`s)."""
        return segment_ids(self.text, text, c.settings, self.model.lm.cfg.max_text_tokens)

    def speak_piece(self, ids: torch.Tensor, speaker: Speaker, emovec: torch.Tensor, sampling: Sampling, c: Checked) -> tuple[torch.Tensor, torch.Tensor]:
        """One segment's audio at 16-bit scale (1, samples) and its codes (`IndexTTS2.segment`)."""
        return self.model.segment(ids, speaker, emovec, sampling, c.cancel)

    def code_rate(self, settings: dict) -> float:
        """Mel codes a second of speech (the runaway guard's budget in codes)."""
        return CODE_RATE

    def segment_info(self, c: Checked) -> dict:
        """What a request's metadata says beyond the codes and segments."""
        return {}

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        s = c.settings
        rate = self.code_rate(s)
        cap = steps_for(segment.budget_s, rate)
        sampling = sampling_of(s)
        pieces = self.text_pieces(segment.text, c)
        speaker, own = self._voice(c.voice)
        emotion_text = c.instruct if c.instruct else segment.text if s["emo_text"] else None  # upstream's emo_text, or its text
        if c.emotion is not None and emotion_text is None and not any(s[name] for name in spec.EMOTION_OPTIONS):
            self._emotion_features(c.emotion)  # read before the seed, as the voice's own
        if segment.seed is not None:
            torch.manual_seed(int(segment.seed))
        read = None if emotion_text is None else self.emotion_from_text(emotion_text, c.cancel)  # upstream reads it first
        self.model.layer_drop_draws()
        emovec = self._emotion(speaker, own, s, segment.seed, c.emotion, read)
        gap = np.zeros(int(SAMPLE_RATE * int(s["interval_silence"]) / 1000.0), np.float32)
        codes_total, truncated = 0, False
        for k, ids in enumerate(pieces):
            wav, codes = self.speak_piece(ids, speaker, emovec, sampling, c)
            ended = bool(len(codes)) and int(codes[-1]) == self.model.lm.cfg.stop_mel_token
            truncated = truncated or not ended
            codes_total += len(codes)
            samples = (wav[0] / PCM16_MAX).numpy()
            yield Piece(np.concatenate([samples, gap]) if k < len(pieces) - 1 and len(gap) else samples, codes_total)
            if c.cancel is not None:
                c.cancel.raise_if_cancelled()
            if codes_total >= cap:
                truncated = True
                break
        info = {"segments": len(pieces), "codes": codes_total, "seconds": round(codes_total / rate, 3), **self.segment_info(c)}
        if read is not None:
            info["emotion_from_text"] = dict(zip(spec.EMOTIONS, read, strict=True))
        yield Piece(np.zeros(0, np.float32), codes_total, last=True, truncated=truncated, info=info)
