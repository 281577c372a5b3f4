"""Speech tokens -> waveform: the flow then the vocoder, as upstream's `CosyVoice2Model` /
`CosyVoice3Model.token2wav` run them, offline and streamed.

Offline: the flow on all tokens (full attention), the mel stretched by `speed` (linear
interpolation to `int(T / speed)` frames), the vocoder on it.

Streamed (`Token2WavStream`): each chunk runs the flow on every token so far (chunk-causal
attention, the last 3 tokens as look-ahead) and keeps the frames after `token_offset`; the last
chunk runs the flow with full attention on all tokens, as upstream's final call does.
- v2 keeps a vocoder cache: the last 8 mel frames and 3840 source samples go in front of the next
  chunk's mel and source (the source's start overwritten), and the last 3840 samples are held back
  and cross-faded (Hamming window, in float64 as upstream's numpy window makes it) into the next
  chunk. The vocoder draws its source noise on every call (one generator for the whole stream).
- v3 vocodes the whole mel so far on each chunk (`finalize=False` until the last) and returns the
  samples past those already returned.

`HopSchedule` is upstream's chunking of a stream: the first chunk covers `hop` tokens plus what
rounds the prompt's tokens up to a multiple of `hop`, each chunk needs `hop` + 3 (look-ahead)
tokens, and the hop doubles after each chunk up to 4x its start (25 -> 50 -> 100). Upstream keeps
the grown hop on its model object, so a later stream on the same object starts at the hop the
previous ones reached (up to 100); a stream's start is `HopSchedule(hop=...)`, 25 a freshly loaded
upstream's.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

from koe.engines.cosyvoice.config import CosyVoiceConfig
from koe.engines.cosyvoice.flow import Flow, FlowConfig, load_flow
from koe.engines.cosyvoice.hift import HiFT, HiFTConfig, hift_tables, load_hift, v3_draws_before_source
from koe.runtime.weights import checkpoint_tensors

__all__ = ["HopSchedule", "Token2Wav", "Token2WavStream", "fade_in_out", "load_folder", "load_token2wav"]

MEL_CACHE = 8  # v2: mel frames carried into the next chunk
TOKEN_HOP = 25


def fade_in_out(fade_in: torch.Tensor, fade_out: torch.Tensor, window: torch.Tensor) -> torch.Tensor:
    """`fade_in` with its first n samples cross-faded from the last n of `fade_out` (window (2n,),
    float64: the sum is formed in float64 and stored in fade_in's dtype, as upstream's numpy window makes it)."""
    n = window.shape[0] // 2
    out = fade_in.clone()
    out[..., :n] = fade_in[..., :n] * window[:n] + fade_out[..., -n:] * window[n:]
    return out


@dataclass
class HopSchedule:
    """Upstream's stream chunking (CosyVoice2Model.tts): which tokens each chunk decodes."""

    prompt_tokens: int
    hop: int = TOKEN_HOP
    look_ahead: int = 3
    max_hop: int = 4 * TOKEN_HOP
    scale: int = 2
    offset: int = 0
    pad: int = field(init=False)

    def __post_init__(self) -> None:
        self.pad = int(np.ceil(self.prompt_tokens / self.hop) * self.hop - self.prompt_tokens)

    def this_hop(self) -> int:
        return self.hop + self.pad if self.offset == 0 else self.hop

    def ready(self, tokens: int) -> bool:
        """Whether `tokens` generated so far make the next chunk."""
        return tokens - self.offset >= self.this_hop() + self.look_ahead

    def take(self) -> tuple[int, int]:
        """The next chunk: (tokens it decodes, its token offset); advances the schedule."""
        hop = self.this_hop()
        end, offset = self.offset + hop + self.look_ahead, self.offset
        self.offset += hop
        self.hop = min(self.max_hop, self.hop * self.scale)
        return end, offset


def load_token2wav(flow_state: dict[str, torch.Tensor], hift_state: dict[str, torch.Tensor], flow_config: FlowConfig, hift_config: HiFTConfig) -> Token2Wav:
    """The flow and the vocoder from `flow.pt` and `hift.pt`'s state dicts (strictly), v3's source
    tables replayed from the flow's and the vocoder's configs as upstream's build draws them."""
    tables = None
    if hift_config.causal:
        c = flow_config
        tables = hift_tables(v3_draws_before_source(c.vocab_size, c.input_size, c.spk_embed_dim, c.output_size, hift_config))
    return Token2Wav(load_flow(flow_state, flow_config), load_hift(hift_state, hift_config, tables))


