"""The synthesizer: what the CLI and the server call to turn requests into encoded speech.

Torch-free at import: engines are reached through the model cache, which loads them lazily with
`koe.load`. One request flows: `plan` (validate against settings, model files, voice library) ->
model cache (load or reuse the engine, one call at a time per engine) -> voice prompt (library
voices are prepared once per model and kept; an emotion reference the same way) ->
`engine.synthesize(SynthesisRequest)` (the
engine contract, `koe.engines.base`) -> encoder (format, speed) -> history row in koe.db (and a
file under outputs/ when asked).

Faults: a model that fails to load is the cache's `ModelFailed` (503). The history is best effort:
a row that cannot be written is logged and becomes a warning on the output, the audio is still
returned. A file the request asked to keep must be written: on a full disk that is
`InsufficientStorage` (507), and nothing is left half-written (the write is atomic). A prepared
voice prompt that cannot be kept on disk is used anyway (and prepared again next time).
"""

from __future__ import annotations

import contextlib
import logging
import sqlite3
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any

import numpy as np

from koe.audio.errors import AudioError
from koe.engines.base import AudioChunk, Cancelled, CancelToken, ConversionRequest, RequestError, SynthesisRequest, VoiceReference, collect
from koe.engines.engine import in_turn
from koe.service.errors import AlreadyExists, InvalidRequest, KoeError, RequestCancelled, StorageError, disk_full_error, is_disk_full
from koe.service.home import KoeHome
from koe.service.names import check_name
from koe.service.store.models import ModelRef
from koe.service.synthesis.cache import LoadedModel, ModelCache
from koe.service.synthesis.encode import StreamEncoder, encode_audio
from koe.service.synthesis.plan import Planner, SpeechPlan
from koe.service.synthesis.requests import ConvertRequest, SpeechOutput, SpeechRequest, StreamChunk
from koe.service.voices.library import Voice

log = logging.getLogger(__name__)

DESIGN_SAMPLE_TEXT = "Hello! This is the voice I was given. I can read a story, explain an idea, or answer a question, clearly and at an easy pace."


