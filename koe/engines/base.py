"""The engine contract: what every model family hands the rest of koe (torch-free types).

A family lives in `koe/engines/<family>/` as a torch-free `spec.py` (probe, describe, voice
aliases, released ids) and an engine that meets `Engine`: `load` a folder, say its
`capabilities`, `prepare_voice` from a reference, `synthesize` a `SynthesisRequest` into
`AudioChunk`s, and `close`. The service, the server and the CLI see nothing else, so a new
family never edits them.
"""

from __future__ import annotations

import math
import numbers
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np

from koe.text.checks import has_speech, text_problem

# -- voice modes -------------------------------------------------------------------------------
PRESET = "preset"  # a named speaker the model ships with
CLONE = "clone"  # a reference clip with its transcript
CLONE_WITHOUT_TRANSCRIPT = "clone_without_transcript"  # a reference clip alone
DESIGN = "design"  # a voice described in words
NO_VOICE = "none"  # the model picks a voice itself
VOICE_MODES = (PRESET, CLONE, CLONE_WITHOUT_TRANSCRIPT, DESIGN, NO_VOICE)


# -- errors --------------------------------------------------------------------------------------
class TrainingError(ValueError):
    """A training run that cannot start or go on as asked (bad data, a model the recipe cannot
    train, settings a checkpoint was not made with). `message` says what is wrong (every problem
    found), `hint` what to do; `param` the setting at fault where one is."""

    def __init__(self, message: str, hint: str | None = None, param: str | None = None) -> None:
        super().__init__(message)
        self.message, self.hint, self.param = message, hint, param


@dataclass(frozen=True)
class TrainStep:
    """One batch of a training run done: what every family's trainer reports after each batch
    (`on_step`) and a progress bar shows; a family's report adds its own fields after these."""

    epoch: int  # 0-based
    epochs: int
    batch: int  # 1-based within the epoch
    batches: int
    optimizer_steps: int  # so far, this batch's included
    loss: float


class RequestError(ValueError):
    """A request an engine cannot serve as asked; the message says what is valid.

    `param` names the request field at fault ("input", "voice", "language", an option's name).
    The service maps these to HTTP 4xx answers.
    """

    param: str | None = None

    def __init__(self, message: str, param: str | None = None) -> None:
        super().__init__(message)
        if param is not None:
            self.param = param


class EmptyText(RequestError):
    param = "input"


class UnsupportedLanguage(RequestError):
    param = "language"


class UnsupportedVoice(RequestError):
    """The voice asked for is unknown, or needs another kind of model."""

    param = "voice"


class VoicePromptMismatch(UnsupportedVoice):
    """A prepared voice prompt made for another model."""


class InvalidOption(RequestError):
    """An unknown family option, or a value out of its range."""


class Cancelled(Exception):
    """Raised inside a generation whose cancel handle was set."""


# -- seeds ---------------------------------------------------------------------------------------
SEED_LIMIT = 2**63  # seeds are 0 <= seed < 2**63 (see `check_seed`)


def check_seed(seed: Any, param: str = "seed") -> int | None:
    """`seed` as an int (None stays None); `RequestError` naming `param` unless 0 <= seed < 2**63.

    torch takes seeds in [-2**63, 2**64); koe gives segment i of a long text seed + i, so seeds
    stop at 2**63, which leaves room for every segment and fits a signed 64-bit integer (SQLite,
    JSON clients). Negative seeds are refused rather than wrapped as torch would.
    """
    if seed is None:
        return None
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral):
        raise RequestError(f"{param} must be a whole number, got {seed!r}", param=param)
    if not 0 <= int(seed) < SEED_LIMIT:
        raise RequestError(f"{param} must be 0 <= {param} < 2**63, got {seed!r}", param=param)
    return int(seed)


# -- options -------------------------------------------------------------------------------------
_TYPES: dict[str, type | tuple[type, ...]] = {"bool": bool, "int": int, "float": (int, float), "str": str}


