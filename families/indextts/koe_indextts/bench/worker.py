"""The koe side of IndexTTS's benchmark (`koe.bench.wire`'s protocol). Run by `python -m koe.bench.koe_worker indextts`.

It drives the registered engine through koe's engine contract (`load_engine`, `prepare_voice` with
the clip, `synthesize` with `seed` and `max_mel_tokens`), as a user's request runs: one upstream
`infer` call. Parts are timed by wrapping the engine's own objects for the one request: the text's
segments (`TextTokenizer.segments`), the voice (`prepare_voice`: the clip decoded and its log-mel;
`IndexTTS15.voice`: the conditioning latents and the speaker embedding), the code search (the
`search` that `IndexTTS15.segment` calls), the latent pass (`SpeechLM.latent`) and the vocoder
(`BigVGAN.decode`, whose float output the hashes read).
"""

from __future__ import annotations

import time

import torch

from koe.engines.base import SynthesisRequest, VoiceReference, collect
from koe.engines.benchmark import KoeWorker as Base
from koe_indextts import model as model_module
from koe_indextts.bench import cases


class KoeWorker(Base):
    """IndexTTS 1.5 through koe's engine contract (float32, the CPU: `Base.load`)."""

    def case(self, cmd: dict) -> dict:
        text, reference, codes_cap, seed = cases.request(cmd)
        eng = self.engine
        model = eng.model
        wire = self.wire
        segments = wire.SpanTimer(eng.text.segments)
        voice = wire.SpanTimer(model.voice)
        latent = wire.SpanTimer(model.lm.latent)
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

        timed_search, timed_vocoder = wire.SpanTimer(searched), wire.SpanTimer(vocoder)
        eng.text.segments, model.voice, model.lm.latent, model.vocoder.decode = segments, voice, latent, timed_vocoder
        model_module.search = timed_search
        try:
            t = time.perf_counter()
            prepared = eng.prepare_voice(VoiceReference(reference))
            prepare_s = time.perf_counter() - t
            out = collect(eng.synthesize(SynthesisRequest(text, voice=prepared, seed=seed, options={"max_mel_tokens": codes_cap})))
            total_s = time.perf_counter() - t
        finally:
            del eng.text.segments, model.voice, model.lm.latent, model.vocoder.decode
            model_module.search = search
        parts = {
            "text_s": segments.total(),
            "reference_s": prepare_s + voice.total(),
            "search_s": timed_search.total(),
            "latent_s": latent.total(),
            "vocoder_s": timed_vocoder.total(),
        }
        wave = torch.cat([w.reshape(-1) for w in waves]).numpy()
        assert len(out.samples) == len(wave)  # the request's audio is the vocoder's, at 16-bit scale
        return cases.result(wire, total_s, wave, parts, sum(len(c) for c in made), len(made), cases.codes_sha1(made), threads=torch.get_num_threads())
