"""Drop-in for upstream CosyVoice's `cosyvoice.cli.cosyvoice`: code written for `CosyVoice2`,
`CosyVoice3` and `AutoModel` runs unchanged on koe.

`CosyVoice2(model_dir)`, `CosyVoice3(model_dir)`, `AutoModel(model_dir=...)`; `inference_zero_shot`,
`inference_cross_lingual`, `inference_instruct2`, `inference_vc`, `inference_sft`, generators of
`{"tts_speech": tensor (1, samples)}` as upstream yields them (one per text piece offline, chunks
with `stream=True`); `tts_text` may be a generator of strings (streamed text, as from an LLM);
`add_zero_shot_spk` / `list_available_spks` / `save_spkinfo` (upstream's `spk2info.pt`);
`sample_rate`. Like upstream it draws from torch's global generator, so `torch.manual_seed(N)`
before a call gives upstream's samples, and, like upstream, a stream starts at the hop the
previous stream on the same object grew to (25, then 50, up to 100).

Streamed text (a generator of strings, as an LLM writes them) is not normalised or split, as
upstream skips its front end for it; each string is tokenized as it arrives. CosyVoice 3 reads
its system prompt from the prompt text there (its `<|endofprompt|>` must be in `prompt_text` or
`instruct_text`), so v3's cross-lingual mode, which has no prompt text, cannot take streamed text:
upstream's LM thread fails on it (and its stream then waits forever); koe raises a ValueError.

Speakers: `add_zero_shot_spk(prompt_text, prompt_wav, id)` keeps upstream's entry (the prompt's
text ids, speech tokens, mel and embedding); `zero_shot_spk_id=id` then stands in for the prompt
clip (and its text) in `inference_zero_shot`, `inference_cross_lingual` and `inference_instruct2`
(whose `instruct_text` upstream then ignores: the saved prompt text is used). `save_spkinfo()`
writes `spk2info.pt` into the model folder, which upstream loads (`torch.load(weights_only=True)`);
a release's own `spk2info.pt` (SFT speakers: `{name: {"embedding": (1, 192)}}`) is read at load,
for `inference_sft(text, name)`.

Bad input gets a clear error before any audio, where upstream asserts or fails deep inside: v3
text without `<|endofprompt|>` (ValueError naming it), a clip over 30 s or under 16 kHz
(`ClipError`, a ValueError), a missing clip (ValueError; FileNotFoundError for a path that is not
there), an unknown speaker (`UnknownSpeakerError`, a KeyError as upstream's), an SFT speaker as
`zero_shot_spk_id` or a saved prompt in `inference_sft` (ValueError naming the right call),
`speed` with `stream=True` (ValueError, upstream's rule), streamed pieces that are not strings
(TypeError). Text upstream's front end cannot normalise (a blank line between paragraphs makes
wetext's English normaliser raise) is normalised paragraph by paragraph
(`koe.engines.cosyvoice.text`).

`model_dir` is a local folder, a store name or a hub id (koe's resolver: the store, the Hugging
Face cache, a download on first use). `load_jit`, `load_trt`, `load_vllm`, `fp16` and
`trt_concurrent` are accepted and ignored, as upstream ignores them without CUDA; the 300M v1
releases (`cosyvoice.yaml`) are not supported by koe yet.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from typing import Any

import soundfile as sf
import torch

from koe.engines.cosyvoice.frontend import Prompt
from koe.engines.cosyvoice.model import CosyVoiceModel
from koe.engines.cosyvoice.token2wav import TOKEN_HOP

__all__ = ["AutoModel", "CosyVoice2", "CosyVoice3", "UnknownSpeakerError"]

_VERSIONS = {"cosyvoice2.yaml": 2, "cosyvoice3.yaml": 3}


def _folder(model_dir: str | os.PathLike) -> str:
    from koe.service.store.resolve import model_folder

    folder = model_folder(model_dir)
    if not folder.is_dir():
        raise FileNotFoundError(f"{folder}: no such model folder (a released CosyVoice 2 or 3 folder, a store name or a hub id)")
    return str(folder)


class UnknownSpeakerError(KeyError):
    """A speaker id the model does not hold (a KeyError, as upstream's table lookup raises)."""

    def __str__(self) -> str:
        return str(self.args[0])


_ZERO_SHOT_KEYS = ("prompt_text", "llm_prompt_speech_token", "flow_prompt_speech_token", "prompt_speech_feat", "llm_embedding", "flow_embedding")


def _clip(wav: Any, what: str = "prompt_wav") -> tuple[Any, int]:
    """A clip as upstream's `load_wav` reads it (a path or file object): float32 samples, its rate."""
    if wav is None or (isinstance(wav, str | os.PathLike) and not str(wav)):
        raise ValueError(f"{what} is needed: a path or file object of a clip (16 kHz or more, at most 30 s)")
    if isinstance(wav, str | os.PathLike) and not os.path.isfile(wav):
        raise FileNotFoundError(f"{what}: no such file {str(wav)!r}")
    try:
        samples, rate = sf.read(wav, dtype="float32")
    except sf.LibsndfileError as e:
        raise ValueError(f"{what}: cannot read {wav!r} as audio ({e})") from e
    return samples, int(rate)


class CosyVoice2:
    """Upstream's `CosyVoice2` on koe's CosyVoice core."""

    _version = 2

    def __init__(
        self, model_dir: str | os.PathLike, load_jit: bool = False, load_trt: bool = False, load_vllm: bool = False, fp16: bool = False, trt_concurrent: int = 1
    ):
        self.model_dir = _folder(model_dir)
        yaml = f"cosyvoice{self._version}.yaml"
        if not os.path.exists(os.path.join(self.model_dir, yaml)):
            raise ValueError(f"{os.path.join(self.model_dir, yaml)} not found!")
        self.fp16 = False
        self.core = CosyVoiceModel.load(self.model_dir)
        self.sample_rate = self.core.sample_rate
        self.spk2info: dict[str, dict[str, torch.Tensor]] = dict(self.core.speakers)
        self._hop = TOKEN_HOP

    # -- speakers ------------------------------------------------------------------------------------

    def list_available_spks(self) -> list[str]:
        return list(self.spk2info)

    def add_zero_shot_spk(self, prompt_text: str, prompt_wav: Any, zero_shot_spk_id: str) -> bool:
        if zero_shot_spk_id == "":
            raise ValueError("do not use empty zero_shot_spk_id")
        inputs = self.core.inputs.zero_shot("", prompt_text, self._prompt(prompt_wav))
        del inputs["text"], inputs["text_len"]
        self.spk2info[zero_shot_spk_id] = inputs
        return True

    def save_spkinfo(self) -> None:
        torch.save(self.spk2info, os.path.join(self.model_dir, "spk2info.pt"))

    # -- inference -----------------------------------------------------------------------------------

    def inference_sft(self, tts_text, spk_id: str, stream: bool = False, speed: float = 1.0, text_frontend: bool = True) -> Iterator[dict]:
        speaker = self._speaker(spk_id)
        if "embedding" not in speaker:
            raise ValueError(
                f"speaker {spk_id!r} was saved by add_zero_shot_spk (a prompt, not an SFT speaker's embedding): "
                f"speak with inference_zero_shot(text, '', '', zero_shot_spk_id={spk_id!r})"
            )
        embedding = speaker["embedding"]
        for piece in self.core.pieces(tts_text, text_frontend):
            ids, ids_len = self.core.inputs.text_token(piece)
            yield from self._tts({"text": ids, "text_len": ids_len, "llm_embedding": embedding, "flow_embedding": embedding}, stream, speed)

    def inference_zero_shot(
        self, tts_text, prompt_text: str, prompt_wav: Any, zero_shot_spk_id: str = "", stream: bool = False, speed: float = 1.0, text_frontend: bool = True
    ) -> Iterator[dict]:
        prompt_text = self.core.text.normalize(prompt_text, split=False, text_frontend=text_frontend)
        prompt = self._voice(prompt_wav, zero_shot_spk_id)
        for piece in self.core.pieces(tts_text, text_frontend):
            yield from self._tts(self._zero_shot(piece, prompt_text, prompt, zero_shot_spk_id), stream, speed)

    def inference_cross_lingual(
        self, tts_text, prompt_wav: Any, zero_shot_spk_id: str = "", stream: bool = False, speed: float = 1.0, text_frontend: bool = True
    ) -> Iterator[dict]:
        prompt = self._voice(prompt_wav, zero_shot_spk_id)
        for piece in self.core.pieces(tts_text, text_frontend):
            inputs = self._zero_shot(piece, "", prompt, zero_shot_spk_id)
            for key in ("prompt_text", "prompt_text_len", "llm_prompt_speech_token", "llm_prompt_speech_token_len"):
                del inputs[key]
            yield from self._tts(inputs, stream, speed)

    def inference_instruct(self, *args: Any, **kwargs: Any) -> Iterator[dict]:
        raise NotImplementedError("inference_instruct is only implemented for CosyVoice (v1); use inference_instruct2")

    def inference_instruct2(
        self, tts_text, instruct_text: str, prompt_wav: Any, zero_shot_spk_id: str = "", stream: bool = False, speed: float = 1.0, text_frontend: bool = True
    ) -> Iterator[dict]:
        prompt = self._voice(prompt_wav, zero_shot_spk_id)
        for piece in self.core.pieces(tts_text, text_frontend):
            inputs = self._zero_shot(piece, instruct_text, prompt, zero_shot_spk_id)
            del inputs["llm_prompt_speech_token"], inputs["llm_prompt_speech_token_len"]
            yield from self._tts(inputs, stream, speed)

    def inference_vc(self, source_wav: Any, prompt_wav: Any, stream: bool = False, speed: float = 1.0) -> Iterator[dict]:
        source, rate = _clip(source_wav, "source_wav")
        inputs = self.core.inputs.convert(source, rate, self._prompt(prompt_wav, trim=False))
        yield from self._tts(inputs, stream, speed)

    # -- the parts -----------------------------------------------------------------------------------

    def _prompt(self, wav: Any, trim: bool = True) -> Prompt:
        samples, rate = _clip(wav)
        return self.core.inputs.prompt(samples, rate, trim=trim)

    def _speaker(self, spk_id: str) -> dict[str, torch.Tensor]:
        if spk_id not in self.spk2info:
            known = ", ".join(map(repr, self.spk2info)) or "none (add one with add_zero_shot_spk)"
            raise UnknownSpeakerError(f"unknown speaker {spk_id!r}; this model's speakers: {known}")
        return self.spk2info[spk_id]

    def _voice(self, prompt_wav: Any, spk_id: str) -> Prompt | None:
        """The prompt clip's features, or None where a saved zero-shot speaker stands in for it."""
        if not spk_id:
            return self._prompt(prompt_wav)
        missing = [k for k in _ZERO_SHOT_KEYS if k not in self._speaker(spk_id)]
        if missing:
            kind = "an SFT speaker (an embedding only): speak with inference_sft" if "embedding" in self.spk2info[spk_id] else "not a saved prompt"
            raise ValueError(f"speaker {spk_id!r} is {kind}; zero_shot_spk_id takes a speaker add_zero_shot_spk saved (it lacks {', '.join(missing)})")
        return None

    def _zero_shot(self, piece: str | Iterable[str], prompt_text: str, prompt: Prompt | None, spk_id: str) -> dict:
        if prompt is not None:
            return self.core.inputs.zero_shot(piece, prompt_text, prompt)
        ids, ids_len = self.core.inputs.text_token(piece)
        return {**self._speaker(spk_id), "text": ids, "text_len": ids_len}

    def _tts(self, inputs: dict, stream: bool, speed: float) -> Iterator[dict]:
        schedule = self.core.schedule(inputs, self._hop)
        try:
            for speech in self.core.tts(inputs, stream=stream, speed=speed, schedule=schedule):
                yield {"tts_speech": speech}
        finally:
            self._hop = schedule.hop  # upstream keeps the grown hop for the next stream


class CosyVoice3(CosyVoice2):
    """Upstream's `CosyVoice3` on koe's CosyVoice core (no `load_jit` argument, as upstream's)."""

    _version = 3

    def __init__(self, model_dir: str | os.PathLike, load_trt: bool = False, load_vllm: bool = False, fp16: bool = False, trt_concurrent: int = 1):
        super().__init__(model_dir)


def AutoModel(**kwargs: Any) -> CosyVoice2:  # noqa: N802 - upstream's name
    """`CosyVoice2` or `CosyVoice3`, by the yaml the folder holds."""
    folder = _folder(kwargs["model_dir"])
    kwargs["model_dir"] = folder
    if os.path.exists(os.path.join(folder, "cosyvoice.yaml")):
        raise NotImplementedError(f"{folder}: the CosyVoice 300M (v1) releases are not supported by koe yet")
    for yaml, version in _VERSIONS.items():
        if os.path.exists(os.path.join(folder, yaml)):
            return (CosyVoice2 if version == 2 else CosyVoice3)(**kwargs)
    raise TypeError("No valid model type found!")