@dataclass(frozen=True)
class Option:
    """One family option: its type ("bool", "int", "float", "str"), default, range and help.

    `default=None` means "the model's own default" (e.g. from its generation config).
    `low`/`high` bound the value (`low_open`: the bound itself is excluded). `null`: what an explicit
    None (JSON null) means, for an option whose upstream gives None a meaning of its own (F5-TTS's
    `sway_sampling_coef=None`: no sway); without it, None is "not given" and the default applies.
    """

    name: str
    type: str
    help: str
    default: Any = None
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    choices: tuple[str, ...] = ()
    null: str = ""

    def check(self, value: Any) -> Any:
        """The value, coerced to this option's type; `InvalidOption` naming the rule otherwise."""
        if value is None and self.null:
            return None
        null = f", or null ({self.null})" if self.null else ""  # e.g. --opt sway_sampling_coef=null
        if self.type == "bool":
            if not isinstance(value, bool):
                raise InvalidOption(f"{self.name}={value!r}: must be true or false{null}", param=self.name)
            return value
        if self.type == "str":
            if not isinstance(value, str) or (self.choices and value not in self.choices):
                rule = f"one of {', '.join(self.choices)}" if self.choices else "a string"
                raise InvalidOption(f"{self.name}={value!r}: must be {rule}", param=self.name)
            return value
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(float(value)):
            raise InvalidOption(f"{self.name}={value!r}: must be a {'whole number' if self.type == 'int' else 'number'}{null}", param=self.name)
        if self.type == "int":
            if not float(value).is_integer():
                raise InvalidOption(f"{self.name}={value!r}: must be a whole number", param=self.name)
            value = int(value)
        else:
            value = float(value)
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            raise InvalidOption(f"{self.name}={value!r}: {self.rule}", param=self.name)
        if self.high is not None and value > self.high:
            raise InvalidOption(f"{self.name}={value!r}: {self.rule}", param=self.name)
        return value

    @property
    def rule(self) -> str:
        """The allowed range in words ("must be in (0, 1]", "must be >= 1", ...)."""
        if self.low is not None and self.high is not None:
            return f"must be in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}]"
        if self.low is not None:
            return f"must be {'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"must be <= {self.high:g}"
        return ""

    def describe(self) -> dict[str, Any]:
        """JSON-friendly form (for `koe models info` and `GET /v1/models/{id}`)."""
        d: dict[str, Any] = {"name": self.name, "type": self.type, "default": self.default, "help": self.help}
        if self.rule:
            d["range"] = self.rule.removeprefix("must be ")  # in words; `min`/`max` for forms (the web page)
        if self.low is not None:
            d["min"] = self.low
            d["min_exclusive"] = self.low_open
        if self.high is not None:
            d["max"] = self.high
        if self.choices:
            d["choices"] = list(self.choices)
        if self.null:
            d["null"] = self.null
        return d


@dataclass(frozen=True)
class OptionsSchema:
    """A family's options, in the order they are documented."""

    options: tuple[Option, ...] = ()

    @property
    def names(self) -> list[str]:
        return [o.name for o in self.options]

    def get(self, name: str) -> Option | None:
        return next((o for o in self.options if o.name == name), None)

    def validate(self, values: Mapping[str, Any] | None) -> dict[str, Any]:
        """The options that are set, checked; `InvalidOption` names the valid ones. A None is dropped (not
        given: the default applies) unless the option gives null a meaning (`Option.null`): it is kept."""
        values = dict(values or {})
        unknown = sorted(k for k in values if self.get(k) is None)
        if unknown:
            raise InvalidOption(f"unknown option(s) {', '.join(map(repr, unknown))}; valid: {', '.join(self.names) or '(none)'}", param=unknown[0])
        return {k: self.get(k).check(v) for k, v in values.items() if v is not None or self.get(k).null}

    def describe(self) -> list[dict[str, Any]]:
        return [o.describe() for o in self.options]


