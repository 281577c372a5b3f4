"""The peer side of the benchmark: mizuoto 0.2.16 (GPL-3.0) in its own virtualenv and process.

Started by `koe.bench.runner` for `koe bench --compare mizuoto` with the peer's Python
(`KOE_PEER_MIZUOTO_PYTHON` or `.peer-mizuoto/bin/python`, made by `make peer-mizuoto`) as a script.
Because of mizuoto's licence koe never imports it: this file lives outside the `koe` package, runs
only in mizuoto's own virtualenv and process, and calls mizuoto's public classes; nothing of
mizuoto is copied here. It imports `koe/bench/wire.py` and `koe/engines/qwen3_tts/bench/cases.py` by path (`bench_side.py`; stdlib, numpy and torch only).

Driven as mizuoto's own host drives it (`mizuoto.core.inference.service.InferenceService` and
`mizuoto.core.inference.local.LocalEngine`, what its `TtsService` uses for a model on this machine),
with its default settings (a fresh settings folder, nothing set):

- the runtime is built first (`InferenceService.runtime`), which applies its CPU settings
  (`compute.cpu_allocator` and `compute.cpu_threads`, both "auto": glibc malloc thresholds,
  `THP_MEM_ALLOC_ENABLE`, `OMP_PLACES=cores`/`OMP_PROC_BIND=close`) before torch is imported;
  nothing here imports torch before that;
- the model loads through `LocalEngine.load` (its `LoadSpec`, dtype "auto" = float32 on the CPU,
  the model manager's registration); a request is a `SynthesisTask` (language code "en", the voice
  as a `VoiceSpec`, `params` seed and max_new_tokens) through `LocalHandle.synthesize`, which seeds
  the request's generator with the seed (the same stream as `torch.manual_seed(seed)`) and runs
  the engine under `torch.inference_mode()`; a clone first makes the voice prompt with
  `LocalHandle.prepare_voice` into a fresh cache folder (what the host does the first time it meets
  a voice), then speaks with that cache, as `TtsService` does; the reference is the benchmark's
  clip as a 16-bit PCM WAV (the host's canonical reference form; the clip's samples are on that
  grid, so all sides get the same samples);
- the batch case is one call with `texts` (what the host does for a batch of texts).

End of speech is disabled as upstream's worker does it: the talker stops on an id it can never draw
(the last of the suppressed ids) while the suppressed set stays the model's (the real end id can
still be drawn, as upstream's). The peer has no parameter for it, so its frame decoder
(`mizuoto.engines.qwen3tts.decode.FrameDecoder`, which the engine looks up at each request) is
replaced by a subclass that changes only that id, and also times the code predictor's loop. The
other phases are timed by wrapping the loaded engine's own methods (`_generate`: the decode, from
prompt embedding to the last frame; the talker's first `forward`: prefill; `codec.decode`: codec),
as upstream's worker wraps upstream's.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import os
import sys
import tempfile
import time
from pathlib import Path

from bench_side import family_cases, serve, wire  # stdlib at import: torch is imported by the peer's runtime, after its CPU settings

cases = family_cases("qwen3_tts")

ENGINE = "qwen3tts"
CPU_VARIABLES = ("GLIBC_TUNABLES", "THP_MEM_ALLOC_ENABLE", "OMP_PLACES", "OMP_PROC_BIND")
LANGUAGE = "en"  # the host's language code (the engine maps it to "english")


class MizuotoWorker:
    def __init__(self) -> None:
        self.home = Path(tempfile.mkdtemp(prefix="koe-bench-mizuoto-"))
        self.inference = None
        self.handle = None
        self.engine = None
        self.variant = None
        self.reference = None

    def load(self, cmd: dict) -> dict:
        torch_before = "torch" in sys.modules  # False: the CPU settings below reach torch and OpenMP
        started = time.perf_counter()
        from mizuoto.core.inference.service import InferenceService
        from mizuoto.core.settings import SettingsService

        # The host's settings, defaults only: a settings file of its own, no MIZUOTO_* variables.
        settings = SettingsService(data_dir=self.home / "data", config_dir=self.home / "config", environ={})
        self.inference = InferenceService(settings)
        self.inference.runtime  # noqa: B018  (builds the runtime: CPU settings applied, then torch imported)
        runtime_s = time.perf_counter() - started
        import torch

        wire.set_threads(cmd["threads"])
        from mizuoto.core.inference.local import LocalEngine
        from mizuoto.runtime.engine import get_engine

        folder = Path(cmd["model"])
        self.variant = get_engine(ENGINE).detect_variant(folder)
        dtype = {"fp32": "auto", "bf16": "bf16"}[cmd.get("precision") or "fp32"]  # "auto": float32 on the CPU, the host's default
        local = LocalEngine(ENGINE, "cpu", settings.cache_dir / "scratch" / ENGINE, {}, self.inference)
        t = time.perf_counter()
        self.handle = local.load(f"{ENGINE}/bench-{folder.name}", str(folder), self.variant, dtype, {})
        load_s = time.perf_counter() - t
        self.engine = local._loaded[self.handle.model_id].engine  # the loaded engine, for the timing wrappers
        _install_decoder()
        applied = {k: os.environ[k] for k in CPU_VARIABLES if k in os.environ}
        return {
            "load_s": load_s,
            "runtime_s": runtime_s,
            "peak_rss": wire.peak_rss(),
            "rss": wire.current_rss(),
            "precision": str(self.engine.dtype).removeprefix("torch."),
            "variant": self.variant,
            "cpu_settings": applied,
            "torch_before_settings": torch_before,
            "torch": torch.__version__,
            "threads": torch.get_num_threads(),
        }

    def run(self, cmd: dict) -> dict:
        case, frames, seed = cmd["case"], int(cmd["frames"]), int(cmd.get("seed", 0))
        return wire.run_case(cmd, lambda: self._run(case, frames, seed))

    def _voice(self, case: str):
        from mizuoto.core.inference.tasks import Reference, VoiceSpec

        if case.startswith("clone"):
            path = self._reference_wav()
            transcript = None if case == "clone_xvector" else wire.REF_TEXT
            sha = hashlib.sha256(path.read_bytes()).hexdigest()
            return VoiceSpec(
                references=[Reference(audio_path=str(path), transcript=transcript, language=LANGUAGE, sample_rate=24000, duration=3.0, sha256=sha)]
            )
        if case == "voice_design":
            return VoiceSpec(description=cases.INSTRUCT)
        return VoiceSpec(preset=cases.SPEAKER)

    def _reference_wav(self) -> Path:
        """The clip as 16-bit PCM, written once; checked to read back as exactly the clip's samples."""
        if self.reference is None:
            import wave

            import numpy as np

            path = wire.write_reference_wav(self.home / "reference.wav")
            with wave.open(str(path), "rb") as w:
                back = np.frombuffer(w.readframes(w.getnframes()), dtype="<i2").astype(np.float32) / np.float32(32768.0)
            if not np.array_equal(back, wire.reference_clip()[0]):
                raise RuntimeError("the reference clip does not survive 16-bit PCM: the sides would get different samples")
            self.reference = path
        return self.reference

    def _run(self, case: str, frames: int, seed: int) -> dict:
        from mizuoto.core.inference.tasks import SynthesisTask

        batch = cases.CASES[case][1]
        result: dict = {"case": case, "batch": batch, "variant": self.variant}
        voice = self._voice(case)
        if voice.references:
            t = time.perf_counter()
            folder = Path(tempfile.mkdtemp(prefix="voice-", dir=self.home))  # a voice the host meets for the first time
            cache = self.handle.prepare_voice(voice, folder)
            voice.cache = dict(cache.files) if cache is not None else None
            result["prompt_s"] = time.perf_counter() - t
        texts = cases.BATCH_TEXTS[:batch]
        params = {"seed": seed, "max_new_tokens": frames + 1}
        stream = case == "streaming"
        task = SynthesisTask(text=texts[0], texts=texts if batch > 1 else None, language=LANGUAGE, voice=voice, params=params, stream=stream)
        if stream:
            return {**result, **self._stream(task)}
        eng = self.engine
        phases = cases.Phases()
        marks: dict = {"codec_s": 0.0}
        generate, forward, decode = eng._generate, eng.talker.forward, eng.codec.decode

        @functools.wraps(generate)
        def timed_generate(*args, **kwargs):
            phases.decode_start = time.perf_counter()
            out = generate(*args, **kwargs)
            marks["decode_end"] = time.perf_counter()
            marks["codes"] = out
            return out

        @functools.wraps(forward)
        def timed_forward(*args, **kwargs):
            out = forward(*args, **kwargs)
            phases.mark_talker_forward()
            return out

        @functools.wraps(decode)
        def timed_decode(*args, **kwargs):
            t = time.perf_counter()
            out = decode(*args, **kwargs)
            marks["codec_s"] += time.perf_counter() - t
            return out

        eng._generate, eng.talker.forward, eng.codec.decode = timed_generate, timed_forward, timed_decode
        _Decoder.phases, _Decoder.made = phases, 0
        samples = 0
        try:
            for chunk in self.handle.synthesize(task):
                samples += len(chunk.samples)
        finally:
            del eng._generate, eng.talker.forward, eng.codec.decode
            _Decoder.phases = None
        if not _Decoder.made:
            raise RuntimeError("the peer did not decode with mizuoto.engines.qwen3tts.decode.FrameDecoder: end of speech was not disabled")
        import torch

        codes = marks["codes"]
        made = int(codes[0].shape[0])
        ref = (voice.cache or {}).get("prompt")
        ref_frames = 0
        if ref and case == "clone_icl":
            ref_frames = int(torch.load(ref, map_location="cpu", weights_only=True)[0]["ref_code"].shape[0])
        decoded_s = batch * (made + ref_frames) / cases.FRAME_RATE
        result.update(phases.result(marks["decode_end"], made))
        result.update(
            {
                "frames": made,
                "codec_s": marks["codec_s"],
                "codec_s_per_audio_s": marks["codec_s"] / max(decoded_s, 1e-9),
                "audio_samples": samples,
                "frames_per_s": batch * made / (marks["decode_end"] - phases.decode_start),
                "codes_sha1": hashlib.sha1(torch.stack([c.cpu() for c in codes]).numpy().tobytes()).hexdigest(),
                "peak_rss": wire.peak_rss(),
            }
        )
        return result

    def _stream(self, task) -> dict:
        """The host's streamed request (`task.stream`): the time to the first non-empty chunk it hands on."""
        started = time.perf_counter()
        _Decoder.made = 0
        result = wire.timed_stream(self.handle.synthesize(task), started, cases.SAMPLE_RATE)
        if not _Decoder.made:
            raise RuntimeError("the peer's stream did not decode with its FrameDecoder: end of speech was not disabled")
        return {**result, "peak_rss": wire.peak_rss()}


