"""The GPT-SoVITS engine (v1, v2, v2Pro, v2ProPlus, v3, v4): a cloned voice (a 3-10 s clip, with
its transcript; v1/v2/v2Pro/ProPlus also without) and text -> upstream's `TTS.run` (`synthesis.py`)
-> audio at 32 kHz (v3: 24 kHz, v4: 48 kHz).

Per version, what the voice holds beyond v2's: v2Pro/ProPlus each reference's speaker-verification
embedding (ERes2NetV2, `sv/pretrained_eres2netv2w24s4ep4.ckpt`); v3/v4 the reference's mel for the
CFM (v3/v4 take their timbre from the main clip alone: upstream's v3/v4 path reads only the first
reference spectrogram, so auxiliary clips are refused there). v3/v4 need a transcript, as upstream
refuses reference-free mode for them.

One request is one `TTS.run` call: the pipeline never segments a text (upstream cuts it itself by
`text_split_method`) and adds no pauses (upstream's `fragment_interval` does). A request with
`seed=N` gives upstream's samples for `"seed": N` on a fresh reference (see `synthesis`); without a
seed nothing is seeded. koe returns upstream's float samples before its int16 step
(`synthesis.to_int16` gives its int16 samples).

Options are `TTS.run`'s, under its names (`spec.options_schema`). Streaming is upstream's
`return_fragment`: each batch of fragments is spoken as soon as its SoVITS decode ends (so the first
audio waits for the first fragment's AR and SoVITS decodes); it cuts without buckets and without the
punctuation squeeze, so a stream is not the one-shot audio. Upstream's token-chunk `streaming_mode` is the
drop-in's (`koe.compat.gpt_sovits`, `streaming.py`).

Languages are upstream's (`TTS_Config.languages`: v1 has no ko / yue); a language whose front end koe
does not have yet is refused, as is Chinese text when the folder lacks `G2PWModel/`.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import fields, replace
from pathlib import Path

import numpy as np
import torch

from koe.audio.errors import AudioError
from koe.engines.base import Capabilities, EmptyText, UnsupportedLanguage, UnsupportedVoice, VoicePromptMismatch, VoiceReference
from koe.engines.engine import BaseEngine, Checked
from koe.engines.gpt_sovits import spec
from koe.engines.gpt_sovits.bert_features import BertFeatures
from koe.engines.gpt_sovits.bigvgan import load_bigvgan
from koe.engines.gpt_sovits.hubert import features as hubert_features
from koe.engines.gpt_sovits.hubert import read_hubert
from koe.engines.gpt_sovits.reference import ReferenceLengthError, SpectrogramSettings, hubert_input, reference_spectrogram, reference_waveform
from koe.engines.gpt_sovits.sovits_v3_weights import load_sovits_v3
from koe.engines.gpt_sovits.sovits_weights import load_sovits
from koe.engines.gpt_sovits.sv import load_sv
from koe.engines.gpt_sovits.synthesis import Models, RunSettings, fragment_of, fragments, set_seed
from koe.engines.gpt_sovits.t2s import load_t2s
from koe.engines.gpt_sovits.text.clean import LanguageNotBuilt
from koe.engines.gpt_sovits.text.segment import SENTENCE_ENDS
from koe.engines.gpt_sovits.vocoder_synthesis import VOCODER_SETTINGS, reference_mel
from koe.engines.gpt_sovits.vocoder_v4 import load_vocoder_v4
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice, GPTSoVITSVoiceError
from koe.engines.pipeline import Piece, PipelineDefaults, Segment
from koe.runtime.device import resolve_device
from koe.runtime.precision import check as check_precision

__all__ = ["GPTSoVITSEngine"]


def _load_version(layout: spec.Layout) -> tuple:
    """The folder's SoVITS model, v3/v4's vocoder (else None) and v2Pro/ProPlus's speaker
    verifier (else None), as upstream's init_vits_weights / init_vocoder / init_sv_model load them."""
    if layout.version in spec.VOCODER_VERSIONS:
        sovits = load_sovits_v3(layout.sovits, base=layout.base, version=layout.version)
        vocoder = load_bigvgan(layout.bigvgan) if layout.version == "v3" else load_vocoder_v4(layout.vocoder_v4)
        return sovits, vocoder, None
    sovits = load_sovits(layout.sovits)
    return sovits, None, load_sv(layout.sv) if sovits.needs_sv else None


