"""The koe side of the benchmark: loads one model and runs cases on command (see `wire`).

Run as `python -m koe.bench.koe_worker` (Qwen3-TTS) or `python -m koe.bench.koe_worker f5_tts`
(F5-TTS); the parent (`koe.bench.runner`) drives it. Qwen3-TTS: end of speech is disabled by
making the end id one the talker can never draw (a suppressed id), so every run decodes exactly
`frames` frames — upstream's worker does the same with its `eos_token_id`. F5-TTS: the public API
(`koe.load`, `prepare_voice`, `generate(seed=N, nfe_step=...)`); the split text / DiT / vocoder
comes from the result's `metadata["timings"]`, the DiT step count and time from a wrapper around
the DiT's `forward`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

import numpy as np
import torch

from koe.bench import wire


class KoeWorker:
    def __init__(self) -> None:
        self.engine = None
        self.voices: dict = {}

    def load(self, cmd: dict) -> dict:
        from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        self.engine = Qwen3TTSEngine.load(cmd["model"], device="cpu", precision=cmd.get("precision") or "fp32")
        load_s = time.perf_counter() - started
        return {"load_s": load_s, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": self.engine.precision, "kernel": self.engine.kernel}

    def _voice(self, case: str):
        clip = wire.reference_clip()
        return self.engine.prepare_voice(clip, ref_text=None if case == "clone_xvector" else wire.REF_TEXT, x_vector_only=case == "clone_xvector")

    def run(self, cmd: dict) -> dict:
        case, frames, seed = cmd["case"], int(cmd["frames"]), int(cmd.get("seed", 0))
        return wire.profiled(cmd.get("profile"), lambda: self._run(case, frames, seed))

    @torch.inference_mode()
    def _run(self, case: str, frames: int, seed: int) -> dict:
        from koe.engines.qwen3_tts import generate as core

        eng = self.engine
        batch = wire.CASES[case][1]
        result: dict = {"case": case, "batch": batch}
        voice = None
        if case.startswith("clone"):
            t = time.perf_counter()
            voice = self._voice(case)
            result["prompt_s"] = time.perf_counter() - t
        if case == "streaming":
            return {**result, **self._stream(frames, seed)}
        texts = wire.BATCH_TEXTS[:batch]
        speaker = wire.SPEAKER if eng.cfg.model_type == "custom_voice" else None
        instruct = wire.INSTRUCT if eng.cfg.model_type == "voice_design" else None
        items = eng.prompt_items(texts, [wire.LANGUAGE] * batch, [speaker] * batch, [instruct] * batch, [voice] * batch)
        settings = eng.decode_settings(max_new_tokens=frames + 1)
        settings = replace(settings, eos_id=settings.suppress_ids[-1])  # never drawn: no end of speech
        generator = torch.Generator().manual_seed(seed)
        phases = wire.Phases()
        talker = eng.network.talker
        forward, predict = talker.forward_hidden, core.predict_codebooks

        def forward_hidden(*args, **kwargs):
            out = forward(*args, **kwargs)
            phases.mark_talker_forward()
            return out

        talker.forward_hidden, core.predict_codebooks = forward_hidden, phases.timed(predict)
        try:
            phases.decode_start = time.perf_counter()
            codes = eng.generate_codes(items, settings, non_streaming_mode=eng.default_non_streaming(), generator=generator)
            decode_end = time.perf_counter()
        finally:
            del talker.forward_hidden
            core.predict_codebooks = predict
        made = int(codes[0].shape[0])
        t = time.perf_counter()
        wavs = eng.decode_waveforms(codes, items)
        codec_s = time.perf_counter() - t
        ref_frames = 0 if voice is None or voice.ref_code is None else int(voice.ref_code.shape[0])
        decoded_s = batch * (made + ref_frames) / wire.FRAME_RATE
        result.update(phases.result(decode_end, made))
        result.update({
            "frames": made, "codec_s": codec_s, "codec_s_per_audio_s": codec_s / max(decoded_s, 1e-9),
            "audio_samples": int(sum(len(w) for w in wavs)), "frames_per_s": batch * made / (decode_end - phases.decode_start),
            "codes_sha1": hashlib.sha1(torch.stack([c.cpu() for c in codes]).numpy().tobytes()).hexdigest(),
            "peak_rss": wire.peak_rss(),
        })  # fmt: skip
        return result

    def _stream(self, frames: int, seed: int) -> dict:
        """The stream as a listener gets it, and where the time to its first audio goes: up to the
        talker's prefill (text and prompt), the prefill, the frames of the first chunk, its codec."""
        from koe.engines.qwen3_tts import generate as core
        from koe.engines.qwen3_tts.streaming import CodecStream

        eng = self.engine
        marks: dict[str, float] = {}
        prefill, drain = core.prefill, CodecStream.drain

        def timed_prefill(*args, **kwargs):
            marks.setdefault("prefill_start", time.perf_counter())
            out = prefill(*args, **kwargs)
            marks.setdefault("prefill_end", time.perf_counter())
            return out

        def timed_drain(stream):
            marks.setdefault("codec_start", time.perf_counter())
            out = drain(stream)
            marks.setdefault("codec_end", time.perf_counter())
            return out

        core.prefill, CodecStream.drain = timed_prefill, timed_drain
        try:
            started = time.perf_counter()
            chunks = eng.stream(wire.TEXT, language=wire.LANGUAGE, speaker=wire.SPEAKER, seed=seed, max_frames=frames, max_new_tokens=frames + 1)
            result = wire.timed_stream(chunks, started)
        finally:
            core.prefill, CodecStream.drain = prefill, drain
        if len(marks) == 4:
            result.update({
                "ttfa_before_prefill_s": marks["prefill_start"] - started, "ttfa_prefill_s": marks["prefill_end"] - marks["prefill_start"],
                "ttfa_frames_s": marks["codec_start"] - marks["prefill_end"], "ttfa_codec_s": marks["codec_end"] - marks["codec_start"],
            })  # fmt: skip
        return {**result, "peak_rss": wire.peak_rss()}


