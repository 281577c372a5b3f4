"""Turning a growing list of codec frames into audio as it is made.

Strategy: `CodecStream` collects pushed frames and, on `drain`, hands them to an
`IncrementalDecoder`, which decodes each frame once, with the state its past left behind (conv
histories, transposed-conv overlaps, a sliding-window KV cache). The codec is causal with no
look-ahead, so a frame's samples are final as soon as it is decoded, and the cost per frame is flat.
The decoder follows the one-shot plan (restart every 300 frames on 25 frames of left context), so the
concatenated stream equals the one-shot waveform up to float32 rounding; codes are the same by
construction, since both come from the one decode core.
"""

from __future__ import annotations

import numpy as np
import torch


class CodecStream:
    """Incremental decoding of one utterance's frames.

    `codec` is a `SpeechTokenizer` (or the opt-in modes' `FastCodec`, which offers the same
    `incremental_decoder`); `prefix` frames (T_p, G) (an ICL reference) are decoded as context but
    never emitted.
    """

    def __init__(self, codec, prefix: torch.Tensor | None = None) -> None:
        self.codec = codec
        self.samples_per_frame = int(codec.samples_per_frame)
        self.groups = int(codec.decoder.config.num_quantizers)
        self.decoder = codec.incremental_decoder(None if prefix is None else prefix.to(codec.device))
        self.frames: list[torch.Tensor] = []  # pushed, not yet drained: (G,) each

    @property
    def pending(self) -> int:
        return len(self.frames)

    def push(self, codes: torch.Tensor) -> None:
        """Add frames (G,) or (T, G)."""
        codes = codes.to(self.codec.device)
        self.frames.extend(codes.unbind(0) if codes.dim() == 2 else [codes])

    def pending_codes(self) -> np.ndarray:
        """The pending frames' codes (n, G) int64, before `drain` emits them."""
        if not self.pending:
            return np.zeros((0, self.groups), dtype=np.int64)
        return torch.stack(self.frames).cpu().numpy()

    @torch.inference_mode()
    def drain(self) -> torch.Tensor:
        """Decode every pending frame; returns their float32 samples (n * samples_per_frame,)."""
        if not self.frames:
            return torch.zeros(0)
        codes = torch.stack(self.frames)  # (n, G)
        self.frames = []
        return self.decoder.push(codes)
