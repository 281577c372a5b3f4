"""The koe side of IndexTTS's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker indextts`.

It drives the registered engine through koe's engine contract (`load_engine`, `prepare_voice` with
the clip, `synthesize` with `seed` and `max_mel_tokens`), as a user's request runs: one upstream
`infer` call. Parts are timed by wrapping the engine's own objects for the one request.

1.5 (`IndexTTSEngine`): the text's segments (`TextTokenizer.segments`), the voice (`prepare_voice`:
the clip decoded and its log-mel; `IndexTTS15.voice`: the conditioning latents and the speaker
embedding), the code search (the `search` that `IndexTTS15.segment` calls), the latent pass
(`SpeechLM.latent`) and the vocoder (`BigVGAN.decode`, whose float output the hashes read).

2 (`IndexTTS2Engine`): the text's segments; the reference (`prepare_voice`: the clip decoded and
read at 22.05 and 16 kHz; `IndexTTS2.speaker`, `.emotion_features`, `.emotion_vector`, the speaker
conditioning and `EmotionSpeechLM.conditioning`), with w2v-BERT (`extract_features` and
`semantic_features`), the codec (`SemanticCodec.quantize`), the mel (`mel22k`) and CAM++
(`CAMPPlus.style`) also apart; the code search (the `search` that `IndexTTS2.segment` calls); the
latent pass; s2mel (`SemanticCodec.vq2emb`, `S2Mel.target_condition`, `S2Mel.decode`: the length
regulator and flow matching) and the vocoder (`BigVGAN2.forward`, whose float output the hashes read).

2.5 (`IndexTTS25Engine`): the text (`IndexTTS25.text_segments`: 2.5's front end); the reference
(`prepare_voice`; `IndexTTS25.speaker`, `.emotion_features`, `.emotion_vector`, the GPT's
conditioning rows), with w2v-BERT, the mel and CAM++ apart; the code search; s2mel (the 2.5 codec's
`decode`, the length regulator once the text is cut, `S2Mel.decode`) and the vocoder.
"""

from __future__ import annotations

import time

import torch

from koe.engines.base import SynthesisRequest, VoiceReference, collect
from koe.engines.benchmark import KoeWorker as Base
from koe_indextts import model as model_module
from koe_indextts import model2 as model2_module
from koe_indextts import model25 as model25_module
from koe_indextts.bench import cases


class _Taps:
    """A request's vocoder waves and searched codes, through wrappers of `vocoder` and `search` (in call order)."""

    def __init__(self, vocoder, search) -> None:
        self.waves: list[torch.Tensor] = []
        self.codes: list[list[int]] = []

        def tapped_vocoder(*args, **kwargs):
            wav = vocoder(*args, **kwargs)
            self.waves.append(wav.detach().clone())
            return wav

        def tapped_search(*args, **kwargs):
            codes = search(*args, **kwargs)
            self.codes.append(codes.tolist())
            return codes

        self.vocoder, self.search = tapped_vocoder, tapped_search


class _Patched:
    """Attributes replaced for one request (`set(owner, name, value)`), put back by `restore()`:
    an instance's own attribute deleted again, a module's restored."""

    def __init__(self) -> None:
        self.undo: list = []

    def set(self, owner, name: str, value) -> None:
        had = name in vars(owner)
        self.undo.append((owner, name, had, vars(owner).get(name)))
        setattr(owner, name, value)

    def restore(self) -> None:
        for owner, name, had, old in reversed(self.undo):
            if had:
                setattr(owner, name, old)
            else:
                delattr(owner, name)
        self.undo.clear()


