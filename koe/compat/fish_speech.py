"""Drop-in for upstream Fish Speech S2's Python entry points: code written for them runs on koe.

Upstream's server engine, as its API server and web page drive it:

    from koe.compat.fish_speech import ServeReferenceAudio, ServeTTSRequest, TTSInferenceEngine

    engine = TTSInferenceEngine.from_pretrained("checkpoints/s2-pro")   # or upstream's constructor:
    engine = TTSInferenceEngine(
        llama_queue=launch_thread_safe_queue("checkpoints/s2-pro", "cpu", torch.float32),
        decoder_model=load_codec_model("checkpoints/s2-pro/codec.pth", "cpu", torch.float32),
        precision=torch.float32,
        compile=False,
    )
    request = ServeTTSRequest(text="Hello.", references=[ServeReferenceAudio(audio=wav_bytes, text="...")], seed=1)
    for result in engine.inference(request):   # InferenceResult(code, audio, error)
        if result.code == "final":
            sample_rate, audio = result.audio      # 44100, float32 (samples,)

`ServeTTSRequest` and `ServeReferenceAudio` are pydantic models with upstream's fields, defaults and
checks (a bad value is pydantic's `ValidationError`, a ValueError, at construction): `top_p` and
`temperature` in [0.1, 1], `repetition_penalty` in [0.9, 2], numbers only (no strings or bools);
`format`, `latency` and `use_memory_cache` one of upstream's words; unknown fields ignored, as
upstream ignores them (`top_k` among them: the server always samples with top-k 30). `chunk_length`
is upstream's declared 100..1000 but, as in upstream, not enforced (its bound is written where
pydantic does not apply it): any whole number is taken, below 1 meaning each speaker turn alone.
A reference's `audio` is a file's bytes (or base64 text of over 255 characters, decoded as upstream
does). `normalize`, `format` and `latency` are accepted and, as in upstream's engine, change nothing.

`inference(req)` is a generator of upstream's `InferenceResult`s: with `streaming=True` first a
"header" (`(44100, np.array(<44-byte WAV header>))`, a 0-d bytes array as upstream's) and a
"segment" per batch of the text (`(44100, float32 (n,))`); always, last, a "final" with the whole
audio, `(44100, float32 (samples,))`, the batches' waves joined. As upstream: the references are
encoded first (`reference_id` before `references`; a bad clip, transcript or id raises from the
generator), then `seed` seeds Python's `random`, numpy's and torch's generators (a negative seed
negated, capped at 2**31), then the batches are generated and decoded one after another. A failure
in the generation (text koe refuses, a prompt too long for the context, `max_new_tokens` of 1 or
below 0) is not raised: it is an "error" result (`error` holds the exception), followed, when no
batch was spoken, by upstream's second "error" (RuntimeError "No audio generated, please check the
input text."), else by a "final" of the batches spoken. On the CPU the audio is upstream's bit for
bit, in float32 and in bfloat16 (tests/engines/fish_speech/test_fish_speech_compat.py, goldens
`infer` and `infer_bf16`).

Several `references` are several speakers, clip i `<|speaker:i|>` (`FishSpeechVoice.joined`).
`reference_id` reads `references/<id>/` under the working folder, as upstream (another folder:
`references_dir=`): every audio file in it (and below) with the transcript beside it (`x.lab` for
`x.wav`), in the order of their paths (upstream takes the file system's order); the id must be
letters, digits, `-`, `_` and spaces, 255 at most (no path can escape the folder). A folder that is
missing or holds no clip speaks in the model's own voice, as upstream's does (with a warning); a
clip without its `.lab` is a FileNotFoundError (upstream would read the `.lab` path as the
transcript). `use_memory_cache="on"` reuses clips encoded before (by the audio's sha256, with the
transcript first given, or by id), as upstream's; "off" encodes them again. `list_reference_ids`,
`add_reference` and `delete_reference` manage the folder as upstream's do.

Also upstream's `launch_thread_safe_queue(checkpoint_path, device, precision, compile=False)` (the
transformer and tokenizer of a release folder: koe runs each request in the caller's thread, one
at a time, rather than in a worker thread), `load_codec_model(codec_checkpoint_path, device,
precision=torch.bfloat16)` (`codec.pth`), `encode_audio(audio_path, codec, device)` (a clip's codes
`(10, frames)`, as upstream's command line makes them) and `decode_to_audio(codes, codec)` (the
wave `(samples,)` in the codec's dtype), and `wav_chunk_header`.

koe runs Fish Speech on the CPU: `device` is "cpu" (or None in `from_pretrained`). The server
engine runs in float32 or, as upstream's server runs by default, bfloat16: the transformer in
`launch_thread_safe_queue`'s precision, the codec in float32 (`load_model`, upstream's
`fish_speech.models.dac.inference.load_model`, as its server loads it), decoding under bfloat16
autocast when the engine's `precision` is torch.bfloat16; `from_pretrained(folder,
precision=torch.bfloat16)` is that whole setup. Both give upstream's bits (goldens `infer`,
`infer_bf16`). float16 (upstream's `--half`) and a codec cast to bfloat16 are refused in the engine,
not ignored; the codec alone (`load_codec_model`, `encode_audio`, `decode_to_audio`) runs in
float32, bfloat16 and float16. `compile` is accepted and has no effect. Left out: upstream's
`generate_long` and `init_model` (keyword plumbing between its model objects, not an API), the
engine's internals (`send_Llama_request`, `encode_reference`, `load_by_id`, ...).
The Fish Speech family is a package of its own (`pip install -e families/fish_speech`), imported
when a model is loaded.
"""