MAX_SEGMENT_CHARS = 100000  # one request is one TTS.run call: upstream cuts the text itself


class _LazyFrontEnds(dict):
    """The text front ends `clean_text` is handed, built on first use: English with the folder's
    NLTK tagger (or NLTK's own), Chinese with the folder's G2PW (v2 and later: v1's Chinese is
    upstream's older module, without G2PW, which `clean_text` picks itself)."""

    def __init__(self, layout: spec.Layout, version: str | None = None) -> None:
        super().__init__()
        self.layout, self.version = layout, version or layout.version

    def __bool__(self) -> bool:  # clean_text falls back to its own modules for an empty mapping
        return True

    def get(self, language, default=None):
        if language not in self and (language == "en" or (language == "zh" and self.version != "v1")):
            with torch.random.fork_rng(devices=[]):  # built mid-request, after the seed: their modules' init draws must not count
                self[language] = self._build(language)
        return super().get(language, default)

    def _build(self, language: str):
        if language == "en":
            from koe.engines.gpt_sovits.text.english import EnglishFrontEnd
            from koe.engines.gpt_sovits.text.pos_tagger import TaggerNotFound

            try:
                return EnglishFrontEnd.load(self.layout.nltk)
            except TaggerNotFound as e:
                raise UnsupportedLanguage(
                    f"{e}; or put {spec.NLTK}/ (the hub's {spec.PRETRAINED_REPO}/nltk_data.zip, unpacked) into {self.layout.folder}"
                ) from e
        if self.layout.g2pw is None:
            raise UnsupportedLanguage(
                f"GPT-SoVITS reads Chinese with G2PW's model, which this folder lacks: put {spec.G2PW}/ "
                f"(the hub's {spec.PRETRAINED_REPO}/G2PWModel.zip, unpacked) into {self.layout.folder}"
            )
        from koe.engines.gpt_sovits.g2pw import G2PW
        from koe.engines.gpt_sovits.text.chinese import ChineseFrontEnd

        return ChineseFrontEnd(G2PW(self.layout.g2pw, self.layout.bert))