# -- what a model offers -------------------------------------------------------------------------
@dataclass(frozen=True)
class Capabilities:
    """What a model can do, known from its files alone (`spec.describe`) and from the loaded engine.

    `voice_modes` is a subset of `VOICE_MODES`. `languages` are what `language=` accepts ("auto"
    first where the model detects it). `instruct`: style instructions are honoured. `stream_step_s`:
    the granularity of streaming, seconds of audio per step (None: whole segments only).
    `native_speed`: the model itself can speak faster or slower (else koe changes the tempo).
    `batch`: one-shot requests that share voice and options run as one batch (`synthesize_batch`;
    else in turn); `batch_stream`: streamed ones too (`synthesize_streams`); `joins_rows`: a running
    batch of streams takes new rows between steps (a property of the loaded engine: its precision).
    `voice_options`: the options a prepared prompt takes (`prepare_voice(reference, **options)`);
    one that is also a request option (the same name in `options`) shapes the prompt a request needs.
    `stream_is_one_shot`: streamed audio has the one-shot samples (False where upstream's own
    streaming decodes differently, as VoxCPM's does: then each mode equals upstream's same mode).
    `precisions`: the `koe.runtime.precision` modes the model can load in ("fp32" = exact first);
    another is refused before loading. `conversion`: the model converts speech into a prepared
    voice (`convert`: the same words, another speaker). `text_stream`: the model takes text in
    pieces itself (`synthesize_text`, as CosyVoice's bistream does); elsewhere streamed text is
    spoken sentence by sentence as each completes. `emotion_reference`: the model takes a second
    reference for the emotion or style of the speech (`SynthesisRequest.emotion`, a prompt prepared
    from another clip, as IndexTTS 2's `emo_audio_prompt`); elsewhere one is refused.
    """

    family: str
    variant: str
    voice_modes: frozenset[str]
    languages: tuple[str, ...]
    sample_rate: int
    speakers: tuple[str, ...] = ()
    instruct: bool = False
    stream_step_s: float | None = None
    native_speed: bool = False
    batch: bool = False
    batch_stream: bool = False
    joins_rows: bool = False
    options: OptionsSchema = field(default_factory=OptionsSchema)
    voice_options: OptionsSchema = field(default_factory=OptionsSchema)
    training: tuple[str, ...] = ()
    min_reference_s: float = 1.0
    stream_is_one_shot: bool = True
    precisions: tuple[str, ...] = ("fp32", "bf16")
    length_option: str = (
        ""  # the option (in `options`) that caps a request's steps, e.g. a model's max_new_tokens ("": none; `koe demo` caps random weights with it)
    )
    conversion: bool = False
    text_stream: bool = False
    emotion_reference: bool = False

    @property
    def streaming(self) -> bool:
        return self.stream_step_s is not None

    def prompt_options(self, options: Mapping[str, Any] | None) -> dict[str, Any]:
        """The request `options` that shape a prepared prompt (declared in `voice_options`), checked,
        where they differ from their default: what `prepare_voice` takes for the request, and what a
        store of prepared prompts keys them on (empty: the plain prompt)."""
        out = {}
        for option in self.voice_options.options:
            value = (options or {}).get(option.name)
            if value is not None and (value := option.check(value)) != option.default:
                out[option.name] = value
        return out

    def to_dict(self) -> dict[str, Any]:
        """JSON-friendly form."""
        return {
            "family": self.family,
            "variant": self.variant,
            "voice_modes": sorted(self.voice_modes),
            "speakers": list(self.speakers),
            "languages": list(self.languages),
            "sample_rate": self.sample_rate,
            "instruct": self.instruct,
            "streaming": self.streaming,
            "stream_step_s": self.stream_step_s,
            "native_speed": self.native_speed,
            "batch": self.batch,
            "batch_stream": self.batch_stream,
            "joins_rows": self.joins_rows,
            "options": self.options.describe(),
            "voice_options": self.voice_options.describe(),
            "training": list(self.training),
            "min_reference_s": self.min_reference_s,
            "stream_is_one_shot": self.stream_is_one_shot,
            "precisions": list(self.precisions),
            "length_option": self.length_option or None,
            "conversion": self.conversion,
            "text_stream": self.text_stream,
            "emotion_reference": self.emotion_reference,
        }