class F5KoeWorker:
    """F5-TTS through koe's public API, on the reference WAV and texts of `wire.F5_CASES`."""

    def __init__(self) -> None:
        self.engine = None

    def load(self, cmd: dict) -> dict:
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        import koe
        from koe.engines.f5_tts import engine as _  # noqa: F401  (imports apart from the load)

        imported = time.perf_counter()
        self.engine = koe.load(cmd["model"], device="cpu")
        load_s = time.perf_counter() - imported
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": self.engine.precision}

    def run(self, cmd: dict) -> dict:
        return wire.run_f5_case(cmd, self._run)

    def _run(self, reference: str, text: str, nfe: int, seed: int) -> dict:
        eng = self.engine
        dit = eng.model.transformer
        steps = wire.CallTimer(dit.forward, shape=lambda x, *args, **kwargs: int(x.shape[1]))
        dit.forward = steps
        try:
            t = time.perf_counter()
            voice = eng.prepare_voice(reference, ref_text=wire.REF_TEXT)
            prompt_s = time.perf_counter() - t
            faults = wire.minor_faults()
            t = time.perf_counter()
            result = eng.generate(text, voice=voice, seed=seed, nfe_step=nfe)
            total_s = time.perf_counter() - t
            faults = wire.minor_faults() - faults
        finally:
            del dit.forward
        timings = result.metadata["timings"]
        return wire.f5_result(total_s, prompt_s, result.audio, timings["text_s"], timings["dit_s"], timings["vocoder_s"], steps,
                              nfe=nfe, batches=result.metadata["segments"][0]["batches"], threads=torch.get_num_threads(),
                              minor_faults=faults)  # fmt: skip


