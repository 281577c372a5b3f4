"""Turning a growing list of codec frames into audio as it is made.

Strategy: the one-shot decode cuts the frames into 300-frame chunks and decodes each with up to
25 frames of left context. `CodecStream` follows the same plan incrementally: when new frames
arrive it decodes from the start of the current chunk (with that chunk's left context) up to the
newest frame, and emits only the samples it has not emitted before. The codec is causal, so the
concatenated stream equals the one-shot waveform up to float32 rounding (the matrix shapes differ);
codes are the same by construction, since both come from the one decode core.
"""

from __future__ import annotations

import numpy as np
import torch

from koe.engines.qwen3_tts.codec import CHUNK_FRAMES, LEFT_CONTEXT_FRAMES


class CodecStream:
    """Incremental decoding of one utterance's frames.

    `prefix` frames (an ICL reference) are decoded as context but never emitted.
    """

    def __init__(self, codec, prefix: torch.Tensor | None = None) -> None:
        self.codec = codec
        self.samples_per_frame = int(codec.samples_per_frame)
        groups = codec.decoder.config.num_quantizers if hasattr(codec, "decoder") else None
        self.frames: list[torch.Tensor] = [] if prefix is None else list(prefix.to(codec.device).unbind(0))
        self.emitted = len(self.frames)  # frames whose samples were emitted (or skipped)
        self.groups = groups

    @property
    def pending(self) -> int:
        return len(self.frames) - self.emitted

    def push(self, codes: torch.Tensor) -> None:
        """Add frames (G,) or (T, G)."""
        codes = codes.to(self.codec.device)
        self.frames.extend(codes.unbind(0) if codes.dim() == 2 else [codes])

    def pending_codes(self) -> np.ndarray:
        """The pending frames' codes (n, G) int64, before `drain` emits them."""
        if not self.pending:
            return np.zeros((0, self.groups or 0), dtype=np.int64)
        return torch.stack(self.frames[self.emitted :]).cpu().numpy()

    @torch.inference_mode()
    def drain(self) -> torch.Tensor:
        """Decode every pending frame; returns their float32 samples (n * samples_per_frame,)."""
        pieces = []
        end = len(self.frames)
        while self.emitted < end:
            start = (self.emitted // CHUNK_FRAMES) * CHUNK_FRAMES
            stop = min(end, start + CHUNK_FRAMES)
            context = LEFT_CONTEXT_FRAMES if start - LEFT_CONTEXT_FRAMES > 0 else start
            window = torch.stack(self.frames[start - context : stop])[None]  # (1, T, G)
            wav = self.codec.decode_chunk(window, context)[0]  # samples of frames [start, stop)
            pieces.append(wav[(self.emitted - start) * self.samples_per_frame :])
            self.emitted = stop
        if not pieces:
            return torch.zeros(0)
        return torch.cat(pieces).float()