# -- requests and results ------------------------------------------------------------------------
@dataclass(frozen=True)
class VoiceReference:
    """A reference clip to clone: a path, bytes, or (samples, sample_rate); `text` its transcript
    (None: clone from the clip alone, where the model can). `trim`: use the start of a clip longer
    than the model takes, instead of refusing it."""

    audio: Any
    text: str | None = None
    trim: bool = False


@runtime_checkable
class VoicePrompt(Protocol):
    """A prepared voice, reusable across requests and processes (safetensors + JSON in a folder)."""

    def save(self, folder: str | Path) -> Path: ...


class CancelToken:
    """Set from any thread; the decode loop checks it once per step and stops."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def cancel(self) -> None:
        self._event.set()

    @property
    def cancelled(self) -> bool:
        return self._event.is_set()

    def raise_if_cancelled(self) -> None:
        if self.cancelled:
            raise Cancelled("generation cancelled")


class BatchCancel(CancelToken):
    """A batch's cancel handle: set when it is cancelled itself or when every member's is (a member
    that is None never is)."""

    def __init__(self, members: list[CancelToken | None]) -> None:
        super().__init__()
        self._members = list(members)

    def add(self, member: CancelToken | None) -> None:
        """A member that joined the batch."""
        self._members.append(member)

    @property
    def cancelled(self) -> bool:
        return self._event.is_set() or (bool(self._members) and all(m is not None and m.cancelled for m in self._members))


@dataclass
class SynthesisRequest:
    """One text to speak, in the family-neutral form every engine takes.

    `voice`: a prepared `VoicePrompt`, a preset speaker's name, or None (design, or the model's own
    voice). `instruct`: a style instruction, or on design models the voice's description.
    `seed=N` equals upstream run right after `torch.manual_seed(N)`; long texts are spoken in
    segments, segment i with seed N + i. `stream=True` (or setting `first_chunk_s`/`chunk_s`)
    yields audio in pieces of about these many seconds (the family's defaults where None); else
    each segment comes whole, on the exact one-shot path. `options`: the
    family's own settings, validated against `capabilities.options`. `max_segment_s`: cap on each
    segment's audio (None: the runaway guard's budget from the text). `emotion`: a second prepared
    `VoicePrompt` of the same model whose clip gives the speech its emotion or style (where
    `capabilities.emotion_reference`; how strongly is a family option, e.g. IndexTTS's `emo_alpha`).
    """

    text: str
    language: str | None = None
    voice: Any = None
    instruct: str | None = None
    seed: int | None = None
    cancel: CancelToken | None = None
    stream: bool = False
    first_chunk_s: float | None = None
    chunk_s: float | None = None
    options: dict[str, Any] = field(default_factory=dict)
    max_segment_chars: int | None = None
    pause_s: float | None = None
    max_segment_s: float | None = None
    emotion: Any = None

    def __post_init__(self) -> None:
        """Refuse what no engine can take, naming the field (`RequestError`, `EmptyText`): text that
        is not a string, holds a lone surrogate or has nothing to speak; a seed outside
        0 <= seed < 2**63; negative or non-finite pauses and chunk sizes. Valid values pass unchanged."""
        problem = text_problem(self.text, "text")
        if problem is not None:
            raise RequestError(problem.message, param="input")
        if self.text.strip() and not has_speech(self.text):
            raise EmptyText("text has nothing to speak: only whitespace, invisible or control characters")
        for name, value, param in (("instruct", self.instruct, "instructions"), ("language", self.language, "language")):
            problem = None if value is None else text_problem(value, name)
            if problem is not None:
                raise RequestError(problem.message, param=param)
        if isinstance(self.voice, str) and (problem := text_problem(self.voice, "voice")) is not None:
            raise UnsupportedVoice(problem.message)
        _check_run(self)
        _check_number("pause_s", self.pause_s, low=0.0, open_low=False)
        _check_number("max_segment_s", self.max_segment_s, low=0.0, open_low=True)
        n = self.max_segment_chars
        if n is not None and (isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 1):
            raise RequestError(f"max_segment_chars must be a whole number >= 1, got {n!r}", param="max_segment_chars")

    @property
    def streamed(self) -> bool:
        return self.stream or self.first_chunk_s is not None or self.chunk_s is not None


@dataclass(frozen=True)
class ConversionRequest:
    """Speech to say again in another voice (voice conversion), in the family-neutral form.

    `source`: the speech, float32 mono samples and their rate; `voice`: a prepared `VoicePrompt`
    (its transcript, if any, is not needed). `seed`, `cancel`, `stream`, `first_chunk_s`, `chunk_s`
    and `options` as in `SynthesisRequest`.
    """

    source: tuple[np.ndarray, int]
    voice: Any
    seed: int | None = None
    cancel: CancelToken | None = None
    stream: bool = False
    first_chunk_s: float | None = None
    chunk_s: float | None = None
    options: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        """Refuse what no engine can take, naming the field: a source that is not (samples, rate)
        with finite samples and a positive rate, or is empty; a seed out of range; bad chunk sizes."""
        source = self.source
        ok = isinstance(source, tuple) and len(source) == 2 and isinstance(source[0], np.ndarray)
        if not ok or source[0].ndim != 1 or isinstance(source[1], bool) or not isinstance(source[1], numbers.Integral) or source[1] <= 0:
            raise RequestError("source must be (samples, sample_rate): float32 mono samples and a positive rate", param="source")
        if source[0].size == 0 or not np.isfinite(source[0]).all():
            raise RequestError("the source speech is empty or not finite", param="source")
        if self.voice is None or isinstance(self.voice, str):
            raise UnsupportedVoice("voice conversion needs a prepared voice (a clone of a clip), not a speaker name or none")
        _check_run(self)

    @property
    def streamed(self) -> bool:
        return self.stream or self.first_chunk_s is not None or self.chunk_s is not None


def _check_run(request: SynthesisRequest | ConversionRequest) -> None:
    """What both requests share: a seed in 0 <= seed < 2**63, options a mapping, chunk sizes > 0."""
    check_seed(request.seed)
    if request.options is not None and not isinstance(request.options, Mapping):
        raise RequestError(f"options must be a mapping of option names to values, got {type(request.options).__name__}", param="options")
    for name in ("first_chunk_s", "chunk_s"):
        _check_number(name, getattr(request, name), low=0.0, open_low=True)


def _check_number(name: str, value: Any, *, low: float, open_low: bool) -> None:
    """None, or a finite real number above `low` (or at it, unless `open_low`); else `RequestError`."""
    if value is None:
        return
    ok = not isinstance(value, bool) and isinstance(value, numbers.Real) and math.isfinite(value)
    if not ok or value < low or (open_low and value == low):
        rule = f"{'>' if open_low else '>='} {low:g}"
        raise RequestError(f"{name} must be a number {rule}, got {value!r}", param=name)


@dataclass
class AudioChunk:
    """A piece of an utterance: float32 mono samples starting at `offset` (in samples).

    The last chunk has `final=True`; its metadata holds the whole utterance's (seed, truncated,
    warnings, segments, precision, ...).
    """

    samples: np.ndarray
    sample_rate: int
    offset: int
    final: bool
    metadata: dict = field(default_factory=dict)


@runtime_checkable
class Engine(Protocol):
    """A loaded model. Not re-entrant: callers serialize calls into one engine.

    Every family's engine meets it by inheriting `koe.engines.engine.BaseEngine`, which writes the
    shared parts once; callers switch on `capabilities` alone, never on which methods an engine has.
    """

    family: str
    title: str  # the family's name in messages

    @classmethod
    def load(cls, folder: str | Path, device: Any = None, dtype: Any = None, *, precision: str | None = None) -> Engine:
        """Load a model folder in its released layout (strict)."""
        ...

    @property
    def capabilities(self) -> Capabilities: ...

    @property
    def sample_rate(self) -> int: ...

    @property
    def precision(self) -> str:
        """The numeric mode it runs in ("float32": upstream's bits; "bfloat16", "int8", "int4" opt-in)."""
        ...

    def prepare_voice(self, reference: VoiceReference, **prompt_options: Any) -> VoicePrompt:
        """A reusable prompt from a reference clip, with the prompt options the model declares
        (`Capabilities.voice_options`); `RequestError` if this model cannot clone."""
        ...

    def load_voice(self, folder: str | Path) -> VoicePrompt:
        """A prompt saved by `VoicePrompt.save` (`VoicePromptMismatch` if it is damaged or another model's)."""
        ...

    def synthesize(self, request: SynthesisRequest) -> Iterator[AudioChunk]:
        """Speak one request as chunks; closing the iterator or cancelling stops within one step."""
        ...

    def synthesize_batch(self, requests: list[SynthesisRequest]) -> list[list[AudioChunk]]:
        """One-shot requests (same voice and options): as one batch where `capabilities.batch`, else in turn."""
        ...

    def synthesize_text(self, pieces: Iterable[str], request: SynthesisRequest) -> Iterator[AudioChunk]:
        """Text arriving in pieces (an LLM's output), spoken as it comes; `request` gives everything
        but the text. The final chunk comes after the last audio and carries the metadata."""
        ...

    def convert(self, request: ConversionRequest) -> Iterator[AudioChunk]:
        """The source speech in the request's voice, as chunks (where `capabilities.conversion`;
        else `RequestError`); closing the iterator or cancelling stops within one step."""
        ...

    def synthesize_streams(
        self, requests: list[SynthesisRequest], admit: Callable[[], list[SynthesisRequest]] | None = None
    ) -> Iterator[tuple[int, AudioChunk | RequestError]]:
        """`(request index, chunk)` pairs as the audio is made (from one batched generation where
        `capabilities.batch_stream`, else in turn); each request's chunks are what `synthesize` would
        stream it, and its last has `final=True`. A request whose `cancel` is set gets no more chunks;
        the generation stops once every request's is set, or when the iterator is closed. `admit`,
        where rows join a running batch (`capabilities.joins_rows`), is asked between steps for more
        requests (numbered on from the given ones); one of those that cannot be spoken comes out as
        `(index, RequestError)` instead of failing the others."""
        ...

    def close(self) -> None:
        """Free everything the engine holds: weights, caches, graphs, device memory."""
        ...


@dataclass
class SpeechResult:
    """One text's speech from a family's native `generate`: float32 mono samples at `sample_rate`,
    metadata, and the codes that made them where the model speaks in codec codes (Qwen3-TTS: (frames, 16))."""

    audio: np.ndarray
    sample_rate: int
    metadata: dict = field(default_factory=dict)
    codes: Any = None

    @property
    def duration(self) -> float:
        return len(self.audio) / self.sample_rate


def collect(chunks: Iterator[AudioChunk]) -> AudioChunk:
    """One-shot synthesis: the stream's samples joined, with the final chunk's metadata."""
    parts, last = [], None
    for chunk in chunks:
        parts.append(chunk.samples)
        last = chunk
    if last is None:
        raise RuntimeError("the engine produced no audio chunk")
    samples = np.concatenate(parts).astype(np.float32, copy=False) if parts else np.zeros(0, np.float32)
    return AudioChunk(samples, last.sample_rate, 0, True, dict(last.metadata))
