"""One CosyVoice 2/3 release, loaded whole, and upstream's inference loop over it.

`CosyVoiceModel.load(folder)` reads every part of a released folder (the yaml, `CosyVoice-BlankEN/`,
`llm.pt`, `flow.pt`, `hift.pt`, `campplus.onnx`, `speech_tokenizer_v<2|3>.onnx`, and `spk2info.pt`
where the release has one). `tts(inputs)` is upstream's `CosyVoice2Model` / `CosyVoice3Model.tts`:
the input dicts `InputFrontEnd` makes (zero-shot, cross-lingual, instruct, conversion, a saved
speaker's), the LM's tokens (or the source's, for conversion; v3 keeps at most 5 silent tokens in
a row), then tokens -> audio, offline or streamed with upstream's growing hop (`HopSchedule`).

Draws: the LM's sampling and v2's vocoder noise come from `generator` (torch's global generator
when None, as upstream's do), in upstream's offline order: every LM draw, then the vocoder's. A
stream runs the LM and the chunks in one thread, so its draws interleave the same way every run
(upstream's v2 stream races them across two threads; v3's vocoder draws nothing).

Text given as pieces (an iterable of strings, as an LLM streams it) is tokenized piece by piece and
fed to the LM one id at a time, as upstream's front end feeds its generator input
(`generate_tokens_streamed`).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from pathlib import Path

import torch

from koe.engines.cosyvoice.config import CosyVoiceConfig, QwenConfig, read_config
from koe.engines.cosyvoice.frontend import InputFrontEnd
from koe.engines.cosyvoice.llm import SpeechLM, TokenLimits, generate_tokens, generate_tokens_streamed, keep_silences_short, load_lm
from koe.engines.cosyvoice.text import FrontEnd, Normalizers
from koe.engines.cosyvoice.token2wav import TOKEN_HOP, HopSchedule, Token2Wav, load_folder

__all__ = ["CosyVoiceModel"]

_EMPTY_IDS = torch.zeros(1, 0, dtype=torch.int32)


class CosyVoiceModel:
    """A loaded release: `inputs` (the front end: text ids, prompt clips), `text` (normalising and
    splitting), `lm`, `token2wav` (flow + vocoder), `speakers` (`spk2info.pt`'s entries, or empty)."""

    def __init__(
        self,
        folder: Path,
        config: CosyVoiceConfig,
        qwen: QwenConfig,
        inputs: InputFrontEnd,
        text: FrontEnd,
        lm: SpeechLM,
        token2wav: Token2Wav,
        speakers: dict[str, dict[str, torch.Tensor]],
    ) -> None:
        self.folder, self.config, self.qwen = folder, config, qwen
        self.inputs, self.text, self.lm, self.token2wav, self.speakers = inputs, text, lm, token2wav, speakers

    @classmethod
    def load(cls, folder: str | Path, precision: str | None = None, normalizers: Normalizers | None = None) -> CosyVoiceModel:
        """Every part of a released folder, strictly (`precision`: the LM's, see `load_lm`;
        `normalizers`: the text front end's, by default those installed)."""
        folder = Path(folder)
        config, qwen = read_config(folder)
        inputs = InputFrontEnd.from_folder(folder)
        text = FrontEnd(inputs.tokenizer, Normalizers.installed() if normalizers is None else normalizers)
        lm = load_lm(folder, config.lm, qwen, precision)
        token2wav = load_folder(folder, config)
        return cls(folder, config, qwen, inputs, text, lm, token2wav, read_speakers(folder / "spk2info.pt"))

    @property
    def version(self) -> int:
        return self.config.version

    @property
    def sample_rate(self) -> int:
        return self.config.sample_rate

    def pieces(self, text: str | Iterable[str], text_frontend: bool = True) -> list:
        """What upstream speaks one after another for `text`: its `text_normalize(split=True)`
        pieces; text arriving in pieces (not a string) is one piece, as it comes."""
        if not isinstance(text, str):
            return [text]
        return self.text.normalize(text, split=True, text_frontend=text_frontend)

    # -- tokens ---------------------------------------------------------------------------------------

    def text_pieces(self, pieces: Iterable[str]) -> Iterator[torch.Tensor]:
        """Streamed text as the LM takes it: each piece tokenized, then one id (1, 1) at a time."""
        for piece in pieces:
            if not isinstance(piece, str):
                raise TypeError(f"streamed text must be strings, got {type(piece).__name__}")
            ids = self.inputs.tokenizer.encode(piece)
            for i in ids:
                yield torch.tensor([[i]], dtype=torch.int32)

    def tokens(self, inputs: dict, generator: torch.Generator | None = None) -> Iterator[int]:
        """The speech tokens of one input dict, as upstream's model queues them: the source's for
        conversion, else the LM's (`inputs["text"]` ids (1, N), or an iterable of strings for
        streamed text), v3's long silences cut. Closing it stops the LM."""
        source = inputs.get("source_speech_token")
        if source is not None and source.shape[1]:
            yield from source.flatten().tolist()
            return
        prompt_text = inputs.get("prompt_text", _EMPTY_IDS)
        prompt_speech = inputs.get("llm_prompt_speech_token", _EMPTY_IDS)
        text = inputs["text"]
        if isinstance(text, torch.Tensor):
            made = generate_tokens(self.lm, text, prompt_text, prompt_speech, TokenLimits(), generator)
        else:
            made = generate_tokens_streamed(self.lm, self.text_pieces(text), prompt_text, prompt_speech, generator)
        try:
            yield from keep_silences_short(made, self.version)
        finally:
            made.close()

    # -- audio ----------------------------------------------------------------------------------------

    @staticmethod
    def _flow_prompt(inputs: dict) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        return inputs.get("flow_prompt_speech_token", _EMPTY_IDS), inputs.get("prompt_speech_feat", torch.zeros(1, 0, 80)), inputs["flow_embedding"]

    def offline(self, tokens: list[int], inputs: dict, speed: float = 1.0, generator: torch.Generator | None = None) -> torch.Tensor:
        """All tokens at once -> audio (1, samples) (upstream's non-streamed `tts`). No tokens (the LM
        may end at once: v3 can give its end id first) make no samples (upstream's vocoder fails there)."""
        if not tokens:
            return torch.zeros(1, 0)
        ids = torch.tensor([tokens], dtype=torch.int32).reshape(1, -1)
        return self.token2wav.offline(ids, *self._flow_prompt(inputs), speed=speed, generator=generator)

    def schedule(self, inputs: dict, hop: int = TOKEN_HOP) -> HopSchedule:
        """A stream's chunking for these inputs, its hop starting at `hop` (25: a freshly loaded upstream's)."""
        return HopSchedule(self._flow_prompt(inputs)[0].shape[1], hop=hop)

    def stream(
        self, tokens: Iterable[int], inputs: dict, schedule: HopSchedule | None = None, generator: torch.Generator | None = None
    ) -> Iterator[torch.Tensor]:
        """Audio chunks (1, samples) as the tokens come, on upstream's hop schedule (`schedule`, by
        default a fresh one; it holds the grown hop after); the last chunk after the last token."""
        prompt = self._flow_prompt(inputs)
        stream = self.token2wav.stream(*prompt, generator=generator)
        schedule = self.schedule(inputs) if schedule is None else schedule
        made: list[int] = []
        for token in tokens:
            made.append(token)
            while schedule.ready(len(made)):
                end, offset = schedule.take()
                yield stream.chunk(torch.tensor([made[:end]], dtype=torch.int32), offset)
        if made:
            yield stream.chunk(torch.tensor([made], dtype=torch.int32).reshape(1, -1), schedule.offset, finalize=True)
        else:
            yield torch.zeros(1, 0)

    def tts(
        self, inputs: dict, stream: bool = False, speed: float = 1.0, schedule: HopSchedule | None = None, generator: torch.Generator | None = None
    ) -> Iterator[torch.Tensor]:
        """Upstream's `model.tts(**inputs, stream=..., speed=...)`: audio (1, samples) float32, one
        tensor offline, chunks when streamed (`speed` only offline, as upstream asserts)."""
        if stream and speed != 1.0:
            raise ValueError("speed changes only offline synthesis (upstream's rule): stream at speed 1.0")
        tokens = self.tokens(inputs, generator)
        if stream:
            yield from self.stream(tokens, inputs, schedule, generator)
        else:
            yield self.offline(list(tokens), inputs, speed, generator)


def read_speakers(path: Path) -> dict[str, dict[str, torch.Tensor]]:
    """`spk2info.pt` (weights only): speaker name -> upstream's saved inputs (an SFT release's
    `embedding`, or what `add_zero_shot_spk` saved); empty when the release has none."""
    if not path.is_file():
        return {}
    raw = torch.load(path, map_location="cpu", weights_only=True)
    if not isinstance(raw, dict) or not all(isinstance(k, str) and isinstance(v, dict) for k, v in raw.items()):
        raise ValueError(f"{path}: not a CosyVoice speaker table (a dict of speaker name -> dict of tensors)")
    return raw