class GPTSoVITSEngine(BaseEngine):
    """A loaded GPT-SoVITS folder (any version). Not re-entrant: one call at a time."""

    family = spec.FAMILY
    title = "GPT-SoVITS"
    voice_type, voice_error = GPTSoVITSVoice, GPTSoVITSVoiceError
    pipeline_defaults = PipelineDefaults(max_segment_chars=MAX_SEGMENT_CHARS, pause_s=0.0, first_chunk_s=1.0, chunk_s=2.0)

    def __init__(self, layout: spec.Layout, models: Models, hubert, device: torch.device, sv=None) -> None:
        self.layout, self.models, self.hubert, self.device, self.sv = layout, models, hubert, device, sv
        self.sample_rate = spec.SAMPLE_RATES.get(models.version, spec.SAMPLE_RATE)

    @classmethod
    def load(cls, folder: str | Path, device=None, dtype=None, *, precision: str | None = None) -> GPTSoVITSEngine:
        """Load a folder strictly (see `spec`), on the CPU in float32 (upstream's bits; `precision`
        int8 or int4 quantizes the GPT's blocks, opt-in)."""
        folder = Path(folder)
        if not folder.is_dir():
            raise FileNotFoundError(f"model folder not found: {folder}")
        check_precision(precision, spec.PRECISIONS, "GPT-SoVITS")  # before any file is read
        if dtype is not None and dtype not in ("float32", torch.float32):
            raise ValueError(f"GPT-SoVITS runs in float32 (dtype={dtype!r})")
        try:
            layout = spec.find_layout(folder)
        except spec.SpecError as e:
            raise FileNotFoundError(str(e)) from e
        return cls.from_layout(layout, device, precision=precision)

    @classmethod
    def from_layout(cls, layout: spec.Layout, device=None, *, precision: str | None = None) -> GPTSoVITSEngine:
        """The engine on a layout's files (`spec.find_layout`'s, or a layout naming files anywhere,
        as `koe.compat.gpt_sovits` makes from upstream's config): its version supported, every
        required file there; the GPT's blocks on the precision layer (float32 by default, int8 or
        int4 opted in: `metadata["precision"]`; `metadata["kernel"]` says what runs their products)."""
        numeric = check_precision(precision, spec.PRECISIONS, "GPT-SoVITS") or "fp32"
        dev = resolve_device(device)
        if dev.type != "cpu":
            raise ValueError(f"GPT-SoVITS runs on the CPU in this version of koe (device={dev})")
        if layout.version not in spec.SUPPORTED:
            raise ValueError(f"{layout.sovits}: SoVITS {layout.version} is not supported yet (koe runs {', '.join(spec.SUPPORTED)})")
        missing = [f for f in layout.required() if not (layout.folder / f).is_file()]
        if missing:
            raise FileNotFoundError(f"{layout.folder}: missing {', '.join(missing)} (koe models pull {spec.REPO}/{spec.VARIANTS[layout.version]})")
        sovits, vocoder, sv = _load_version(layout)
        version = sovits.version if layout.version in spec.VOCODER_VERSIONS else sovits.config.version
        hubert = read_hubert(layout.hubert)
        lang_model = layout.langdetect
        models = Models(
            t2s=load_t2s(layout.gpt, precision=numeric),
            sovits=sovits,
            bert=BertFeatures.from_folder(layout.bert),
            front_ends=_LazyFrontEnds(layout, version),
            lang_model=None if lang_model is None else str(lang_model),
            version=version,
            hubert_draws=len(hubert.encoder.layers),
            vocoder=vocoder,
        )
        return cls(layout, models, hubert, dev, sv)

    def release(self) -> None:
        self.models = self.hubert = self.sv = None

    @property
    def version(self) -> str:
        return self.models.version

    @property
    def precision(self) -> str:
        return self.models.t2s.precision

    @property
    def capabilities(self) -> Capabilities:
        return spec.capabilities(self.version)

    # -- voices ------------------------------------------------------------------------------------
    def _reference(self, audio) -> tuple:
        source, rate = audio if isinstance(audio, tuple) and len(audio) == 2 else (audio, None)
        if isinstance(source, torch.Tensor):
            source = source.detach().cpu().numpy()
        return source, rate

    @property
    def _spec_settings(self) -> SpectrogramSettings:
        c = self.models.sovits.config
        return SpectrogramSettings(c.sampling_rate, c.filter_length, c.hop_length, c.win_length)

    def _spectrogram(self, audio) -> tuple[torch.Tensor, torch.Tensor | None]:
        """The clip's spectrogram and (v2Pro/ProPlus) its speaker-verification embedding (1, 20480)."""
        source, rate = self._reference(audio)
        try:
            spec_, sv_audio = reference_spectrogram(source, self._spec_settings, sample_rate=rate, sv_audio=self.sv is not None)
        except AudioError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e
        if self.sv is None:
            return spec_, None
        with torch.inference_mode():
            return spec_, self.sv(sv_audio)

    def _reference_mel(self, audio) -> torch.Tensor:
        """v3/v4: the raw clip's normalised mel (`vocoder_synthesis.reference_mel`)."""
        source, rate = self._reference(audio)
        try:
            raw, raw_rate = reference_waveform(source, rate)
        except AudioError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e
        return reference_mel(raw, raw_rate, VOCODER_SETTINGS[self.version])

    def reference_voice(self, audio) -> GPTSoVITSVoice:
        """The clip's part of a voice, without a transcript (what upstream's `set_ref_audio` reads):
        its semantic tokens, spectrogram, v2Pro/ProPlus's speaker embedding, v3/v4's mel. A 3-10 s
        clip (upstream's window, at 16 kHz): a path, bytes or (samples, rate). v3/v4 speak only
        once a transcript is added (`build_voice`, or the drop-in's run)."""
        source, rate = self._reference(audio)
        try:
            wav = hubert_input(source, self.models.sovits.config.sampling_rate, rate)
        except ReferenceLengthError as e:
            raise UnsupportedVoice(f"the voice clip must be 3 to 10 seconds long, as upstream's: {e}") from e
        except AudioError as e:
            raise UnsupportedVoice(f"the voice clip cannot be used: {e}") from e
        with torch.inference_mode():
            semantic = self.models.sovits.extract_latent(hubert_features(self.hubert, wav, layerdrop_draws=False))[0, 0]
        spec_, sv = self._spectrogram(audio)
        extra = {
            "sv": None if sv is None else (sv,),
            "mel": self._reference_mel(audio) if self.version in spec.VOCODER_VERSIONS else None,
        }
        info = {"ref_seconds": round(wav.shape[0] / 16000 - 0.6, 3), "references": 1}
        return GPTSoVITSVoice(semantic, (spec_,), None, None, None, None, None, self.version, info, **extra)

    def build_voice(self, reference: VoiceReference, prompt_lang: str = "auto") -> GPTSoVITSVoice:
        """A voice from a 3-10 s clip (`reference_voice`) and its transcript in `prompt_lang`
        (None / blank: reference-free, v1/v2/v2Pro/ProPlus only)."""
        text = None if reference.text is None or not str(reference.text).strip("\n") else str(reference.text).strip("\n")
        if text is None and self.version in spec.VOCODER_VERSIONS:
            raise UnsupportedVoice(f"GPT-SoVITS {self.version} needs the clip's transcript (--ref-text): upstream has no reference-free mode for v3/v4")
        voice = self.reference_voice(reference.audio)
        if text is None:
            return voice
        lang = self._language(prompt_lang, "prompt_lang")
        if text[-1] not in SENTENCE_ENDS:
            text += "." if lang == "en" else "。"
        fragment = self._fragment(text, lang)
        return replace(voice, text=text, prompt_lang=lang, phones=fragment.phones, bert=fragment.bert, norm_text=fragment.norm_text)

    def add_references(self, voice: GPTSoVITSVoice, clips: Sequence) -> GPTSoVITSVoice:
        """`voice` with more reference clips for its timbre (upstream's `aux_ref_audio_paths`:
        SoVITS averages the clips' embeddings); a clip is a path, bytes or (samples, rate). v3/v4
        refuse them (their timbre is the main clip's alone)."""
        voice = self.check_prompt(voice)
        if clips and self.version in spec.VOCODER_VERSIONS:
            raise UnsupportedVoice(f"GPT-SoVITS {self.version} takes its timbre from one clip: upstream's v3/v4 path never reads auxiliary references")
        made = [self._spectrogram(c) for c in clips]
        return voice.with_specs([m[0] for m in made], None if self.sv is None else [m[1] for m in made])

    def check_prompt(self, voice: GPTSoVITSVoice) -> GPTSoVITSVoice:
        if voice.version != self.version:
            raise VoicePromptMismatch(
                f"this voice prompt was made by a GPT-SoVITS {voice.version} model; this is {self.version}: prepare the voice again with it"
            )
        if (voice.sv is None) != (self.sv is None) or (voice.mel is None) != (self.version not in spec.VOCODER_VERSIONS):
            raise VoicePromptMismatch(f"this voice prompt lacks what GPT-SoVITS {self.version} needs: prepare the voice again with it")
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
        meta = {"model": f"GPT-SoVITS {self.version}", "precision": self.precision, "device": str(self.device)}
        kernel = self.models.t2s.kernel
        return meta if kernel is None else {**meta, "kernel": kernel}