class _Decoder:
    """The running request's timing (set around each call) and how many frame decoders it made."""

    phases: cases.Phases | None = None
    made = 0


def _install_decoder() -> None:
    """Replace the peer's frame decoder class by a subclass that never ends speech and times the code predictor."""
    from mizuoto.engines.qwen3tts import decode

    base = decode.FrameDecoder
    if getattr(base, "koe_bench", False):
        return

    class NoEndOfSpeech(base):
        koe_bench = True

        def __init__(self, talker, c, batch, talker_sampling, sub_sampling, *rest) -> None:
            never = max(talker_sampling.suppress_tokens)  # suppressed, so never drawn: upstream's worker stops on it too
            talker_sampling = dataclasses.replace(talker_sampling, eos_token_id=never, _masks={})
            super().__init__(talker, c, batch, talker_sampling, sub_sampling, *rest)
            self.eos = never
            _Decoder.made += 1

        def _codes(self, *args, **kwargs):
            t = time.perf_counter()
            try:
                return super()._codes(*args, **kwargs)
            finally:
                if _Decoder.phases is not None:
                    _Decoder.phases.predictor_s += time.perf_counter() - t

    decode.FrameDecoder = NoEndOfSpeech


if __name__ == "__main__":
    worker = MizuotoWorker()
    try:
        serve(worker)
    finally:
        import shutil

        shutil.rmtree(worker.home, ignore_errors=True)