class KoeWorker(Base):
    """IndexTTS 1.5 or 2 through koe's engine contract (float32, the CPU: `Base.load`)."""

    def case(self, cmd: dict) -> dict:
        from koe_indextts.engine2 import IndexTTS2Engine
        from koe_indextts.engine25 import IndexTTS25Engine

        if isinstance(self.engine, IndexTTS25Engine):
            return self.case25(cmd)
        if isinstance(self.engine, IndexTTS2Engine):
            return self.case2(cmd)
        return self.case15(cmd)

    def _request(self, cmd: dict, language: str | None = None) -> tuple[float, float, object]:
        """One request as a user's runs: the voice prepared from the clip, then synthesized; (seconds preparing, total, output)."""
        text, reference, codes_cap, seed = cases.request(cmd)
        eng = self.engine
        t = time.perf_counter()
        prepared = eng.prepare_voice(VoiceReference(reference))
        prepare_s = time.perf_counter() - t
        out = collect(eng.synthesize(SynthesisRequest(text, language=language, voice=prepared, seed=seed, options={"max_mel_tokens": codes_cap})))
        return prepare_s, time.perf_counter() - t, out

    def _timed(self, cmd: dict, timers: dict, own: dict, *, language: str | None = None, counted: dict | None = None) -> tuple[dict, float, float, object]:
        """One request with each of `timers` (name -> (owner, attribute, part)) timed in place (`own[name]`:
        the callable to time instead of the attribute; `counted[name]`: which calls count, by the timer's
        `shape`); (the timers, seconds preparing the voice, total, output)."""
        spans = {name: self.wire.SpanTimer(own.get(name) or getattr(owner, attr)) for name, (owner, attr, _) in timers.items()}
        for name, shape in (counted or {}).items():
            spans[name].shape = shape
        patched = _Patched()
        for name, (owner, attr, _) in timers.items():
            patched.set(owner, attr, spans[name])
        try:
            prepare_s, total_s, out = self._request(cmd, language)
        finally:
            patched.restore()
        return spans, prepare_s, total_s, out

    def _result(self, total_s: float, taps: _Taps, parts: dict, variant: str | None = None) -> dict:
        wave = torch.cat([w.reshape(-1) for w in taps.waves]).numpy()
        made = taps.codes
        extra = {} if variant is None else {"variant": variant}
        return cases.result(
            self.wire, total_s, wave, parts, sum(len(c) for c in made), len(made), cases.codes_sha1(made), threads=torch.get_num_threads(), **extra
        )

    def case15(self, cmd: dict) -> dict:
        eng, model = self.engine, self.engine.model
        taps = _Taps(model.vocoder.decode, model_module.search)
        timers = {  # name -> (owner, attribute, part)
            "text": (eng.text, "segments", "text_s"),
            "voice": (model, "voice", "reference_s"),
            "search": (model_module, "search", "search_s"),
            "latent": (model.lm, "latent", "latent_s"),
            "vocoder": (model.vocoder, "decode", "vocoder_s"),
        }
        spans, prepare_s, total_s, out = self._timed(cmd, timers, {"search": taps.search, "vocoder": taps.vocoder})
        parts = dict.fromkeys(("text_s", "reference_s", "search_s", "latent_s", "vocoder_s"), 0.0)
        for name, (_, _, part) in timers.items():
            parts[part] += spans[name].total()
        parts["reference_s"] += prepare_s
        assert len(out.samples) == sum(w.numel() for w in taps.waves)  # the request's audio is the vocoder's, at 16-bit scale
        return self._result(total_s, taps, parts)

    def case2(self, cmd: dict) -> dict:
        eng, model = self.engine, self.engine.model
        taps = _Taps(model.vocoder.forward, model2_module.search)
        timers = {  # name -> (owner, attribute, part)
            "text": (eng.text, "segments", "text_s"),
            "speaker": (model, "speaker", "reference_s"),
            "emotion_features": (model, "emotion_features", "reference_s"),
            "emotion_vector": (model, "emotion_vector", "reference_s"),
            "conditioning": (model.speaker_conditioning, "forward", "reference_s"),
            "lm_conditioning": (model.lm, "conditioning", "reference_s"),
            "extract_features": (model2_module, "extract_features", "w2v_s"),
            "semantic_features": (model2_module, "semantic_features", "w2v_s"),
            "quantize": (model.codec, "quantize", "codec_s"),
            "mel22k": (model2_module, "mel22k", "mel_s"),
            "style": (model.campplus, "style", "campplus_s"),
            "search": (model2_module, "search", "search_s"),
            "latent": (model.lm, "latent", "latent_s"),
            "vq2emb": (model.codec, "vq2emb", "s2mel_s"),
            "target_condition": (model.s2mel, "target_condition", "s2mel_s"),
            "decode": (model.s2mel, "decode", "s2mel_s"),
            "vocoder": (model.vocoder, "forward", "vocoder_s"),
        }
        spans, prepare_s, total_s, out = self._timed(cmd, timers, {"search": taps.search, "vocoder": taps.vocoder})
        parts = dict.fromkeys(cases.PARTS_2 + cases.REFERENCE_PARTS_2, 0.0)
        for name, (_, _, part) in timers.items():
            parts[part] += spans[name].total()
        parts["reference_s"] += prepare_s
        assert len(out.samples) == sum(w.numel() for w in taps.waves)  # one segment: the request's audio is the vocoder's, at 16-bit scale
        return self._result(total_s, taps, parts, "IndexTTS-2")

    def case25(self, cmd: dict) -> dict:
        eng, model = self.engine, self.engine.model
        taps = _Taps(model.vocoder.forward, model25_module.search)
        timers = {  # name -> (owner, attribute, part)
            "text": (model, "text_segments", "text_s"),
            "speaker": (model, "speaker", "reference_s"),
            "emotion_features": (model, "emotion_features", "reference_s"),
            "emotion_vector": (model, "emotion_vector", "reference_s"),
            "speaker_latent": (model.lm, "speaker_latent", "reference_s"),
            "lm_conditioning": (model.lm, "conditioning", "reference_s"),
            "extract_features": (model25_module, "extract_features", "w2v_s"),
            "semantic_features": (model25_module, "semantic_features", "w2v_s"),
            "emotion_extract": (model2_module, "extract_features", "w2v_s"),  # the emotion clip's, through release 2's code
            "emotion_semantic": (model2_module, "semantic_features", "w2v_s"),
            "mel22k": (model25_module, "mel22k", "mel_s"),
            "style": (model.campplus, "style", "campplus_s"),
            "search": (model25_module, "search", "search_s"),
            "decode_codes": (model.codec, "decode", "s2mel_s"),
            "regulator": (model.s2mel.length_regulator, "forward", "s2mel_s"),
            "decode": (model.s2mel, "decode", "s2mel_s"),
            "vocoder": (model.vocoder, "forward", "vocoder_s"),
        }
        reading = [False]  # inside `speaker`: the prompt's length regulator is the reference's
        read_speaker = model.speaker

        def speaker(*args, **kwargs):
            reading[0] = True
            try:
                return read_speaker(*args, **kwargs)
            finally:
                reading[0] = False

        own = {"search": taps.search, "vocoder": taps.vocoder, "speaker": speaker}
        spans, prepare_s, total_s, out = self._timed(
            cmd,
            timers,
            own,
            language=cases.language(cmd),
            counted={"regulator": lambda *a, **k: not reading[0]},  # the targets' calls
        )
        parts = dict.fromkeys(cases.PARTS_25 + cases.REFERENCE_PARTS_25, 0.0)
        for name, (_, _, part) in timers.items():
            parts[part] += spans[name].total((lambda target: target) if name == "regulator" else (lambda shape: True))
        parts["reference_s"] += prepare_s
        gaps = (len(taps.waves) - 1) * int(22050 * eng.defaults["interval_silence"] / 1000.0)  # the tiny GPT's few text positions cut the text in two
        assert len(out.samples) == sum(w.numel() for w in taps.waves) + gaps  # the request's audio is the vocoder's, at 16-bit scale, with the silences between
        return self._result(total_s, taps, parts, "IndexTTS-2.5")
