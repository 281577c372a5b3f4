"""The GPT-SoVITS engine (v1/v2): a cloned voice (a 3-10 s clip, with or without its transcript) and
text -> upstream's `TTS.run` (`synthesis.py`) -> 32 kHz audio.

One request is one `TTS.run` call: the pipeline never segments a text (upstream cuts it itself by
`text_split_method`) and adds no pauses (upstream's `fragment_interval` does). A request with
`seed=N` gives upstream's samples for `"seed": N` on a fresh reference (see `synthesis`); without a
seed nothing is seeded. koe returns upstream's float samples before its int16 step
(`synthesis.to_int16` gives its int16 samples).

Options are `TTS.run`'s, under its names (`spec.options_schema`). Streaming is upstream's
`return_fragment`: each batch of fragments is spoken as soon as its SoVITS decode ends (so the first
audio waits for the first fragment's AR and SoVITS decodes); it cuts without buckets and without the
punctuation squeeze, so a stream is not the one-shot audio.

Languages are upstream's (`TTS_Config.languages`: v1 has no ko / yue); a language whose front end koe
does not have yet is refused, as is Chinese text when the folder lacks `G2PWModel/`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields
from pathlib import Path

import numpy as np
import torch

from koe.audio.errors import AudioError
from koe.engines.base import Capabilities, EmptyText, UnsupportedLanguage, UnsupportedVoice, VoicePromptMismatch, VoiceReference
from koe.engines.engine import BaseEngine, Checked
from koe.engines.gpt_sovits import spec
from koe.engines.gpt_sovits.bert_features import BertFeatures
from koe.engines.gpt_sovits.hubert import features as hubert_features
from koe.engines.gpt_sovits.hubert import read_hubert
from koe.engines.gpt_sovits.reference import ReferenceLengthError, hubert_input, reference_spectrogram
from koe.engines.gpt_sovits.sovits_weights import load_sovits
from koe.engines.gpt_sovits.synthesis import Models, RunSettings, fragment_of, fragments, set_seed
from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.text.clean import LanguageNotBuilt
from koe.engines.gpt_sovits.text.segment import SENTENCE_ENDS
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice, GPTSoVITSVoiceError
from koe.engines.pipeline import Piece, PipelineDefaults, Segment
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision

__all__ = ["GPTSoVITSEngine"]

MAX_SEGMENT_CHARS = 100000  # one request is one TTS.run call: upstream cuts the text itself


class _LazyFrontEnds(dict):
    """The text front ends `clean_text` is handed, built on first use: English with the folder's
    NLTK tagger (or NLTK's own), Chinese with the folder's G2PW."""

    def __init__(self, layout: spec.Layout) -> None:
        super().__init__()
        self.layout = layout

    def __bool__(self) -> bool:  # clean_text falls back to its own modules for an empty mapping
        return True

    def get(self, language, default=None):
        if language not in self and language in ("en", "zh"):
            with torch.random.fork_rng(devices=[]):  # built mid-request, after the seed: their modules' init draws must not count
                self[language] = self._build(language)
        return super().get(language, default)

    def _build(self, language: str):
        if language == "en":
            from koe.engines.gpt_sovits.text.english import EnglishFrontEnd

            return EnglishFrontEnd.load(self.layout.nltk)
        if self.layout.g2pw is None:
            raise UnsupportedLanguage(
                f"GPT-SoVITS reads Chinese with G2PW's model, which this folder lacks: put upstream's G2PWModel/ "
                f"(G2PWModel_1.1.zip, unpacked) into {self.layout.folder}"
            )
        from koe.engines.gpt_sovits.g2pw import G2PW
        from koe.engines.gpt_sovits.text.chinese import ChineseFrontEnd

        return ChineseFrontEnd(G2PW(self.layout.g2pw, self.layout.bert))


class GPTSoVITSEngine(BaseEngine):
    """A loaded GPT-SoVITS v1/v2 folder. Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = "GPT-SoVITS"
    voice_type, voice_error = GPTSoVITSVoice, GPTSoVITSVoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.0, first_chunk_s=1.0, chunk_s=2.0)
    sample_rate = spec.SAMPLE_RATE

    def __init__(self, layout: spec.Layout, models: Models, hubert, device: torch.device) -> None:
        self.layout, self.models, self.hubert, self.device = layout, models, hubert, device

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> GPTSoVITSEngine:
        """Load a folder strictly (see `spec`), on the CPU in float32 (upstream's bits)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        check_precision(precision, ("fp32",), "GPT-SoVITS")
        if dtype is not None and dtype not in ("float32", torch.float32):
            raise ValueError(f"GPT-SoVITS runs in float32 (dtype={dtype!r})")
        dev = resolve_device(device)
        if dev.type != "cpu":
            raise ValueError(f"GPT-SoVITS runs on the CPU in this version of koe (device={dev})")
        try:
            layout = spec.find_layout(folder)
        except spec.SpecError as e:
            raise FileNotFoundError(str(e)) from e
        if layout.version not in spec.SUPPORTED:
            raise ValueError(f"{layout.sovits}: SoVITS {layout.version} is not supported yet (koe runs {', '.join(spec.SUPPORTED)})")
        missing = [f for f in layout.required() if not (folder / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{folder}: missing {', '.join(missing)} (koe models pull {spec.REPO}/{layout.version})")
        sovits = load_sovits(layout.sovits)
        version = sovits.config.version
        hubert = read_hubert(layout.hubert)
        lang_model = layout.langdetect
        models = Models(
            t2s=load_t2s(layout.gpt),
            sovits=sovits,
            bert=BertFeatures.from_folder(layout.bert),
            front_ends=_LazyFrontEnds(layout),
            lang_model=None if lang_model is None else str(lang_model),
            version=version,
            hubert_draws=len(hubert.encoder.layers),
        )
        return cls(layout, models, hubert, dev)

    def release(self) -> None:
        self.models = self.hubert = None

    @property
    def version(self) -> str:
        return self.models.version

    @property
    def precision(self) -> str:
        return "float32"

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities(self.version)

    # -- voices ------------------------------------------------------------------------------------
    def _reference(self, audio) -> tuple:
        source, rate = audio if isinstance(audio, tuple) and len(audio) == 2 else (audio, None)
        if isinstance(source, torch.Tensor):
            source = source.detach().cpu().numpy()
        return source, rate

    def _spectrogram(self, audio) -> torch.Tensor:
        source, rate = self._reference(audio)
        try:
            return reference_spectrogram(source, sample_rate=rate)[0]
        except AudioError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e

    def build_voice(self, reference: VoiceReference, prompt_lang: str = "auto") -> GPTSoVITSVoice:
        """A voice from a 3-10 s clip (upstream's window, at 16 kHz) and its transcript in
        `prompt_lang` (None / blank: reference-free, v1/v2)."""
        source, rate = self._reference(reference.audio)
        try:
            wav = hubert_input(source, self.models.sovits.config.sampling_rate, rate)
        except ReferenceLengthError as e:
            raise UnsupportedVoice(f"the voice clip must be 3 to 10 seconds long, as upstream's: {e}") from e
        except AudioError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e
        with torch.inference_mode():
            semantic = self.models.sovits.extract_latent(hubert_features(self.hubert, wav, layerdrop_draws=False))[0, 0]
        specs = (self._spectrogram(reference.audio),)
        text = None if reference.text is None or not str(reference.text).strip("\n") else str(reference.text).strip("\n")
        info = {"ref_seconds": round(wav.shape[0] / 16000 - 0.6, 3), "references": 1}
        if text is None:
            return GPTSoVITSVoice(semantic, specs, None, None, None, None, None, self.version, info)
        lang = self._language(prompt_lang, "prompt_lang")
        if text[-1] not in SENTENCE_ENDS:
            text += "." if lang == "en" else "。"
        fragment = self._fragment(text, lang)
        return GPTSoVITSVoice(semantic, specs, text, lang, fragment.phones, fragment.bert, fragment.norm_text, self.version, info)

    def add_references(self, voice: GPTSoVITSVoice, clips: Sequence) -> GPTSoVITSVoice:
        """`voice` with more reference clips for its timbre (upstream's `aux_ref_audio_paths`:
        SoVITS averages the clips' embeddings); a clip is a path, bytes or (samples, rate)."""
        return self.check_prompt(voice).with_specs([self._spectrogram(c) for c in clips])

    def check_prompt(self, voice: GPTSoVITSVoice) -> GPTSoVITSVoice:
        if voice.version != self.version:
            raise VoicePromptMismatch(
                f"this voice prompt was made by a GPT-SoVITS {voice.version} model; this is {self.version}: prepare the voice again with it"
            )
        if voice.phones is not None and max(voice.phones) >= self.models.t2s.config.phoneme_vocab_size:
            raise VoicePromptMismatch("this voice prompt holds phonemes outside this model's table: prepare the voice again with it")
        return voice

    def _language(self, language: str | None, what: str = "language") -> str:
        language = "auto" if language is None else str(language).lower()
        if language not in self.capabilities.languages:
            raise UnsupportedLanguage(f"GPT-SoVITS {self.version} does not speak {language!r} ({what}); it takes: {', '.join(self.capabilities.languages)}")
        return language

    def _fragment(self, text: str, language: str):
        try:
            return fragment_of(self.models, text, language)
        except LanguageNotBuilt as e:
            raise UnsupportedLanguage(str(e)) from e

    # -- requests ----------------------------------------------------------------------------------
    def check_options(self, request, checked: Checked) -> Checked:
        values = self.capabilities.options.validate(request.options)
        values["batch_size"] = values.pop("batch_fragments", 1)  # upstream's name
        settings = RunSettings(**{f.name: values[f.name] for f in fields(RunSettings) if f.name in values})
        if checked.voice is None:
            raise UnsupportedVoice("GPT-SoVITS speaks in a cloned voice: pass a voice prepared from a 3-10 s clip (--ref clip.wav, with --ref-text)")
        return Checked(checked.voice, self._language(checked.language), checked.instruct, settings, checked.cancel, checked.user_cap)

    def speak_segment(self, segment: Segment, c: Checked) -> Iterator[Piece]:
        """The segment's `TTS.run` audio; past `segment.budget_s` (the runaway guard) the audio is cut
        there and marked truncated (the samples before the cut are upstream's)."""
        if segment.seed is not None:
            set_seed(int(segment.seed))
        budget = int(segment.budget_s * self.sample_rate)
        made, truncated = 0, False
        try:
            for wave in fragments(self.models, c.voice, segment.text, c.language, c.settings, streamed=segment.streamed, cancel=c.cancel):
                if made + len(wave) > budget:
                    wave, truncated = wave[: budget - made], True
                made += len(wave)
                yield Piece(wave.astype(np.float32, copy=False), made)
                if c.cancel is not None:
                    c.cancel.raise_if_cancelled()  # between fragments: the AR and SoVITS decodes run whole
                if truncated:
                    break
        except LanguageNotBuilt as e:
            raise UnsupportedLanguage(str(e)) from e
        except ValueError as e:
            if "no text to read" in str(e):
                raise EmptyText("the text holds nothing to speak (only punctuation or symbols)") from e
            raise
        info = {"mode": "zero-shot" if c.voice.has_transcript else "reference-free", "seconds": round(made / self.sample_rate, 3)}
        yield Piece(np.zeros(0, np.float32), made, last=True, truncated=truncated, info=info)

    def result_metadata(self) -> dict:
        return {"model": f"GPT-SoVITS {self.version}", "precision": self.precision, "device": str(self.device)}