from __future__ import annotations

import base64
import io
import os
import random
import re
import shutil
import threading
import warnings
import wave
from collections.abc import Iterator
from dataclasses import dataclass
from hashlib import sha256
from pathlib import Path
from typing import Annotated, Any, Literal

import numpy as np
import torch
from pydantic import BaseModel, ConfigDict, Field, model_validator

__all__ = [
    "AUDIO_EXTENSIONS",
    "InferenceResult",
    "LlamaQueue",
    "ServeReferenceAudio",
    "ServeTTSRequest",
    "TTSInferenceEngine",
    "decode_to_audio",
    "encode_audio",
    "launch_thread_safe_queue",
    "load_codec_model",
    "load_model",
    "wav_chunk_header",
]

TOP_K = 30  # generate_long's top_k: the server's request has no field for it
AUDIO_EXTENSIONS = frozenset({".mp3", ".wav", ".flac", ".ogg", ".m4a", ".wma", ".aac", ".aiff", ".aif", ".aifc"})  # a reference folder's clips
REFERENCE_ID = re.compile(r"[a-zA-Z0-9\-_ ]+")
MAX_ID_CHARS = 255
BASE64_OVER = 255  # a reference's audio given as text longer than this is read as base64
NO_AUDIO = "No audio generated, please check the input text."


def _family():
    """The Fish Speech family's modules (its own package, under the Fish Audio Research License)."""
    try:
        from koe_fish_speech import codec, engine, model, reference, tokenizer
    except ImportError as e:
        if (e.name or "").split(".")[0] != "koe_fish_speech":
            raise
        raise ImportError(
            "koe.compat.fish_speech needs koe's Fish Speech family, a package of its own under the Fish Audio Research License: "
            "pip install -e families/fish_speech (from koe's source tree)",
            name="koe_fish_speech",
        ) from e
    return codec, engine, model, reference, tokenizer


# -- requests and results ------------------------------------------------------------------------------
class ServeReferenceAudio(BaseModel):
    """A reference clip: its file's bytes and its transcript."""

    audio: bytes
    text: str

    @model_validator(mode="before")
    @classmethod
    def _base64(cls, values: Any) -> Any:
        audio = values.get("audio") if isinstance(values, dict) else None
        if isinstance(audio, str) and len(audio) > BASE64_OVER:
            try:
                values = {**values, "audio": base64.b64decode(audio)}
            except ValueError:
                pass  # left as text, as upstream leaves it
        return values

    def __repr__(self) -> str:
        return f"ServeReferenceAudio(text={self.text!r}, audio_size={len(self.audio)})"


Unit = Annotated[float, Field(ge=0.1, le=1.0, strict=True)]


