"""The synthesizer: what the CLI and the server call to turn requests into encoded speech.

Torch-free at import: engines are reached through the model cache, which loads them lazily with
`koe.load`. One request flows: `plan` (validate against settings, model files, voice library) ->
model cache (load or reuse the engine, one call at a time per engine) -> voice prompt (library
voices are prepared once per model and kept) -> `engine.generate` / `engine.stream` -> encoder
(format, speed) -> history row in koe.db (and a file under outputs/ when asked).
"""

from __future__ import annotations

import contextlib
import importlib
import logging
from collections.abc import Callable, Iterator
from dataclasses import asdict, is_dataclass
from typing import Any

import numpy as np

from koe.audio.errors import AudioError
from koe.engines.base import Cancelled, CancelToken
from koe.service.cache import LoadedModel, ModelCache
from koe.service.encode import StreamEncoder, encode_audio
from koe.service.errors import AlreadyExists, InvalidRequest, KoeError, NotFound, RequestCancelled, Unavailable
from koe.service.home import KoeHome
from koe.service.models import ModelRef
from koe.service.names import check_name
from koe.service.plan import Planner, SpeechPlan
from koe.service.requests import SamplingOptions, SpeechOutput, SpeechRequest, StreamChunk
from koe.service.voices import Voice

log = logging.getLogger(__name__)