def load_folder(folder: str | Path, config: CosyVoiceConfig) -> Token2Wav:
    """The flow and the vocoder of a released folder (`flow.pt`, `hift.pt`, read with
    `weights_only=True`, memory-mapped) for its parsed yaml (`koe.engines.cosyvoice.config`)."""
    folder = Path(folder)
    states = []
    for name in ("flow.pt", "hift.pt"):
        path = folder / name
        if not path.is_file():
            raise FileNotFoundError(f"{path}: missing (a CosyVoice release folder has {name})")
        states.append(dict(checkpoint_tensors(path)))
    flow = FlowConfig.from_yaml(config.flow, config.version)
    hift = HiFTConfig.from_yaml(config.hift, causal=config.version == 3)
    return load_token2wav(states[0], states[1], flow, hift)


class Token2Wav:
    """The flow and the vocoder of one release (v2 or v3)."""

    def __init__(self, flow: Flow, hift: HiFT) -> None:
        self.flow, self.hift = flow, hift
        self.version = flow.config.version
        if (self.version == 3) != hift.config.causal:
            raise ValueError("the flow and the vocoder are of different CosyVoice versions")

    @property
    def token_mel_ratio(self) -> int:
        return self.flow.config.token_mel_ratio

    @torch.inference_mode()
    def offline(
        self,
        tokens: torch.Tensor,
        prompt_token: torch.Tensor,
        prompt_feat: torch.Tensor,
        embedding: torch.Tensor,
        speed: float = 1.0,
        generator: torch.Generator | None = None,
    ) -> torch.Tensor:
        """All tokens (1, N) at once -> audio (1, samples)."""
        mel = self.flow.inference(tokens, prompt_token, prompt_feat, embedding, streaming=False, finalize=True)
        if speed != 1.0:
            mel = F.interpolate(mel, size=int(mel.shape[2] / speed), mode="linear")
        audio, _ = self.hift.inference(mel, generator=generator)
        return audio

    def stream(
        self, prompt_token: torch.Tensor, prompt_feat: torch.Tensor, embedding: torch.Tensor, generator: torch.Generator | None = None
    ) -> Token2WavStream:
        """A streamed utterance in this voice (call its `chunk` with the tokens so far)."""
        return Token2WavStream(self, prompt_token, prompt_feat, embedding, generator)


class Token2WavStream:
    """One streamed utterance: `chunk(tokens, token_offset, finalize)` -> the new audio (1, samples)."""

    def __init__(
        self, owner: Token2Wav, prompt_token: torch.Tensor, prompt_feat: torch.Tensor, embedding: torch.Tensor, generator: torch.Generator | None
    ) -> None:
        self.owner = owner
        self.prompt = (prompt_token, prompt_feat, embedding)
        self.generator = generator
        self.mel: torch.Tensor | None = None  # v2: the last frames; v3: every frame so far
        self.source: torch.Tensor | None = None  # v2
        self.tail: torch.Tensor | None = None  # v2: the samples held back for the cross-fade
        self.samples_out = 0  # v3
        hop = owner.hift.config.upsample_scale
        self.window = torch.from_numpy(np.hamming(2 * MEL_CACHE * hop))

    @torch.inference_mode()
    def chunk(self, tokens: torch.Tensor, token_offset: int, finalize: bool = False) -> torch.Tensor:
        """tokens (1, n): every token so far (a chunk's end plus its 3 look-ahead tokens, or all of
        them when `finalize`); `token_offset`: the tokens earlier chunks covered."""
        owner = self.owner
        mel = owner.flow.inference(tokens, *self.prompt, streaming=not finalize, finalize=finalize)
        mel = mel[:, :, token_offset * owner.token_mel_ratio :]
        if owner.version == 3:
            mel = mel if self.mel is None else torch.concat([self.mel, mel], dim=2)
            self.mel = mel
            audio, _ = owner.hift.inference(mel, finalize=finalize)
            audio = audio[:, self.samples_out :]
            self.samples_out += audio.shape[1]
            return audio
        cache_source = None
        if self.mel is not None:
            mel = torch.concat([self.mel, mel], dim=2)
            cache_source = self.source
        audio, source = owner.hift.inference(mel, cache_source=cache_source, generator=self.generator)
        if self.tail is not None:
            audio = fade_in_out(audio, self.tail, self.window)
        if finalize:
            return audio
        keep = math.prod(self.window.shape) // 2
        self.mel, self.source, self.tail = mel[:, :, -MEL_CACHE:], source[:, :, -keep:], audio[:, -keep:]
        return audio[:, :-keep]