class VoxKoeWorker:
    """VoxCPM through koe's engine (`VoxCPMEngine.load`, `make_voice`, and the engine's own one-shot and
    streaming paths, `generate.one_shot` / `generate.stream`, which `speak_segment` runs), with
    min_len = max_len = `patches` and no retries; parts timed by wrapping the model's methods."""

    def __init__(self) -> None:
        self.engine = None

    def load(self, cmd: dict) -> dict:
        wire.set_threads(cmd["threads"])
        started = time.perf_counter()
        from koe.engines.voxcpm.engine import VoxCPMEngine

        imported = time.perf_counter()
        self.engine = VoxCPMEngine.load(cmd["model"], device="cpu", precision=cmd.get("precision") or "fp32")
        load_s = time.perf_counter() - imported
        return {"load_s": load_s, "import_s": imported - started, "peak_rss": wire.peak_rss(), "rss": wire.current_rss(), "precision": self.engine.precision}

    def run(self, cmd: dict) -> dict:
        return wire.run_vox_case(cmd, self._run)

    def _run(self, mode: str, text: str, reference: str, patches: int, timesteps: int, seed: int) -> dict:
        from koe.engines.voxcpm import generate as core, model as model_mod

        eng = self.engine
        m, vae = eng.model, eng.vae
        settings = eng.settings({"min_len": patches, "max_len": patches, "retry_badcase": False, "inference_timesteps": timesteps})
        one_token = lambda x, *a, **k: int(x.shape[1])  # noqa: E731  (the LocEnc's patches per call: 1 in the loop)
        timers = {"prefill": wire.SpanTimer(m.prefill), "base": wire.SpanTimer(m.base_lm.step), "residual": wire.SpanTimer(m.residual_lm.step),
                  "locenc": wire.SpanTimer(m.feat_encoder.forward, one_token), "vae": wire.SpanTimer(vae.decode)}  # fmt: skip
        dit = wire.SpanTimer(model_mod.sample_patch)
        stream_decoder = vae.stream_decoder

        def timed_stream_decoder(*args, **kwargs):
            dec = stream_decoder(*args, **kwargs)
            dec.decode = wire.SpanTimer(dec.decode)
            timers.setdefault("stream_dec", []).append(dec.decode)
            return dec

        m.prefill, m.base_lm.step, m.residual_lm.step, m.feat_encoder.forward = timers["prefill"], timers["base"], timers["residual"], timers["locenc"]
        vae.decode, vae.stream_decoder, model_mod.sample_patch = timers["vae"], timed_stream_decoder, dit
        first = None
        prompt_s = 0.0
        try:
            t = time.perf_counter()
            voice = None
            if mode == "clone":
                voice = eng.make_voice(reference, wire.VOX_REF_TEXT)
                eng.features(voice)  # the prompt's VAE encode (upstream's build_prompt_cache), inside the request on both sides
                prompt_s = time.perf_counter() - t
            seq = eng.sequence(text, voice)
            generator = torch.Generator(device=eng.device).manual_seed(seed)
            if mode == "stream":
                chunks = []
                for c in core.stream(m, vae, seq, settings, generator=generator):
                    if first is None and len(c):
                        first = time.perf_counter() - t
                    chunks.append(c)
                samples = np.concatenate(chunks) if chunks else np.zeros(0, np.float32)
                made = len(chunks)
            else:
                out = core.one_shot(m, vae, seq, settings, generator=generator)
                samples, made = out.samples, out.patches
            total_s = time.perf_counter() - t
        finally:
            del m.prefill, m.base_lm.step, m.residual_lm.step, m.feat_encoder.forward, vae.decode, vae.stream_decoder
            model_mod.sample_patch = dit.fn
        vae_s = timers["vae"].total() + sum(d.total() for d in timers.get("stream_dec", []))
        return wire.vox_result(total_s, samples, eng.sample_rate, made, timers["prefill"].total(),
                               timers["base"].total(), timers["residual"].total(), dit.total(), timers["locenc"].total(lambda n: n == 1), vae_s,
                               prompt_s=prompt_s, first_chunk_s=first, mode=mode, seq_len=int(seq.length), threads=torch.get_num_threads(),
                               dit_calls=dit.count(), base_calls=timers["base"].count())  # fmt: skip


def main(argv: list[str] | None = None) -> None:
    import sys

    from koe.runtime.process import keep_freed_memory

    keep_freed_memory()  # as every koe command does (koe.cli.main)
    family = (argv if argv is not None else sys.argv[1:])[:1] or ["qwen3_tts"]
    worker = {"f5_tts": F5KoeWorker, "voxcpm": VoxKoeWorker}.get(family[0], KoeWorker)()
    wire.serve({"load": worker.load, "run": worker.run})


if __name__ == "__main__":
    main()