class ServeTTSRequest(BaseModel):
    """Upstream's request: text, references (or a reference id), seed and sampling settings."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    text: str
    chunk_length: int = 200  # upstream declares 100..1000 and does not enforce it (module doc)
    format: Literal["wav", "pcm", "mp3", "opus"] = "wav"
    latency: Literal["normal", "balanced"] = "normal"
    references: list[ServeReferenceAudio] = []
    reference_id: str | None = None
    seed: int | None = None
    use_memory_cache: Literal["on", "off"] = "off"
    normalize: bool = True
    streaming: bool = False
    max_new_tokens: int = 1024
    top_p: Unit = 0.8
    repetition_penalty: Annotated[float, Field(ge=0.9, le=2.0, strict=True)] = 1.1
    temperature: Unit = 0.8


@dataclass
class InferenceResult:
    """One result of `inference`: "header", "segment", "final" (audio `(sample_rate, array)`) or "error"."""

    code: Literal["header", "segment", "error", "final"]
    audio: tuple[int, np.ndarray] | None
    error: Exception | None


def wav_chunk_header(sample_rate: int = 44100, bit_depth: int = 16, channels: int = 1) -> bytes:
    """The header of a WAV file of no samples (a stream's first bytes)."""
    buffer = io.BytesIO()
    with wave.open(buffer, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(bit_depth // 8)
        w.setframerate(sample_rate)
    return buffer.getvalue()


# -- the models ---------------------------------------------------------------------------------------
def _cpu(device: Any) -> None:
    if device is not None and torch.device(device).type != "cpu":
        raise ValueError(f"device={device!r}: koe runs Fish Speech on the CPU in this version (device='cpu')")


def _mode(precision: Any, what: str = "precision") -> str:
    """koe's precision name for upstream's dtype: float32 "fp32", bfloat16 "bf16" (upstream's server)."""
    modes = {torch.float32: "fp32", torch.bfloat16: "bf16"}
    if precision not in modes:
        raise ValueError(f"{what}={precision!r}: koe's Fish Speech server engine runs in torch.float32 or torch.bfloat16 (upstream's server's)")
    return modes[precision]


@dataclass(frozen=True, eq=False)
class LlamaQueue:
    """What upstream's `launch_thread_safe_queue` stands for: a release's transformer and tokenizer
    (koe runs each request in the caller's thread, to its end, instead of in a worker thread)."""

    folder: Path
    lm: Any
    tokenizer: Any


def launch_thread_safe_queue(checkpoint_path: str | os.PathLike, device: Any, precision: torch.dtype, compile: bool = False) -> LlamaQueue:
    """The transformer and tokenizer of a release folder, for `TTSInferenceEngine` (float32, CPU)."""
    _, _, model, _, tokenizer = _family()
    _cpu(device)
    mode = _mode(precision)
    folder = Path(checkpoint_path)
    if not folder.is_dir():
        raise FileNotFoundError(f"checkpoint_path {str(checkpoint_path)!r}: no such folder (a Fish Speech S2 release folder)")
    return LlamaQueue(folder, model.load_lm_in(folder, mode), tokenizer.FishTokenizer.load(folder))


def load_codec_model(codec_checkpoint_path: str | os.PathLike, device: Any, precision: torch.dtype = torch.bfloat16):
    """The codec of a `codec.pth` (koe's `FishCodec`), in `precision`."""
    codec, *_ = _family()
    _cpu(device)
    return codec.read_codec(codec_checkpoint_path, dtype=precision)


def load_model(config_name: str, checkpoint_path: str | os.PathLike, device: Any = "cpu"):
    """Upstream's `fish_speech.models.dac.inference.load_model`, the codec its server decodes with:
    `codec.pth` in float32 (its sizes read from the checkpoint; `config_name` names upstream's
    Hydra config, "modded_dac_vq", and is not read). Upstream's `device` defaults to "cuda"; koe's is the CPU."""
    codec, *_ = _family()
    _cpu(device)
    if not isinstance(config_name, str):
        raise TypeError(f"config_name must be the name of upstream's codec config ('modded_dac_vq'), got {type(config_name).__name__}")
    return codec.read_codec(checkpoint_path, dtype=torch.float32)


def encode_audio(audio_path: str | os.PathLike, codec, device: Any) -> torch.Tensor:
    """A clip's codes `(10, frames)` int64, as upstream's command line makes them (its resampler)."""
    *_, reference, _ = _family()
    _cpu(device)
    return reference.reference_codes(codec, audio_path)


def decode_to_audio(codes, codec) -> torch.Tensor:
    """Codes `(10, frames)` -> the wave `(frames x 2048,)` in the codec's dtype."""
    codes = torch.as_tensor(codes)
    if codes.ndim != 2:
        raise ValueError(f"codes must be (num_codebooks, frames), got shape {tuple(codes.shape)}")
    return codec.decode(codes)


# -- the server engine --------------------------------------------------------------------------------
class TTSInferenceEngine:
    """A koe Fish Speech engine behind upstream's `TTSInferenceEngine` (the module doc says what it takes)."""

    def __init__(
        self,
        llama_queue: LlamaQueue,
        decoder_model,
        precision: torch.dtype,
        compile: bool,
        *,
        references_dir: str | os.PathLike = "references",
    ) -> None:
        codec, engine, *_ = _family()
        if not isinstance(llama_queue, LlamaQueue):
            raise TypeError(f"llama_queue must be what koe.compat.fish_speech.launch_thread_safe_queue returns, got {type(llama_queue).__name__}")
        if not isinstance(decoder_model, codec.FishCodec):
            raise TypeError(f"decoder_model must be what koe.compat.fish_speech.load_codec_model returns, got {type(decoder_model).__name__}")
        _mode(precision)
        if decoder_model.dtype != torch.float32:
            raise ValueError(
                f"decoder_model is in {decoder_model.dtype}: koe's server engine decodes with the codec in float32, as upstream's server loads it "
                "(load_model, or load_codec_model(..., precision=torch.float32)), under bfloat16 autocast when precision=torch.bfloat16"
            )
        lm = llama_queue.lm
        if lm.config.num_codebooks != decoder_model.config.num_codebooks:
            raise ValueError(
                f"the transformer speaks {lm.config.num_codebooks} codebooks but the codec has {decoder_model.config.num_codebooks}: "
                "they come from different releases"
            )
        self._setup(
            engine.FishSpeechEngine(llama_queue.folder, lm, decoder_model, llama_queue.tokenizer, torch.device("cpu")), precision, compile, references_dir
        )
        self.llama_queue = llama_queue

    @classmethod
    def from_pretrained(
        cls,
        model_dir: str | os.PathLike,
        *,
        device: Any = None,
        precision: torch.dtype = torch.float32,
        compile: bool = False,
        references_dir: str | os.PathLike = "references",
        accept_license: bool = False,
    ) -> TTSInferenceEngine:
        """The engine of a release folder, a store name or a hub id (`fishaudio/s2-pro`, through koe's
        resolver: a download on first use once its licence is accepted, `accept_license=True`)."""
        from koe.service.store.resolve import model_folder

        _, engine, *_ = _family()
        _cpu(device)
        mode = _mode(precision)
        folder = model_folder(model_dir, accept_license=accept_license)
        self = cls.__new__(cls)
        self._setup(engine.FishSpeechEngine.load(folder, precision=mode), precision, compile, references_dir)
        self.llama_queue = LlamaQueue(folder, self.engine.lm, self.engine.tokenizer)
        return self

    def _setup(self, engine, precision: torch.dtype, compile: bool, references_dir: str | os.PathLike) -> None:
        self.engine = engine
        self.decoder_model = engine.codec
        self.precision, self.compile = precision, bool(compile)
        self.references_dir = Path(references_dir)
        self._by_hash: dict[str, Any] = {}  # sha256 of a clip's bytes -> its voice (with the transcript first given)
        self._by_id: dict[str, list] = {}
        self._busy = threading.Lock()

    @property
    def sample_rate(self) -> int:
        return int(self.decoder_model.sample_rate)

    # -- inference ---------------------------------------------------------------------------------
    @torch.inference_mode()
    def inference(self, req: ServeTTSRequest) -> Iterator[InferenceResult]:
        """Upstream's `inference`: the results of one request (the module doc says which)."""
        if not isinstance(req, ServeTTSRequest):
            raise TypeError(f"inference takes a koe.compat.fish_speech.ServeTTSRequest, got {type(req).__name__}")
        if not self._busy.acquire(blocking=False):
            raise RuntimeError("this engine is speaking another request: finish (or close) that one's results first, or use another engine")
        try:
            yield from self._inference(req)
        finally:
            self._busy.release()

    def _inference(self, req: ServeTTSRequest) -> Iterator[InferenceResult]:
        voice = self._voice(req)
        if req.seed is not None:
            _set_seed(req.seed)
        rate = self.sample_rate
        if req.streaming:
            yield InferenceResult("header", (rate, np.array(wav_chunk_header(sample_rate=rate))), None)
        settings = {
            "temperature": req.temperature,
            "top_p": req.top_p,
            "top_k": TOP_K,
            "repetition_penalty": req.repetition_penalty,
            "max_new_tokens": req.max_new_tokens,
            "chunk_length": max(req.chunk_length, 0),  # upstream batches each turn alone below 1
        }
        batches = self.engine.batch_codes(req.text, voice, settings)
        segments = []
        while True:
            try:  # upstream's worker hands a failed generation back as an error result
                codes = next(batches)
            except StopIteration:
                break
            except Exception as e:
                yield InferenceResult("error", None, e)
                break
            with torch.autocast("cpu", torch.bfloat16, enabled=self.precision == torch.bfloat16):  # upstream decodes under its precision's autocast
                segment = self.decoder_model.decode(codes).float().numpy()
            if req.streaming:
                yield InferenceResult("segment", (rate, segment), None)
            segments.append(segment)
        if not segments:
            yield InferenceResult("error", None, RuntimeError(NO_AUDIO))
        else:
            yield InferenceResult("final", (rate, np.concatenate(segments, axis=0)), None)

    def _voice(self, req: ServeTTSRequest):
        """The request's references as one voice (clip i is speaker i), or None."""
        from koe_fish_speech.voice import FishSpeechVoice

        if req.reference_id is not None:
            voices = self._references_by_id(req.reference_id, req.use_memory_cache)
        else:
            voices = self._references_by_hash(req.references, req.use_memory_cache)
        return self.engine.check_prompt(FishSpeechVoice.joined(*voices)) if voices else None

    def _references_by_hash(self, references: list[ServeReferenceAudio], use_cache: str) -> list:
        voices = []
        for ref in references:
            key = sha256(ref.audio).hexdigest()
            if use_cache == "off" or key not in self._by_hash:
                self._by_hash[key] = self.engine.prepare_voice(ref.audio, ref.text)
            voices.append(self._by_hash[key])
        return voices

    def _references_by_id(self, id: str, use_cache: str) -> list:
        folder = self._reference_folder(id)
        if use_cache == "off" or id not in self._by_id:
            clips = _clips(folder, recursive=True)
            if not clips:
                warnings.warn(
                    f"reference_id {id!r}: no clips in {folder} (audio files with a .lab transcript beside each): "
                    "speaking in the model's own voice, as upstream does",
                    stacklevel=4,
                )
            self._by_id[id] = [self.engine.prepare_voice(str(clip), _transcript(clip)) for clip in clips]
        return self._by_id[id]

    def _reference_folder(self, id: str) -> Path:
        if not isinstance(id, str) or len(id) > MAX_ID_CHARS or not REFERENCE_ID.fullmatch(id):
            raise ValueError(f"reference id {id!r}: only letters, digits, hyphens, underscores and spaces are allowed, at most {MAX_ID_CHARS} characters")
        return self.references_dir / id

    # -- the references folder ---------------------------------------------------------------------
    def list_reference_ids(self) -> list[str]:
        """The ids of `references_dir` whose folder holds an audio file with its `.lab` (sorted)."""
        if not self.references_dir.is_dir():
            return []
        return sorted(d.name for d in self.references_dir.iterdir() if d.is_dir() and any(c.with_suffix(".lab").is_file() for c in _clips(d)))

    def add_reference(self, id: str, wav_file_path: str | os.PathLike, reference_text: str) -> None:
        """A new reference folder `<id>/` holding a copy of the clip (`sample<ext>`) and its transcript."""
        folder = self._reference_folder(id)
        if folder.exists():
            raise FileExistsError(f"Reference ID '{id}' already exists")
        clip = Path(wav_file_path)
        if not clip.is_file():
            raise FileNotFoundError(f"Audio file not found: {wav_file_path}")
        if clip.suffix.lower() not in AUDIO_EXTENSIONS:
            raise ValueError(f"Unsupported audio format: {clip.suffix}. Supported formats: {', '.join(sorted(AUDIO_EXTENSIONS))}")
        try:
            folder.mkdir(parents=True)
            shutil.copy2(clip, folder / f"sample{clip.suffix}")
            (folder / "sample.lab").write_text(reference_text, encoding="utf-8")
        except BaseException:
            shutil.rmtree(folder, ignore_errors=True)
            raise
        self._by_id.pop(id, None)

    def delete_reference(self, id: str) -> None:
        """Remove the reference folder `<id>/` and what it holds."""
        folder = self._reference_folder(id)
        if not folder.exists():
            raise FileNotFoundError(f"Reference ID '{id}' does not exist")
        shutil.rmtree(folder)
        self._by_id.pop(id, None)


def _set_seed(seed: int) -> None:
    """Upstream's `set_seed`: Python's, numpy's and torch's generators (|seed|, at most 2**31)."""
    seed = min(abs(seed), 1 << 31)
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _clips(folder: Path, recursive: bool = False) -> list[Path]:
    """The audio files of a reference folder (and below, `recursive`), by path."""
    if not folder.is_dir():
        return []
    found = folder.rglob("*") if recursive else folder.iterdir()
    return sorted(p for p in found if p.suffix in AUDIO_EXTENSIONS and p.is_file())


def _transcript(clip: Path) -> str:
    lab = clip.with_suffix(".lab")
    if not lab.is_file():
        raise FileNotFoundError(f"{clip}: no transcript {lab.name} beside it (a reference folder holds each clip's words in a .lab file of its name)")
    return lab.read_text(encoding="utf-8")
