"""The koe side of Qwen3-TTS's benchmark: loads one model and runs cases on command (`koe.bench.wire`).

Run by `python -m koe.bench.koe_worker qwen3_tts`; the parent (`koe.bench.runner`) drives it. End
of speech is disabled by making the end id one the talker can never draw (a suppressed id), so every
run decodes exactly `frames` frames — upstream's worker does the same with its `eos_token_id`.
"""

from __future__ import annotations

import hashlib
import time
from dataclasses import replace

import torch

from koe.engines.benchmark import KoeWorker as Base
from koe.engines.qwen3_tts.bench import cases


class KoeWorker(Base):
    """Qwen3-TTS through koe's engine, on `cases.CASES`."""

    def _voice(self, case: str):
        clip = self.wire.reference_clip()
        return self.engine.prepare_voice(clip, ref_text=None if case == "clone_xvector" else self.wire.REF_TEXT, x_vector_only=case == "clone_xvector")

    def case(self, cmd: dict) -> dict:
        return self._run(cmd["case"], int(cmd["frames"]), int(cmd.get("seed", 0)))

    @torch.inference_mode()
    def _run(self, case: str, frames: int, seed: int) -> dict:
        from koe.engines.qwen3_tts import generate as core

        eng = self.engine
        batch = cases.CASES[case][1]
        result: dict = {"case": case, "batch": batch}
        voice = None
        if case.startswith("clone"):
            t = time.perf_counter()
            voice = self._voice(case)
            result["prompt_s"] = time.perf_counter() - t
        if case == "streaming":
            return {**result, **self._stream(frames, seed)}
        texts = cases.BATCH_TEXTS[:batch]
        speaker = cases.SPEAKER if eng.cfg.model_type == "custom_voice" else None
        instruct = cases.INSTRUCT if eng.cfg.model_type == "voice_design" else None
        items = eng.prompt_items(texts, [cases.LANGUAGE] * batch, [speaker] * batch, [instruct] * batch, [voice] * batch)
        settings = eng.decode_settings(max_new_tokens=frames + 1)
        settings = replace(settings, eos_id=settings.suppress_ids[-1])  # never drawn: no end of speech
        generator = torch.Generator().manual_seed(seed)
        phases = cases.Phases()
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
        decoded_s = batch * (made + ref_frames) / cases.FRAME_RATE
        result.update(phases.result(decode_end, made))
        result.update(
            {
                "frames": made,
                "codec_s": codec_s,
                "codec_s_per_audio_s": codec_s / max(decoded_s, 1e-9),
                "audio_samples": int(sum(len(w) for w in wavs)),
                "frames_per_s": batch * made / (decode_end - phases.decode_start),
                "codes_sha1": hashlib.sha1(torch.stack([c.cpu() for c in codes]).numpy().tobytes()).hexdigest(),
                "peak_rss": self.wire.peak_rss(),
            }
        )
        return result

    def _stream(self, frames: int, seed: int) -> dict:
        """The stream as a listener gets it, and where the time to its first audio goes: up to the
        talker's prefill (text and prompt), the prefill, the frames of the first chunk, its codec."""
        from koe.engines.base import SynthesisRequest
        from koe.engines.qwen3_tts import generate as core
        from koe.engines.qwen3_tts.limits import MAX_SEGMENT_CHARS, SEGMENT_PAUSE_S
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
            chunks = eng.synthesize(
                SynthesisRequest(
                    cases.TEXT,
                    cases.LANGUAGE,
                    cases.SPEAKER,
                    seed=seed,
                    first_chunk_s=4 / cases.FRAME_RATE,  # the native stream's chunks: 4 frames, then 12
                    chunk_s=12 / cases.FRAME_RATE,
                    options={"max_new_tokens": frames + 1},
                    max_segment_chars=MAX_SEGMENT_CHARS,
                    pause_s=SEGMENT_PAUSE_S,
                    max_segment_s=frames / cases.FRAME_RATE,
                )
            )
            result = self.wire.timed_stream(chunks, started, cases.SAMPLE_RATE)
        finally:
            core.prefill, CodecStream.drain = prefill, drain
        if len(marks) == 4:
            result.update(
                {
                    "ttfa_before_prefill_s": marks["prefill_start"] - started,
                    "ttfa_prefill_s": marks["prefill_end"] - marks["prefill_start"],
                    "ttfa_frames_s": marks["codec_start"] - marks["prefill_end"],
                    "ttfa_codec_s": marks["codec_end"] - marks["codec_start"],
                }
            )
        return {**result, "peak_rss": self.wire.peak_rss()}