class Synthesizer:
    """Speak requests with the models in a KOE_HOME. Thread-safe; share one per process.

    `loader(ref) -> engine` defaults to `koe.load` with the settings' device, dtype and precision.
    `max_input_chars` caps request text (the server passes `settings.server.max_input_chars`).
    """

    def __init__(
        self,
        home: KoeHome,
        *,
        loader: Callable[[ModelRef], Any] | None = None,
        max_input_chars: int | None = None,
        record_history: bool = True,
        allow_model_paths: bool = True,
    ) -> None:
        self.home = home
        self.settings = home.settings
        m = self.settings.models
        self.cache = ModelCache(loader or self._load_engine, resident_limit=m.resident_limit, idle_unload_seconds=m.idle_unload_seconds)
        self.planner = Planner(
            self.settings,
            home.models,
            home.voices,
            max_input_chars=max_input_chars,
            on_model_failed=self.cache.remember_failure,
            allow_model_paths=allow_model_paths,
        )  # a model whose configs cannot be read is listed with the failed loads
        self.record_history = record_history

    # -- public API -----------------------------------------------------------------------------
    def plan(self, request: SpeechRequest) -> SpeechPlan:
        """Validate a request without loading anything (raises a `KoeError` for every bad input)."""
        return self.planner.plan(request)

    def plan_conversion(self, request: ConvertRequest) -> SpeechPlan:
        """Validate a voice conversion without loading anything (a `KoeError` for every bad input)."""
        return self.planner.plan_conversion(request)

    def convert(self, request: ConvertRequest | SpeechPlan, cancel: CancelToken | None = None) -> SpeechOutput:
        """Say the source speech again in the request's voice, as a complete encoded file (recorded in
        history; saved when asked). A conversion plan also goes through `speak` and `stream` (and so
        through the server's scheduler): the plan's `source` says what to do."""
        return self.speak(request if isinstance(request, SpeechPlan) else self.plan_conversion(request), cancel)

    def speak(
        self,
        request: SpeechRequest | SpeechPlan,
        cancel: CancelToken | None = None,
        on_progress: Callable[[float], None] | None = None,
    ) -> SpeechOutput:
        """Synthesize one request to a complete encoded file (recorded in history; saved when asked).

        Setting `cancel` from another thread stops generation within a step (`RequestCancelled`).
        With `on_progress`, the audio is made as a stream (for Qwen3-TTS: same codes; samples equal
        up to float32 rounding) and `on_progress(seconds_of_audio_so_far)` is called per chunk.
        """
        plan = request if isinstance(request, SpeechPlan) else self.plan(request)
        notes: list[str] = []
        with self.cache.use(plan.model) as entry, entry.lock:
            with engine_errors():
                job = self._synthesis_request(plan, entry, cancel, stream=on_progress is not None, notes=notes)
                samples, sample_rate, meta = _collect(_run(entry.engine, job), on_progress)
        return self._finish(plan, samples, sample_rate, meta, notes=notes)

    def speak_batch(self, requests: list[SpeechRequest | SpeechPlan], cancel: CancelToken | None = None) -> list[SpeechOutput]:
        """Synthesize requests that differ only in text (and speed/format) as one batched generation.

        The batch uses the first request's seed. Raises `InvalidRequest` if the requests do not share
        model, voice, language and options (see `SpeechPlan.batch_key`). Setting `cancel` stops the
        whole batch within a step (`RequestCancelled`). A model that cannot batch speaks them in turn.
        """
        plans = [r if isinstance(r, SpeechPlan) else self.plan(r) for r in requests]
        if not plans:
            return []
        if len({p.batch_key() for p in plans}) != 1:
            raise InvalidRequest("requests in a batch must differ only in their text, speed and format")
        if any(p.source is not None for p in plans):
            raise InvalidRequest("voice conversions are not batched: convert each on its own")
        first = plans[0]
        notes: list[str] = []
        with self.cache.use(first.model) as entry, entry.lock:
            engine = entry.engine
            with engine_errors():
                job = self._synthesis_request(first, entry, cancel, notes=notes)
                jobs = [replace(job, text=p.text) for p in plans]
                if first.batchable:  # the model's capabilities say it batches (`Capabilities.batch`)
                    results = [_collect(chunks) for chunks in engine.synthesize_batch(jobs)]
                else:
                    results = [_collect(engine.synthesize(j)) for j in jobs]
        outputs = []
        for p, (samples, sample_rate, meta) in zip(plans, results, strict=True):
            outputs.append(self._finish(p, samples, sample_rate, dict(meta, batch_size=len(plans)), seed=first.seed, notes=notes))
        return outputs

    def stream(
        self,
        request: SpeechRequest | SpeechPlan,
        cancel: CancelToken | None = None,
        *,
        first_chunk_s: float | None = None,
        chunk_s: float | None = None,
    ) -> Iterator[StreamChunk]:
        """Validate now, then return an iterator of encoded chunks made as the audio is generated.

        The first chunk carries about `first_chunk_s` seconds of audio, the others about `chunk_s`
        (None: the model's defaults; steps are whole, e.g. 0.08 s codec frames). Concatenated, the
        chunks' `data` is one playable file/stream in the request's format; the last chunk has
        `final=True`. Cancelling `cancel` (or closing the iterator) stops generation within a step
        and raises `RequestCancelled` from the iterator (closing just ends it).
        """
        plan = request if isinstance(request, SpeechPlan) else self.plan(request)
        _check_chunk_size("first_chunk_s", first_chunk_s)
        _check_chunk_size("chunk_s", chunk_s)
        return self._stream(plan, cancel or CancelToken(), first_chunk_s, chunk_s)

    def stream_text(
        self,
        request: SpeechRequest | SpeechPlan,
        pieces: Iterable[str],
        cancel: CancelToken | None = None,
        *,
        first_chunk_s: float | None = None,
        chunk_s: float | None = None,
    ) -> Iterator[StreamChunk]:
        """`stream` for text that arrives in pieces (an LLM's output, a `TextFeed`): the request gives
        everything but the text (its own is not spoken), `pieces` the text, spoken as it comes
        (`Engine.synthesize_text`: each sentence once it is complete, or the family's own streamed
        text decoding). The final chunk comes once the pieces have ended; the history records the
        whole text they held. Waiting for a piece holds the model, as a generation does."""
        plan = request if isinstance(request, SpeechPlan) else self.plan(request)
        if plan.source is not None:
            raise InvalidRequest("a voice conversion takes speech, not text: use stream")
        _check_chunk_size("first_chunk_s", first_chunk_s)
        _check_chunk_size("chunk_s", chunk_s)
        return self._stream(plan, cancel or CancelToken(), first_chunk_s, chunk_s, pieces=pieces)

    def design_voice(
        self,
        name: str,
        description: str,
        *,
        model: str | None = None,
        text: str | None = None,
        language: str | None = None,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> Voice:
        """Speak `text` with a model that designs voices, in the voice `description` describes, and
        keep the result as library voice `name` (its clone reference, with `text` as the transcript).

        The two halves are `design_request` and `keep_design`: the server speaks the request on its
        scheduler's threads (queue limits, cancellation) in between."""
        request = self.design_request(name, description, model=model, text=text, language=language, seed=seed, options=options, overwrite=overwrite)
        return self.keep_design(name, request, self.speak(request), overwrite=overwrite)

    def design_request(
        self,
        name: str,
        description: str,
        *,
        model: str | None = None,
        text: str | None = None,
        language: str | None = None,
        seed: int | None = None,
        options: dict[str, Any] | None = None,
        overwrite: bool = False,
    ) -> SpeechRequest:
        """The request that speaks a designed voice's sample (`text`, default DESIGN_SAMPLE_TEXT), after
        every check the library would make when keeping it (name, taken name, texts), so nothing is
        spoken that `keep_design` would then refuse."""
        check_name(name, "voice")
        if not overwrite and self.home.voices.exists(name):
            raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite")
        if not description or not description.strip():
            raise InvalidRequest("the voice description is empty: describe the voice (age, gender, tone, pace, ...)", param="description")
        self.home.voices.check_fields(text, description, language)  # what the library would refuse, before any audio is made
        return SpeechRequest(
            text=text or DESIGN_SAMPLE_TEXT,
            model=model,
            design=description,
            language=language,
            seed=seed,
            options=dict(options or {}),
            format="wav",
            save=False,
        )

    def keep_design(self, name: str, request: SpeechRequest, out: SpeechOutput, *, overwrite: bool = False) -> Voice:
        """Keep `out`, the spoken `design_request`, as library voice `name` (source "design"; the
        request's text is the transcript, its description the voice's)."""
        lang = out.metadata.get("language")
        with disk_full_as(f"cannot keep the designed voice {name!r}"):
            return self.home.voices.add(
                name,
                (out.samples, out.engine_sample_rate),
                request.text,
                description=(request.design or "").strip(),
                language=None if lang in (None, "auto") else lang,
                source="design",
                overwrite=overwrite,
            )

    def capabilities(self, model: str | None = None) -> dict[str, Any]:
        """What a loaded model can do (loads it): voice modes, speakers, languages, options, ..."""
        ref = self.planner.resolve_model(model)
        self.planner.check_precision(ref, self.planner.details(ref).capabilities)
        with self.cache.use(ref) as entry:
            return entry.engine.capabilities.to_dict()

    def close(self) -> None:
        """Unload every model and close this thread's database connection."""
        self.cache.clear()
        self.home.close()

    # -- engines --------------------------------------------------------------------------------
    def _load_engine(self, ref: ModelRef) -> Any:
        """The engine for `ref` with the settings' device, dtype and precision. Any failure is the
        cache's to report (`ModelFailed`, remembered until the files change)."""
        from koe.engines.registry import load_engine

        m = self.settings.models
        return load_engine(ref.path, device=m.device, dtype=m.dtype, precision=m.precision)

    def _synthesis_request(
        self,
        plan: SpeechPlan,
        entry: LoadedModel,
        cancel: CancelToken | None,
        *,
        stream: bool = False,
        first_chunk_s: float | None = None,
        chunk_s: float | None = None,
        notes: list[str] | None = None,
    ) -> SynthesisRequest | ConversionRequest:
        """The engine contract's request for a plan (preparing or loading its voice prompt; what the
        user should know about that, e.g. a prompt that could not be kept, is added to `notes`): a
        `ConversionRequest` for a conversion plan."""
        voice: Any = plan.speaker if plan.mode == "speaker" else None
        if plan.mode in ("clone_voice", "clone_clip"):
            voice = self._voice_prompt(plan, entry, notes if notes is not None else [])
        run = {
            "voice": voice,
            "seed": plan.seed,
            "cancel": cancel,
            "stream": stream,
            "first_chunk_s": first_chunk_s,
            "chunk_s": chunk_s,
            "options": dict(plan.options),
        }
        if plan.source is not None:
            return ConversionRequest(source=plan.source, **run)
        emotion = None
        if plan.emotion_name is not None or plan.emotion_audio is not None:
            emotion = self._prompt(plan, entry, plan.emotion_name, plan.emotion_audio, None, notes if notes is not None else [], what="emotion voice")
        return SynthesisRequest(text=plan.text, language=plan.language, instruct=plan.instruct, emotion=emotion, **run)

    def _voice_prompt(self, plan: SpeechPlan, entry: LoadedModel, notes: list[str]) -> Any:
        """The engine's prompt for the plan's voice: prepared from the clip, or the library's (prepared
        once per model and kept)."""
        clip = plan.ref_audio if plan.mode == "clone_clip" else None
        return self._prompt(plan, entry, None if clip is not None else plan.voice_name, clip, plan.ref_text, notes)

    def _prompt(self, plan: SpeechPlan, entry: LoadedModel, name: str | None, clip: Any, ref_text: str | None, notes: list[str], *, what: str = "voice") -> Any:
        """A prompt of the plan's model: prepared from `clip` (with `ref_text`), or library voice `name`'s
        (prepared once per model and kept). A prepared prompt that cannot be kept (a full disk: an
        `OSError`, or safetensors' own error) is used anyway; it is prepared again next time."""
        engine = entry.engine
        variant = engine.capabilities.prompt_options(plan.options)  # the request options that shape the prompt itself (declared)
        if clip is not None:
            return engine.prepare_voice(VoiceReference(clip, ref_text), **variant)
        prepared: list[Any] = []

        def prepare(v: Voice) -> Any:
            prepared.append(engine.prepare_voice(VoiceReference(str(v.reference_path), v.ref_text), **variant))
            return prepared[-1]

        try:
            return self.home.voices.prompt_for(name, plan.model.key, prepare=prepare, load=engine.load_voice, variant=variant)
        except Exception as e:
            if not prepared or isinstance(e, KoeError):
                raise
            why = "the disk is full" if is_disk_full(e) else type(e).__name__
            log.warning("the prepared prompt of voice %s could not be kept (%s); using it unsaved", name, e)
            notes.append(f"the prepared {what} could not be kept ({why}); it will be prepared again next time")
            return prepared[-1]

    # -- results --------------------------------------------------------------------------------
    def _finish(
        self,
        plan: SpeechPlan,
        samples: np.ndarray,
        sample_rate: int,
        meta: dict[str, Any],
        seed: int | None = None,
        notes: list[str] | None = None,
    ) -> SpeechOutput:
        encoded = encode_audio(samples, sample_rate, plan.format, speed=plan.speed)
        seed = plan.seed if seed is None else seed
        metadata = self._metadata(plan, meta, seed)
        output_id, path, kept = self._record(plan, encoded.duration, metadata, encoded.data)
        return SpeechOutput(
            audio=encoded.data,
            format=encoded.format,
            sample_rate=encoded.sample_rate,
            duration=encoded.duration,
            samples=np.asarray(samples, dtype=np.float32),
            engine_sample_rate=int(sample_rate),
            model=plan.model.name,
            voice=plan.voice_label,
            seed=seed,
            warnings=[*result_warnings(plan, meta), *(notes or []), *kept],
            metadata=metadata,
            output_id=output_id,
            path=path,
        )

    def _metadata(self, plan: SpeechPlan, meta: dict[str, Any], seed: int) -> dict[str, Any]:
        out = {
            **{k: v for k, v in meta.items() if k not in ("codes",)},
            "seed": seed,
            "mode": plan.mode,
            "language": plan.language,
            "speaker": plan.speaker,
            "instruct": plan.instruct,
            "voice": plan.voice_name,
            "speed": plan.speed,
            "format": plan.format.name,
            "options": plan.options,
            "model_name": plan.model.name,
            "model_key": plan.model.key,
        }
        if plan.emotion_name is not None:  # the emotion reference: a library voice ...
            out["emotion_voice"] = plan.emotion_name
        elif plan.emotion_audio is not None:  # ... or a clip (not kept: `koe history replay` asks for it again)
            out["emotion_clip"] = True
        if not plan.model.installed:  # a folder or a Hugging Face cache snapshot: `koe history replay` finds it again
            out["model_path"] = str(plan.model.path)
        if plan.source is not None:
            out["task"] = "convert"
            out["source_seconds"] = round(len(plan.source[0]) / plan.source[1], 3)
        return out

    def _record(self, plan: SpeechPlan, duration: float, metadata: dict[str, Any], data: bytes | None) -> tuple[int | None, Any, list[str]]:
        """Write the history row and, when the plan asks, the output file: (row id, file path, warnings).

        The history is best effort: a row that cannot be written is logged and returned as a warning.
        A file asked for must be written: `InsufficientStorage` on a full disk, `StorageError`
        otherwise; the write is atomic, so no partial file is left.
        """
        if not self.record_history and not plan.save:
            return None, None, []
        try:
            output_id = self.home.db.add_output(
                text=plan.text,
                model=plan.model.name,
                voice=plan.voice_label,
                format=plan.format.name,
                duration_s=duration,
                path=None,
                metadata=metadata,
            )
        except Exception as e:  # noqa: BLE001 - any database failure: the audio is still good
            if plan.save:
                raise _save_failed(e) from e
            log.warning("the output was not recorded in the history: %s", e)
            return None, None, [f"the output is not in the history ({_why(e)})"]
        if not plan.save or data is None:
            return output_id, None, []
        try:
            path = self.home.save_output(output_id, data, plan.format)
        except StorageError as e:  # writing the file failed; it was written atomically, so nothing is left
            raise _save_failed(e) from e
        except Exception as e:  # noqa: BLE001 - the file is saved; recording its path in the history failed
            log.warning("output %d was saved, but its path is not in the history: %s", output_id, e)
            return output_id, None, [f"the output was saved, but its path is not in the history ({_why(e)})"]
        return output_id, path, []

    def _stream(
        self, plan: SpeechPlan, cancel: CancelToken, first_chunk_s: float | None, chunk_s: float | None, pieces: Iterable[str] | None = None
    ) -> Iterator[StreamChunk]:
        notes: list[str] = []
        out: _StreamWriter | None = None
        said: list[str] = []  # streamed text: what the pieces held, for the history
        with self.cache.use(plan.model) as entry, entry.lock:
            with engine_errors():
                job = self._synthesis_request(plan, entry, cancel, stream=True, first_chunk_s=first_chunk_s, chunk_s=chunk_s, notes=notes)
                chunks = _run(entry.engine, job) if pieces is None else entry.engine.synthesize_text(_kept(pieces, said), job)
            out = _StreamWriter(self, plan, notes)
            try:
                with engine_errors():
                    for chunk in chunks:
                        if cancel.cancelled:
                            raise RequestCancelled("the request was cancelled")
                        if chunk.final and pieces is not None:
                            out.plan = replace(plan, text="".join(p for p in said if isinstance(p, str)).strip())
                        yield out.write(chunk)
                        if out.finished:
                            return
            finally:
                if not out.finished:
                    cancel.cancel()
                    out.abandon()
                chunks.close()

    def stream_batch(
        self,
        requests: list[SpeechRequest | SpeechPlan],
        cancels: list[CancelToken] | None = None,
        *,
        first_chunk_s: float | list[float | None] | None = None,
        chunk_s: float | list[float | None] | None = None,
        admit: Callable[[], list[tuple[SpeechPlan, CancelToken, float | None, float | None]]] | None = None,
    ) -> Iterator[tuple[int, StreamChunk | KoeError]]:
        """Stream requests that differ only in text (and speed, format, chunk sizes) from one batched
        generation: `(request index, StreamChunk)` pairs as the audio is made, each request's chunks
        what `stream` would give it (the batch draws with the first request's seed).

        Validates now (`InvalidRequest` if the requests do not share model, voice, language and
        options, see `SpeechPlan.batch_key`). `cancels[i]` set stops request i's chunks (nothing of
        it is kept); the generation stops when every request is cancelled or the iterator is closed.
        `first_chunk_s` / `chunk_s`: one value for all requests or one per request (None: the
        model's defaults). A model that cannot batch streams speaks the requests in turn.

        `admit`, where the model takes rows into a running batch (int8 / int4 Qwen3-TTS), is asked
        between steps for more streams, as `(plan, cancel, first_chunk_s, chunk_s)` tuples of plans
        with this batch's `batch_key`; they are numbered on from these. One of them that cannot be
        spoken comes out as `(index, KoeError)`, the others go on.
        """
        plans = [r if isinstance(r, SpeechPlan) else self.plan(r) for r in requests]
        n = len(plans)
        cancels = list(cancels) if cancels is not None else [CancelToken() for _ in plans]
        if len(cancels) != n:
            raise InvalidRequest(f"{n} requests but {len(cancels)} cancel handles")
        if plans and len({p.batch_key() for p in plans}) != 1:
            raise InvalidRequest("requests in a batch must differ only in their text, speed and format")
        sizes = [_per_request(name, value, n) for name, value in (("first_chunk_s", first_chunk_s), ("chunk_s", chunk_s))]
        for name, values in zip(("first_chunk_s", "chunk_s"), sizes, strict=True):
            for value in values:
                _check_chunk_size(name, value)
        return self._stream_batch(plans, cancels, *sizes, admit=admit)

    def _stream_batch(
        self, plans: list[SpeechPlan], cancels: list[CancelToken], firsts: list, everys: list, admit=None
    ) -> Iterator[tuple[int, StreamChunk | KoeError]]:
        if not plans:
            return
        first = plans[0]
        notes: list[str] = []
        writers: list[_StreamWriter] = []
        with self.cache.use(first.model) as entry, entry.lock:
            engine = entry.engine
            with engine_errors():
                job = self._synthesis_request(first, entry, None, stream=True, notes=notes)
                jobs = [replace(job, text=p.text, cancel=c, first_chunk_s=f, chunk_s=e) for p, c, f, e in zip(plans, cancels, firsts, everys, strict=True)]
            writers = [_StreamWriter(self, p, notes, seed=first.seed, batch_size=len(plans) if len(plans) > 1 else None) for p in plans]
            key = first.batch_key()

            def joining() -> list[SynthesisRequest]:
                out = []
                for plan, cancel, f, e in admit():
                    if plan.batch_key() != key:
                        raise ValueError("a stream that joins a batch must have the batch's batch_key")
                    plans.append(plan)
                    cancels.append(cancel)
                    writers.append(_StreamWriter(self, plan, notes, seed=first.seed))
                    out.append(replace(job, text=plan.text, cancel=cancel, first_chunk_s=f, chunk_s=e))
                return out

            with engine_errors():
                if first.stream_batchable and (len(jobs) > 1 or admit is not None):  # `Capabilities.batch_stream`
                    chunks = engine.synthesize_streams(jobs, joining if admit is not None else None)
                else:  # one stream, or a model that streams them in turn
                    chunks = in_turn(engine, jobs)
            try:
                with engine_errors():
                    for i, chunk in chunks:
                        if isinstance(chunk, Exception):  # a stream that joined and cannot be spoken
                            writers[i].finished = True
                            yield i, _koe_error(chunk)
                            continue
                        if cancels[i].cancelled:
                            writers[i].abandon()
                            continue
                        yield i, writers[i].write(chunk)
            finally:
                for writer, cancel in zip(writers, cancels, strict=True):
                    if not writer.finished:
                        cancel.cancel()
                        writer.abandon()
                chunks.close()


class _StreamWriter:
    """One streamed utterance's output side: its encoder, the bytes to keep, its history row."""

    def __init__(self, synth: Synthesizer, plan: SpeechPlan, notes: list[str], *, seed: int | None = None, batch_size: int | None = None) -> None:
        self.synth, self.plan, self.notes = synth, plan, notes
        self.seed = plan.seed if seed is None else seed
        self.batch_size = batch_size
        self.encoder: StreamEncoder | None = None
        self.kept: list[bytes] = []
        self.finished = False

    def write(self, chunk: AudioChunk) -> StreamChunk:
        """The encoded `StreamChunk` of an engine chunk; the final one is recorded (and saved when asked)."""
        plan = self.plan
        if self.encoder is None:
            self.encoder = StreamEncoder(plan.format, chunk.sample_rate, speed=plan.speed)
        data = self.encoder.feed(chunk.samples)
        if not chunk.final:
            if plan.save:
                self.kept.append(data)
            return StreamChunk(data, chunk.samples, chunk.sample_rate)
        data += self.encoder.finish()
        self.finished = True
        meta = chunk.metadata  # the final chunk carries the utterance's warnings and truncation
        if self.batch_size is not None and "batch_size" not in meta:  # the engine's count where it keeps one (rows that joined)
            meta = dict(meta, batch_size=self.batch_size)
        metadata = self.synth._metadata(plan, meta, self.seed)
        output_id, path, unkept = self.synth._record(plan, self.encoder.duration, metadata, b"".join(self.kept) + data if plan.save else None)
        warnings = [*result_warnings(plan, meta), *self.notes, *unkept]
        return StreamChunk(data, chunk.samples, chunk.sample_rate, True, warnings, metadata, output_id, path)

    def abandon(self) -> None:
        """Drop what was not finished (the encoder's resources; nothing is recorded)."""
        if self.encoder is not None and not self.finished:
            self.encoder.close()
            self.encoder = None
        self.kept = []


def _run(engine: Any, job: SynthesisRequest | ConversionRequest) -> Iterator[AudioChunk]:
    """The engine's chunks for a request: `convert` for a conversion, else `synthesize`."""
    return engine.convert(job) if isinstance(job, ConversionRequest) else engine.synthesize(job)


def _kept(pieces: Iterable[str], said: list[str]) -> Iterator[str]:
    """`pieces`, each also appended to `said` as it is given."""
    for piece in pieces:
        said.append(piece)
        yield piece


def _koe_error(error: Exception) -> KoeError:
    """An engine's error for one request as the `KoeError` `engine_errors` would raise."""
    try:
        with engine_errors():
            raise error
    except KoeError as e:
        return e


def _check_chunk_size(name: str, value: float | None) -> None:
    if value is not None and not value > 0:
        raise InvalidRequest(f"{name} must be > 0 seconds, got {value}", param=name)


def _per_request(name: str, value: Any, n: int) -> list:
    """A chunk size for each of `n` requests: one value for all, or a list of n."""
    if isinstance(value, (list, tuple)):
        if len(value) != n:
            raise InvalidRequest(f"{name}: {n} requests but {len(value)} values", param=name)
        return list(value)
    return [value] * n


def _collect(chunks: Iterator[AudioChunk], on_progress: Callable[[float], None] | None = None) -> tuple[np.ndarray, int, dict[str, Any]]:
    """Join a stream's chunks into one utterance (`koe.engines.base.collect`), reporting seconds of
    audio made after each chunk to `on_progress`."""
    whole = collect(chunks if on_progress is None else _reporting(chunks, on_progress))
    return whole.samples, whole.sample_rate, whole.metadata


def _reporting(chunks: Iterator[AudioChunk], on_progress: Callable[[float], None]) -> Iterator[AudioChunk]:
    for chunk in chunks:
        yield chunk
        on_progress((chunk.offset + len(chunk.samples)) / chunk.sample_rate)


def result_warnings(plan: SpeechPlan, meta: dict[str, Any]) -> list[str]:
    """Warnings for the user: the plan's (dropped instruction, ...) and the result's (`truncated`, ...)."""
    out = list(plan.warnings)
    out.extend(str(w) for w in meta.get("warnings", []) if w)
    if meta.get("truncated") and not meta.get("warnings"):
        out.append(f"the speech was cut short after {meta.get('frames', '?')} steps; raise the model's length cap or split the text")
    return out


def _why(error: BaseException) -> str:
    """A short, path-free cause for a warning: "the disk is full", SQLite's message, or the error's type."""
    if is_disk_full(error):
        return "the disk is full"
    return str(error) if isinstance(error, sqlite3.Error) else type(error).__name__


def _save_failed(error: BaseException) -> KoeError:
    """The error for an output file that could not be kept: 507 on a full disk, else a `StorageError`."""
    if is_disk_full(error):
        return disk_full_error("cannot save the output")
    if isinstance(error, StorageError):
        return error
    return StorageError(f"cannot record the output in the history: {_why(error)}")


@contextlib.contextmanager
def disk_full_as(what: str) -> Iterator[None]:
    """Turn a write that fails on a full disk into `InsufficientStorage` ("`what`: the disk is full")."""
    try:
        yield
    except Exception as e:
        if (isinstance(e, KoeError) and e.status < 500) or not is_disk_full(e):
            raise
        raise disk_full_error(what) from e


@contextlib.contextmanager
def engine_errors() -> Iterator[None]:
    """Turn an engine's request and audio errors, and cancellation, into `KoeError`s."""
    try:
        yield
    except KoeError:
        raise
    except Cancelled as e:
        raise RequestCancelled("the request was cancelled") from e
    except AudioError as e:
        raise InvalidRequest(f"audio: {e}") from e
    except RequestError as e:
        raise InvalidRequest(str(e), param=e.param) from e  # the engine's message says what is valid