DESIGN_SAMPLE_TEXT = (
    "Hello! This is the voice I was given. I can read a story, explain an idea, or answer a question, "
    "clearly and at an easy pace."
)


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
    ) -> None:
        self.home = home
        self.settings = home.settings
        self.planner = Planner(self.settings, home.models, home.voices, max_input_chars=max_input_chars)
        m = self.settings.models
        self.cache = ModelCache(loader or self._load_engine, resident_limit=m.resident_limit, idle_unload_seconds=m.idle_unload_seconds)
        self.record_history = record_history

    # -- public API -----------------------------------------------------------------------------
    def plan(self, request: SpeechRequest) -> SpeechPlan:
        """Validate a request without loading anything (raises a `KoeError` for every bad input)."""
        return self.planner.plan(request)

    def speak(
        self,
        request: SpeechRequest | SpeechPlan,
        cancel: CancelToken | None = None,
        on_progress: Callable[[float], None] | None = None,
    ) -> SpeechOutput:
        """Synthesize one request to a complete encoded file (recorded in history; saved when asked).

        Setting `cancel` from another thread stops generation within a frame (`RequestCancelled`).
        With `on_progress`, the audio is made through the engine's stream (same codes; samples equal
        up to float32 rounding) and `on_progress(seconds_of_audio_so_far)` is called per chunk.
        """
        plan = request if isinstance(request, SpeechPlan) else self.plan(request)
        with self.cache.use(plan.model) as entry, entry.lock:
            kwargs = self._engine_kwargs(plan, entry)
            if cancel is not None:
                kwargs["cancel"] = cancel
            with engine_errors():
                if on_progress is not None and hasattr(entry.engine, "stream"):
                    samples, sample_rate, meta = _collect_stream(entry.engine.stream(plan.text, **kwargs), on_progress)
                else:
                    result = entry.engine.generate(plan.text, **kwargs)
                    samples, sample_rate, meta = result.audio, result.sample_rate, dict(result.metadata)
        return self._finish(plan, samples, sample_rate, meta)

    def speak_batch(self, requests: list[SpeechRequest | SpeechPlan], cancel: CancelToken | None = None) -> list[SpeechOutput]:
        """Synthesize requests that differ only in text (and speed/format) as one batched generation.

        The batch uses the first request's seed. Raises `InvalidRequest` if the requests do not share
        model, voice, language and sampling (see `SpeechPlan.batch_key`). Setting `cancel` stops the
        whole batch within a frame (`RequestCancelled`).
        """
        plans = [r if isinstance(r, SpeechPlan) else self.plan(r) for r in requests]
        if not plans:
            return []
        if len({p.batch_key() for p in plans}) != 1:
            raise InvalidRequest("requests in a batch must differ only in their text, speed and format")
        first = plans[0]
        with self.cache.use(first.model) as entry, entry.lock:
            kwargs = self._engine_kwargs(first, entry)
            if cancel is not None:
                kwargs["cancel"] = cancel
            with engine_errors():
                results = entry.engine.generate([p.text for p in plans], **kwargs)
        outputs = []
        for p, r in zip(plans, results, strict=True):
            meta = dict(r.metadata, batch_size=len(plans))
            outputs.append(self._finish(p, r.audio, r.sample_rate, meta, seed=first.seed))
        return outputs

    def stream(
        self,
        request: SpeechRequest | SpeechPlan,
        cancel: CancelToken | None = None,
        *,
        first_chunk_frames: int = 4,
        chunk_frames: int = 12,
    ) -> Iterator[StreamChunk]:
        """Validate now, then return an iterator of encoded chunks made as the audio is generated.

        Concatenated, the chunks' `data` is one playable file/stream in the request's format; the
        last chunk has `final=True`. Cancelling `cancel` (or closing the iterator) stops generation
        within a frame and raises `RequestCancelled` from the iterator (closing just ends it).
        """
        plan = request if isinstance(request, SpeechPlan) else self.plan(request)
        return self._stream(plan, cancel or CancelToken(), first_chunk_frames, chunk_frames)

    def design_voice(
        self,
        name: str,
        description: str,
        *,
        model: str | None = None,
        text: str | None = None,
        language: str | None = None,
        seed: int | None = None,
        sampling: SamplingOptions | None = None,
        overwrite: bool = False,
    ) -> Voice:
        """Speak `text` with a VoiceDesign model in the voice `description` describes, and keep the
        result as library voice `name` (its clone reference, with `text` as the transcript)."""
        check_name(name, "voice")
        if not overwrite and self.home.voices.exists(name):
            raise AlreadyExists(f"voice {name!r} already exists", hint="remove it first or pass overwrite")
        if not description or not description.strip():
            raise InvalidRequest("the voice description is empty: describe the voice (age, gender, tone, pace, ...)")
        request = SpeechRequest(
            text=text or DESIGN_SAMPLE_TEXT, model=model, design=description, language=language, seed=seed,
            sampling=sampling or SamplingOptions(), format="wav", save=False,
        )  # fmt: skip
        out = self.speak(request)
        lang = out.metadata.get("language")
        return self.home.voices.add(
            name, (out.samples, out.engine_sample_rate), request.text, description=description.strip(),
            language=None if lang in (None, "auto") else lang, source="design", overwrite=overwrite,
        )  # fmt: skip

    def capabilities(self, model: str | None = None) -> dict[str, Any]:
        """What a model can do (loads it): clone, speakers, instruct, voice design, languages, sample rate."""
        ref = self.home.models.resolve(model, self.settings.models.default)
        with self.cache.use(ref) as entry:
            caps = entry.engine.capabilities
        return asdict(caps) if is_dataclass(caps) else dict(caps)

    def close(self) -> None:
        """Unload every model and close this thread's database connection."""
        self.cache.clear()
        self.home.close()

    # -- engines --------------------------------------------------------------------------------
    def _load_engine(self, ref: ModelRef) -> Any:
        import koe

        m = self.settings.models
        try:
            return koe.load(ref.path, device=m.device, dtype=m.dtype, precision=m.precision)
        except FileNotFoundError as e:
            raise NotFound(f"cannot load model {ref.name!r}: {e}", param="model") from e
        except (ValueError, RuntimeError, OSError) as e:
            where = f" on {m.device}" if m.device else ""
            raise Unavailable(f"cannot load model {ref.name!r}{where}: {e}", hint="`koe doctor` checks the setup") from e

    def _engine_kwargs(self, plan: SpeechPlan, entry: LoadedModel) -> dict[str, Any]:
        kwargs: dict[str, Any] = {"language": plan.language, "seed": plan.seed, **plan.sampling}
        if plan.mode == "speaker":
            kwargs.update(speaker=plan.speaker, instruct=plan.instruct)
        elif plan.mode == "design":
            kwargs.update(instruct=plan.instruct)
        else:
            kwargs["voice"] = self._voice_prompt(plan, entry)
        return kwargs

    def _voice_prompt(self, plan: SpeechPlan, entry: LoadedModel) -> Any:
        engine = entry.engine
        prepare_voice = getattr(engine, "prepare_voice", None)
        if prepare_voice is None:
            raise Unavailable("voice cloning is not available in this koe build (the engine has no prepare_voice yet)")
        with engine_errors():
            if plan.mode == "clone_clip":
                return prepare_voice(plan.ref_audio, ref_text=plan.ref_text, x_vector_only=plan.ref_text is None)
            return self.home.voices.prompt_for(
                plan.voice_name, plan.model.key,
                prepare=lambda v: prepare_voice(str(v.reference_path), ref_text=v.ref_text, x_vector_only=v.ref_text is None),
                load=_voice_prompt_class(engine).load,
            )  # fmt: skip

    # -- results --------------------------------------------------------------------------------
    def _finish(self, plan: SpeechPlan, samples: np.ndarray, sample_rate: int, meta: dict[str, Any], seed: int | None = None) -> SpeechOutput:
        encoded = encode_audio(samples, sample_rate, plan.format, speed=plan.speed)
        seed = plan.seed if seed is None else seed
        metadata = self._metadata(plan, meta, seed)
        output_id, path = self._record(plan, encoded.duration, metadata, encoded.data)
        return SpeechOutput(
            audio=encoded.data, format=encoded.format, sample_rate=encoded.sample_rate, duration=encoded.duration,
            samples=np.asarray(samples, dtype=np.float32), engine_sample_rate=int(sample_rate), model=plan.model.name,
            voice=plan.voice_label, seed=seed, warnings=result_warnings(plan, meta), metadata=metadata,
            output_id=output_id, path=path,
        )  # fmt: skip

    def _metadata(self, plan: SpeechPlan, meta: dict[str, Any], seed: int) -> dict[str, Any]:
        return {
            **{k: v for k, v in meta.items() if k not in ("codes",)},
            "seed": seed, "mode": plan.mode, "language": plan.language, "speaker": plan.speaker,
            "instruct": plan.instruct, "voice": plan.voice_name, "speed": plan.speed, "format": plan.format.name,
            "sampling": plan.sampling, "model_name": plan.model.name, "model_key": plan.model.key,
        }  # fmt: skip

    def _record(self, plan: SpeechPlan, duration: float, metadata: dict[str, Any], data: bytes | None) -> tuple[int | None, Any]:
        if not self.record_history and not plan.save:
            return None, None
        output_id = self.home.db.add_output(
            text=plan.text, model=plan.model.name, voice=plan.voice_label, format=plan.format.name,
            duration_s=duration, path=None, metadata=metadata,
        )  # fmt: skip
        path = self.home.save_output(output_id, data, plan.format) if plan.save and data is not None else None
        return output_id, path

    def _stream(self, plan: SpeechPlan, cancel: CancelToken, first_chunk_frames: int, chunk_frames: int) -> Iterator[StreamChunk]:
        encoder: StreamEncoder | None = None
        kept: list[bytes] = []
        chunk_warnings: list[str] = []
        truncated = False
        finished = False
        with self.cache.use(plan.model) as entry, entry.lock:
            kwargs = self._engine_kwargs(plan, entry)
            engine = entry.engine
            if hasattr(engine, "stream"):
                chunks = engine.stream(plan.text, cancel=cancel, first_chunk_frames=first_chunk_frames, chunk_frames=chunk_frames, **kwargs)
            else:
                log.info("this engine cannot stream; the whole utterance comes as one chunk")
                chunks = _whole_as_chunks(engine, plan.text, kwargs)
            try:
                with engine_errors():
                    for chunk in chunks:
                        if cancel.cancelled:
                            raise RequestCancelled("the request was cancelled")
                        if encoder is None:
                            encoder = StreamEncoder(plan.format, chunk.sample_rate, speed=plan.speed)
                        data = encoder.feed(chunk.samples)
                        chunk_warnings.extend(w for w in chunk.metadata.get("warnings", []) if w not in chunk_warnings)
                        truncated = truncated or bool(chunk.metadata.get("truncated"))
                        if not chunk.final:
                            if plan.save:
                                kept.append(data)
                            yield StreamChunk(data, chunk.samples, chunk.sample_rate)
                            continue
                        data += encoder.finish()
                        finished = True
                        meta = {**chunk.metadata, "warnings": chunk_warnings, "truncated": truncated}
                        metadata = self._metadata(plan, meta, plan.seed)
                        output_id, path = self._record(plan, encoder.duration, metadata, b"".join(kept) + data if plan.save else None)
                        yield StreamChunk(data, chunk.samples, chunk.sample_rate, True, result_warnings(plan, meta), metadata, output_id, path)
                        return
            finally:
                if not finished:
                    cancel.cancel()
                    if encoder is not None:
                        encoder.close()
                close = getattr(chunks, "close", None)
                if close is not None:
                    close()


