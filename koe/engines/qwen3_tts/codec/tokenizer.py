"""`SpeechTokenizer`: Qwen3-TTS's 12 Hz codec (encoder + decoder) loaded strictly from a folder."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch
from torch import nn

from koe.runtime.weights import WeightsError, build_from_weights

from .config import SpeechTokenizerConfig
from .decoder import SpeechDecoder
from .encoder import SpeechEncoder

__all__ = ["SpeechTokenizer", "SpeechTokenizerModel", "WeightsError"]


class SpeechTokenizerModel(nn.Module):
    """Holds `encoder` and `decoder` under the names the release's weights use."""

    def __init__(self, config: SpeechTokenizerConfig) -> None:
        super().__init__()
        self.encoder = SpeechEncoder(config.encoder)
        self.decoder = SpeechDecoder(config.decoder)


class SpeechTokenizer:
    """Qwen3-TTS 12 Hz speech tokenizer: codes (B, T, 16) <-> 24 kHz mono waveform.

    Codes are (frames, codebooks), as upstream's `audio_codes`; -1 marks padding in a batch.
    """

    def __init__(self, config: SpeechTokenizerConfig, model: SpeechTokenizerModel) -> None:
        self.config = config
        self.model = model.eval()

    @property
    def decoder(self) -> SpeechDecoder:
        return self.model.decoder

    @property
    def encoder(self) -> SpeechEncoder:
        return self.model.encoder

    @property
    def samples_per_frame(self) -> int:
        return self.config.decode_upsample_rate

    @property
    def sample_rate(self) -> int:
        return self.config.output_sample_rate

    @classmethod
    def from_folder(cls, path: str | Path, device: torch.device | str = "cpu", dtype: torch.dtype = torch.float32) -> SpeechTokenizer:
        """Load `config.json` and `model.safetensors` from `path` (a `speech_tokenizer/` folder)."""
        path = Path(path)
        config = SpeechTokenizerConfig.from_file(path / "config.json")
        weights = path / "model.safetensors"
        if not weights.exists():
            raise FileNotFoundError(f"{weights} not found")
        model = build_from_weights(lambda: SpeechTokenizerModel(config), [weights], dtype=dtype, device=device)
        return cls(config, model)

    # ------------------------------------------------------------------ decode
    @torch.inference_mode()
    def decode_padded(self, codes: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """codes (B, T, K) with -1 padding -> (waveforms (B, T * samples_per_frame), lengths (B,)).

        As upstream: a sample's length is (number of frames whose first code is not -1) times the
        frames' samples; -1 codes are decoded as 0 (in the batch, with the chunked decode).
        """
        if codes.dim() != 3:
            raise ValueError(f"codes must be (B, T, K), got shape {tuple(codes.shape)}")
        lengths = (codes[..., 0] > -1).sum(1) * self.config.decode_upsample_rate
        codes = torch.clamp(codes, min=0)
        wav = self.decoder.chunked_decode(codes.transpose(1, 2)).squeeze(1)  # (B, N)
        return wav, lengths

    def decode(self, codes: torch.Tensor | Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Decode to one float32 waveform per sample, trimmed to its length.

        `codes` is (B, T, K) (or (T, K)) with -1 padding, or a list of (T_i, K) tensors, which are
        right-padded with -1 into one batch exactly as upstream's `Qwen3TTSTokenizer.decode` does.
        """
        if isinstance(codes, torch.Tensor):
            batch = codes.unsqueeze(0) if codes.dim() == 2 else codes
        else:
            batch = torch.nn.utils.rnn.pad_sequence([c.long() for c in codes], batch_first=True, padding_value=-1)
        wav, lengths = self.decode_padded(batch.to(self.device))
        return [w[: int(n)].float() for w, n in zip(wav, lengths)]

    def incremental_decoder(self, prefix: torch.Tensor | None = None):
        """An `IncrementalDecoder` of this codec (streaming): `push` frames (T, K), get their samples.
        `prefix` frames (an ICL reference) are decoded as context and never emitted."""
        from .incremental import IncrementalDecoder

        return IncrementalDecoder(self.decoder, prefix=None if prefix is None else prefix.to(self.device))

    def decode_chunk(self, codes: torch.Tensor, left_context_frames: int) -> torch.Tensor:
        """codes (B, T, K), no padding: decode them all, return only the samples of frames after the
        first `left_context_frames` -> (B, (T - left_context_frames) * samples_per_frame).

        Upstream's one-shot decode is a sequence of these on windows of at most 25 + 300 frames
        (see `decoder.chunk_plan`); a streamer reproduces it bit for bit by decoding from the start of
        the current 300-frame chunk (with its left context) and emitting the samples not yet emitted.
        """
        with torch.inference_mode():
            return self.decoder.decode_chunk(codes.transpose(1, 2).to(self.device), left_context_frames).squeeze(1)

    # ------------------------------------------------------------------ encode
    @torch.inference_mode()
    def encode(self, wav: torch.Tensor, padding_mask: torch.Tensor | None = None) -> list[torch.Tensor]:
        """wav (B, N) float32 at 24 kHz (right-padded with zeros) -> codes, one (T_i, 16) per sample.

        The whole padded batch goes through the encoder (upstream passes no mask to it); each
        sample's codes are then cut to ceil(valid samples / 1920) frames.
        """
        if wav.dim() == 1:
            wav = wav.unsqueeze(0)
        if padding_mask is None:
            padding_mask = torch.ones_like(wav, dtype=torch.long)
        wav = wav.to(device=self.device, dtype=self.dtype)
        codes = self.encoder(wav.unsqueeze(1), self.config.encoder_valid_num_quantizers)  # (B, n_q, T)
        out = []
        for c, mask in zip(codes, padding_mask):
            frames = -(-int(mask.sum()) // self.config.encode_downsample_rate)
            out.append(c[..., :frames].transpose(0, 1))
        return out

    def encode_list(self, wavs: Sequence[torch.Tensor]) -> list[torch.Tensor]:
        """Encode 1-D 24 kHz waveforms, batched and right-padded with zeros as upstream does."""
        n = max(int(w.shape[-1]) for w in wavs)
        batch = torch.zeros(len(wavs), n, dtype=torch.float32)
        mask = torch.zeros(len(wavs), n, dtype=torch.long)
        for i, w in enumerate(wavs):
            batch[i, : w.shape[-1]] = w.float()
            mask[i, : w.shape[-1]] = 1
        return self.encode(batch, mask)

    @property
    def device(self) -> torch.device:
        return next(self.model.parameters()).device

    @property
    def dtype(self) -> torch.dtype:
        return next(self.model.parameters()).dtype
