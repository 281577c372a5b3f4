"""Rows that come and go: the decode core for streams that join a running batch (int8 / int4).

`decode_frames` runs one fixed batch from one prefill to its end. A server streaming to listeners
who arrive at different times wants a newcomer to join the batch at the next frame instead of
waiting for the others to finish, and a row that has finished to stop costing anything. Where the
talker steps in C (`koe.nn.kernel_stack`, the int8 and int4 modes) that is cheap: the C step and
the quantized products compute each row alone, so a row's values do not depend on which rows share
its steps, and its keys and values can be moved between caches without changing them.

`RowDecoder` keeps one `KernelCache` for the rows that are speaking. A row joins with its own
prompt, prefilled alone (its positions are those of a request on its own); its keys and values are
gathered into the shared cache, right-aligned (`KernelCache.gather`), at the next frame. Each
`step` draws every row's codebook-0 code from its own logits and history (the repetition penalty
and min_new_tokens are per row), completes the frames of the rows that go on with one batched code
predictor pass, and feeds them back with one C step; a row that drew end-of-speech or reached its
budget leaves at once and the cache is gathered again without it. Draws come from one generator in
row order (a row on its own draws exactly as `decode_frames` does), so with greedy settings a row's
codes are its codes alone, whenever it joined (tested).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from koe.engines.qwen3_tts.generate import (
    FRAMES_AHEAD,
    DecodeSettings,
    frame_embedding,
    predict_codebooks,
    prefill,
    trailing_input,
)
from koe.engines.qwen3_tts.prompt import TalkerInputs
from koe.engines.qwen3_tts.talker import Talker
from koe.nn.kernel_stack import KernelCache
from koe.runtime.sampling import draw, process_logits


@dataclass
class RowFrame:
    """What one row did in a step: a frame's codes (G,), or None when it ended (`eos`: by drawing
    end-of-speech; else it reached its frame budget or max_new_tokens)."""

    key: object
    codes: torch.Tensor | None
    eos: bool = False


@dataclass
class _Row:
    key: object
    inputs: TalkerInputs  # one row's prompt and trailing text
    limit: int  # frames it may make
    logits: torch.Tensor  # (1, V): what its next codebook-0 code is drawn from
    hidden: torch.Tensor  # (1, 1, C): the talker's last hidden state
    position: int  # rotary position of its next talker step
    history: torch.Tensor = field(default_factory=lambda: torch.zeros((1, 0), dtype=torch.long))
    frames: int = 0


class RowDecoder:
    """Frames for rows that join and leave between steps (see the module doc). Not thread-safe."""

    def __init__(self, talker: Talker, settings: DecodeSettings, generator: torch.Generator | None = None) -> None:
        if not self.supports(talker):
            raise ValueError("rows can join a running decode only where the talker steps in C (int8 / int4 on koe's kernels)")
        self.talker, self.settings, self.generator = talker, settings, generator
        vocab = talker.cfg.vocab_size
        self.eos = torch.tensor([settings.eos_id])
        self.suppress = torch.isin(torch.arange(vocab), torch.tensor(list(settings.suppress_ids), dtype=torch.long))
        self.rows: list[_Row] = []
        self.cache: KernelCache | None = None
        self._joining: list[tuple[_Row, KernelCache]] = []

    @staticmethod
    def supports(talker: Talker) -> bool:
        """Whether `talker` steps in C (the only stacks whose rows can be moved between caches)."""
        return talker.model.kernel is not None and talker.code_predictor.model.kernel is not None

    def __len__(self) -> int:
        return len(self.rows) + len(self._joining)

    @property
    def keys(self) -> list:
        return [r.key for r in self.rows] + [r.key for r, _ in self._joining]

    @torch.inference_mode()
    def add(self, key: object, inputs: TalkerInputs, limit: int) -> None:
        """A row with one prompt (`inputs` of one row, no padding) that may make `limit` frames;
        prefilled now, stepping from the next `step`."""
        if inputs.embeds.shape[0] != 1:
            raise ValueError(f"a row is one prompt; got {inputs.embeds.shape[0]}")
        first = prefill(self.talker, inputs)
        if not isinstance(first.cache, KernelCache):
            raise TypeError("this talker did not give a KernelCache for the prompt")
        length = inputs.embeds.shape[1]
        row = _Row(key, inputs, int(limit), first.logits[:, -1, :], first.hidden[:, -1:, :], length)
        self._joining.append((row, first.cache))

    def remove(self, key: object) -> None:
        """Drop a row (its listener went away); it takes no part in later steps."""
        self._joining = [(r, c) for r, c in self._joining if r.key != key]
        kept = [r for r in self.rows if r.key != key]
        if len(kept) != len(self.rows):
            self._regather(kept)

    @torch.inference_mode()
    def step(self) -> list[RowFrame]:
        """One frame for every row: its codes, or its end (see `RowFrame`), in row order."""
        if self._joining:
            self._regather(self.rows, self._joining)
            self._joining = []
        s = self.settings
        out, going, tokens = [], [], []
        for row in self.rows:  # codebook 0 of each row's next frame, drawn as decode_frames draws it
            scores = process_logits(row.logits.to(copy=True, dtype=torch.float32), row.history, s.talker, eos_ids=self.eos, suppress_mask=self.suppress)
            token = draw(scores, s.talker, self.generator)
            row.history = torch.cat([row.history, token[:, None]], dim=-1)
            made, eos = row.history.shape[1], int(token) == s.eos_id
            if eos or made > row.limit or made >= s.max_new_tokens:
                out.append(RowFrame(row.key, None, eos=eos))
                continue
            going.append(row)
            tokens.append(token)
        if len(going) != len(self.rows):
            self._regather(going)
        if not going:
            return out
        talker = self.talker
        token = torch.cat(tokens)
        code0_embed = talker.embed_codec(token[:, None])  # (n, 1, C)
        hidden = torch.cat([r.hidden for r in going])
        rest = predict_codebooks(talker.code_predictor, hidden, code0_embed, s.predictor, self.generator)
        codes = torch.cat([token[:, None], rest], dim=-1)  # (n, G)
        trailing = torch.cat([trailing_input(r.inputs, r.frames) for r in going])  # (n, 1, C)
        x = frame_embedding(talker, code0_embed, rest) + trailing
        positions = torch.tensor([r.position for r in going]).view(1, -1, 1).expand(3, -1, -1)
        hidden = talker.forward_hidden(x, positions, self.cache, None)
        logits = talker.codec_head(hidden)
        for i, row in enumerate(going):
            out.append(RowFrame(row.key, codes[i]))
            row.logits, row.hidden = logits[i : i + 1, -1, :], hidden[i : i + 1, -1:, :]
            row.frames += 1
            row.position += 1
        return out

    def _regather(self, rows: list[_Row], joining: list[tuple[_Row, KernelCache]] = ()) -> None:
        """The shared cache remade for `rows` (each at its place in the current one) and `joining`."""
        place = {id(r): i for i, r in enumerate(self.rows)}
        parts = [(self.cache, place[id(r)]) for r in rows] + [(c, 0) for _, c in joining]
        self.rows = list(rows) + [r for r, _ in joining]
        self.cache = KernelCache.gather(parts, ahead=FRAMES_AHEAD) if parts else None