def _collect_stream(chunks: Iterator[Any], on_progress: Callable[[float], None]) -> tuple[np.ndarray, int, dict[str, Any]]:
    """Join a stream's chunks into one utterance, reporting seconds of audio made after each."""
    parts: list[np.ndarray] = []
    meta: dict[str, Any] = {"warnings": [], "truncated": False}
    sample_rate, total = 0, 0
    for chunk in chunks:
        parts.append(np.asarray(chunk.samples, dtype=np.float32))
        sample_rate = chunk.sample_rate
        total += len(chunk.samples)
        meta["warnings"].extend(chunk.metadata.get("warnings", []))
        meta["truncated"] = meta["truncated"] or bool(chunk.metadata.get("truncated"))
        meta["frames"] = chunk.metadata.get("frames", meta.get("frames"))
        on_progress(total / sample_rate)
    return (np.concatenate(parts) if parts else np.zeros(0, np.float32)), sample_rate, meta


def _whole_as_chunks(engine: Any, text: str, kwargs: dict[str, Any]) -> Iterator[Any]:
    from koe.engines.base import AudioChunk

    result = engine.generate(text, **kwargs)
    yield AudioChunk(result.audio, result.sample_rate, 0, True, dict(result.metadata))


def _voice_prompt_class(engine: Any) -> Any:
    """The class whose `.load(folder)` reads this engine's saved voice prompts."""
    for owner in (engine, importlib.import_module(type(engine).__module__)):
        cls = getattr(owner, "VoicePrompt", None) or getattr(owner, "voice_prompt_class", None)
        if cls is not None:
            return cls
    for module in ("koe.engines.base", f"{type(engine).__module__.rsplit('.', 1)[0]}.voice"):
        with contextlib.suppress(ImportError):
            cls = getattr(importlib.import_module(module), "VoicePrompt", None)
            if cls is not None:
                return cls
    raise Unavailable("this engine's saved voice prompts cannot be read (no VoicePrompt class found)")


def result_warnings(plan: SpeechPlan, meta: dict[str, Any]) -> list[str]:
    """Warnings for the user: the plan's (dropped instruction, ...) and the result's (`truncated`, ...)."""
    out = list(plan.warnings)
    out.extend(str(w) for w in meta.get("warnings", []) if w)
    if meta.get("truncated") and not meta.get("warnings"):
        limit = plan.sampling.get("max_new_tokens")
        out.append(
            f"the speech was cut short after {meta.get('frames', '?')} frames"
            + (f" (max_new_tokens={limit})" if limit else " (the model's max_new_tokens)")
            + "; raise --max-new-tokens or split the text"
        )
    return out


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
    except ValueError as e:
        if not any(c.__name__ == "RequestError" for c in type(e).__mro__):
            raise
        raise InvalidRequest(str(e)) from e  # an engine's RequestError says what is valid
