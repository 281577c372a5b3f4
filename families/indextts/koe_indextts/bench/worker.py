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

    def case15(self, cmd: dict) -> dict:
        eng = self.engine
        model = eng.model
        wire = self.wire
        waves: list[torch.Tensor] = []
        made: list[list[int]] = []
        decode = model.vocoder.decode

        def vocoder(*args, **kwargs):
            wav = decode(*args, **kwargs)
            waves.append(wav.detach().clone())
            return wav

        search = model_module.search

        def searched(*args, **kwargs):
            codes = search(*args, **kwargs)
            made.append(codes.tolist())
            return codes

        timers = {
            "text_s": wire.SpanTimer(eng.text.segments),
            "voice": wire.SpanTimer(model.voice),
            "search_s": wire.SpanTimer(searched),
            "latent_s": wire.SpanTimer(model.lm.latent),
            "vocoder_s": wire.SpanTimer(vocoder),
        }
        patched = _Patched()
        patched.set(eng.text, "segments", timers["text_s"])
        patched.set(model, "voice", timers["voice"])
        patched.set(model.lm, "latent", timers["latent_s"])
        patched.set(model.vocoder, "decode", timers["vocoder_s"])
        patched.set(model_module, "search", timers["search_s"])
        try:
            prepare_s, total_s, out = self._request(cmd)
        finally:
            patched.restore()
        parts = {key: timers[key].total() for key in ("text_s", "search_s", "latent_s", "vocoder_s")}
        parts["reference_s"] = prepare_s + timers["voice"].total()
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        assert len(out.samples) == len(wave)  # the request's audio is the vocoder's, at 16-bit scale
        return cases.result(wire, total_s, wave, parts, sum(len(c) for c in made), len(made), cases.codes_sha1(made), threads=torch.get_num_threads())

    def case2(self, cmd: dict) -> dict:
        eng = self.engine
        model = eng.model
        wire = self.wire
        waves: list[torch.Tensor] = []
        made: list[list[int]] = []
        vocoder_forward = model.vocoder.forward

        def vocoder(*args, **kwargs):
            wav = vocoder_forward(*args, **kwargs)
            waves.append(wav.detach().clone())
            return wav

        search = model2_module.search

        def searched(*args, **kwargs):
            codes = search(*args, **kwargs)
            made.append(codes.tolist())
            return codes

        span = wire.SpanTimer
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
        own = {"search": searched, "vocoder": vocoder}
        spans = {name: span(own.get(name) or getattr(owner, attr)) for name, (owner, attr, _) in timers.items()}
        patched = _Patched()
        for name, (owner, attr, _) in timers.items():
            patched.set(owner, attr, spans[name])
        try:
            prepare_s, total_s, out = self._request(cmd)
        finally:
            patched.restore()
        parts = dict.fromkeys(cases.PARTS_2 + cases.REFERENCE_PARTS_2, 0.0)
        for name, (_, _, part) in timers.items():
            parts[part] += spans[name].total()
        parts["reference_s"] += prepare_s
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        assert len(out.samples) == len(wave)  # one segment: the request's audio is the vocoder's, at 16-bit scale
        made_codes = sum(len(c) for c in made)
        return cases.result(wire, total_s, wave, parts, made_codes, len(made), cases.codes_sha1(made), variant="IndexTTS-2", threads=torch.get_num_threads())

    def case25(self, cmd: dict) -> dict:
        eng = self.engine
        model = eng.model
        wire = self.wire
        waves: list[torch.Tensor] = []
        made: list[list[int]] = []
        vocoder_forward = model.vocoder.forward

        def vocoder(*args, **kwargs):
            wav = vocoder_forward(*args, **kwargs)
            waves.append(wav.detach().clone())
            return wav

        search = model25_module.search

        def searched(*args, **kwargs):
            codes = search(*args, **kwargs)
            made.append(codes.tolist())
            return codes

        span = wire.SpanTimer
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

        own = {"search": searched, "vocoder": vocoder, "speaker": speaker}
        spans = {name: span(own.get(name) or getattr(owner, attr)) for name, (owner, attr, _) in timers.items()}
        spans["regulator"].shape = lambda *a, **k: not reading[0]  # the targets' calls
        patched = _Patched()
        for name, (owner, attr, _) in timers.items():
            patched.set(owner, attr, spans[name])
        try:
            prepare_s, total_s, out = self._request(cmd, cases.language(cmd))
        finally:
            patched.restore()
        parts = dict.fromkeys(cases.PARTS_25 + cases.REFERENCE_PARTS_25, 0.0)
        for name, (_, _, part) in timers.items():
            parts[part] += spans[name].total((lambda target: target) if name == "regulator" else (lambda shape: True))
        parts["reference_s"] += prepare_s
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        gaps = (len(waves) - 1) * int(22050 * eng.defaults["interval_silence"] / 1000.0)  # the tiny GPT's few text positions cut the text in two
        assert len(out.samples) == len(wave) + gaps  # the request's audio is the vocoder's, at 16-bit scale, with the silences between
        made_codes = sum(len(c) for c in made)
        return cases.result(wire, total_s, wave, parts, made_codes, len(made), cases.codes_sha1(made), variant="IndexTTS-2.5", threads=torch.get_num_threads())
