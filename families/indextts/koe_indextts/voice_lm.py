"""IndexTTS's speech language model: conditioning latents, text and mel codes through one GPT.

The sequence is `[32 conditioning latents | start_text, text…, stop_text | start_mel, codes…]`;
text and mel tokens each get learned positions counted from 0. `gpt.pth`'s names: `text_embedding`,
`mel_embedding`, `text_pos_embedding.emb`, `mel_pos_embedding.emb`, `gpt.h.*`, `gpt.ln_f`,
`final_norm`, `text_head`, `mel_head`, and the conditioning encoders'.

Release 2.5 (`CampPlusSpeechLM`, upstream's `UnifiedVoice(..., spk_cond_mode="campplus")`) conditions
on one row projected from the clip's CAM++ embedding instead of 32 perceiver latents, and adds a
language embedding to the text's.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any

import torch
from torch import nn

from koe.nn.rows import with_fewest_rows
from koe_indextts.gpt import GPT2, KVCache, PositionEmbedding
from koe_indextts.text25 import LANGUAGES, language_id  # 2.5's language table: `lang_embedding` has one row more

__all__ = ["LANGUAGES", "CampPlusSpeechLM", "EmotionSpeechLM", "GPTConfig", "SpeechLM", "language_id", "load_campplus_lm"]


@dataclass(frozen=True)
class GPTConfig:
    """The `gpt:` section of a release's `config.yaml` (upstream's argument names)."""

    model_dim: int = 1280
    layers: int = 24
    heads: int = 20
    max_text_tokens: int = 600
    max_mel_tokens: int = 800
    max_conditioning_inputs: int = 1
    mel_length_compression: int = 1024
    number_text_tokens: int = 12000
    number_mel_codes: int = 8194
    start_text_token: int = 0
    stop_text_token: int = 1
    start_mel_token: int = 8192
    stop_mel_token: int = 8193
    types: int = 1
    condition_num_latent: int = 32
    condition_type: str = "conformer_perceiver"
    condition_module: dict[str, Any] = field(default_factory=dict)
    emo_condition_module: dict[str, Any] = field(default_factory=dict)

    @classmethod
    def from_dict(cls, section: dict[str, Any]) -> GPTConfig:
        known = {f.name for f in fields(cls)}
        cfg = cls(**{k: v for k, v in section.items() if k in known})
        if cfg.model_dim % cfg.heads:
            raise ValueError(f"gpt.model_dim {cfg.model_dim} is not a multiple of gpt.heads {cfg.heads}")
        if not section.get("use_mel_codes_as_input", True) or section.get("train_solo_embeddings", False):
            raise ValueError("gpt: only use_mel_codes_as_input=true and train_solo_embeddings=false, as released, are supported")
        return cfg

    @property
    def text_positions(self) -> int:
        return self.max_text_tokens + 2

    @property
    def mel_positions(self) -> int:
        return self.max_mel_tokens + 2 + self.max_conditioning_inputs


class SpeechLM(nn.Module):
    """Embeddings, the GPT and the heads; the speech conditioning comes in as latents."""

    def __init__(self, cfg: GPTConfig):
        super().__init__()
        self.cfg = cfg
        d = cfg.model_dim
        self.text_embedding = nn.Embedding(cfg.number_text_tokens * cfg.types + 1, d)
        self.mel_embedding = nn.Embedding(cfg.number_mel_codes, d)
        self.gpt = GPT2(d, cfg.layers, cfg.heads)
        self.mel_pos_embedding = PositionEmbedding(cfg.mel_positions, d)
        self.text_pos_embedding = PositionEmbedding(cfg.text_positions, d)
        self.final_norm = nn.LayerNorm(d)
        self.text_head = nn.Linear(d, cfg.number_text_tokens * cfg.types + 1)
        self.mel_head = nn.Linear(d, cfg.number_mel_codes)

    def text_embeddings(self, text: torch.Tensor, language: int | None = None) -> torch.Tensor:
        """(n,) text ids without start/stop → (n + 2, d): start, text, stop, each with its position.
        `language`: a language id, for a release with a language embedding (2.5)."""
        if language is not None:
            raise ValueError("this release's GPT has no language embedding")
        cfg = self.cfg
        ids = torch.cat([text.new_tensor([cfg.start_text_token]), text.long(), text.new_tensor([cfg.stop_text_token])])
        return self.text_embedding(ids) + self.text_pos_embedding(0, ids.numel())

    def mel_embeddings(self, codes: torch.Tensor, start: int) -> torch.Tensor:
        """(rows, n) mel codes at mel positions start… → (rows, n, d)."""
        return self.mel_embedding(codes) + self.mel_pos_embedding(start, codes.shape[-1])

    def prompt_padding(self, text: torch.Tensor) -> int:
        """How many start/stop text ids `text` holds: upstream's generation drops them and pads its
        prompt on the left by as many zero rows, which attention masks out."""
        cfg = self.cfg
        return int(((text == cfg.start_text_token) | (text == cfg.stop_text_token)).sum())

    def prompt(self, conds: torch.Tensor, text: torch.Tensor, language: int | None = None) -> torch.Tensor:
        """(1, c, d) conditioning latents and (n,) text ids → (1, n + c + 3, d): the prompt up to start_mel.

        As upstream's generation does, start/stop text ids inside `text` are dropped (its latent pass
        keeps them) and as many zero rows go first (`prompt_padding`: the search masks them out)."""
        cfg = self.cfg
        kept = text[(text != cfg.start_text_token) & (text != cfg.stop_text_token)]
        start = self.mel_embeddings(text.new_tensor([[self.cfg.start_mel_token]]).long(), 0)
        rows = [conds, self.text_embeddings(kept, language).unsqueeze(0), start]
        if kept.numel() < text.numel():
            rows.insert(0, conds.new_zeros(1, text.numel() - kept.numel(), conds.shape[-1]))
        return torch.cat(rows, dim=1)

    def logits(self, hidden: torch.Tensor) -> torch.Tensor:
        """The mel logits of prompt positions, (rows, d) → (rows, vocab), as upstream's head computes
        them over its whole prompt (every position of every beam: four rows or more).

        The head's product is taken over at least that many rows (`koe.nn.rows`: zero rows added,
        their logits dropped): measured on an AVX2-only AMD EPYC (MKL, `MKL_CBWR=AUTO,STRICT`), a float32 product
        of 1 to 3 rows sums each row in another order than one of 4 or more rows does, so the prompt's
        last row alone gave logits a last bit off upstream's (every hidden state before the head was
        upstream's bits); on the AVX-512 machines the row count never changes a row's bits."""
        return self.mel_head(with_fewest_rows(self.final_norm(hidden)))[: hidden.shape[0]]

    def step(self, embeddings: torch.Tensor, cache: KVCache) -> torch.Tensor:
        """The mel logits of the last position after `embeddings` enter the cache: (rows, vocab).

        The head runs over these rows only, as upstream's cached step does (one position per beam:
        a product of as few rows, which sums in the few-row order on the CPU that has one)."""
        hidden = self.gpt(embeddings, cache)
        return self.mel_head(self.final_norm(hidden[:, -1]))

    def latent(self, conds: torch.Tensor, text: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
        """What the vocoder reads: the final-normed hidden states at the codes' positions, (1, n, d).

        Upstream's forward with `return_latent`: the codes are framed by start_mel and stop_mel (the
        two extra positions are dropped again); one pass over the whole sequence."""
        cfg = self.cfg
        framed = torch.cat([codes.new_tensor([cfg.start_mel_token]), codes.long(), codes.new_tensor([cfg.stop_mel_token])])
        emb = torch.cat([conds, self.text_embeddings(text).unsqueeze(0), self.mel_embeddings(framed.unsqueeze(0), 0)], dim=1)
        hidden = self.final_norm(self.gpt(emb))
        return hidden[:, -framed.numel() :][:, :-2]


class EmotionSpeechLM(SpeechLM):
    """Release 2's speech LM: the same GPT, its conditioning latents shifted by an emotion vector and
    followed by two speed embeddings (`speed_emb`: row 1, then row 0); the emotion vector is the
    emotion perceiver's 1024-d latent through `emovec_layer` and `emo_layer`."""

    EMOTION_WIDTH = 1024  # the emotion perceiver's latent width (upstream's fixed size)

    def __init__(self, cfg: GPTConfig):
        super().__init__(cfg)
        d = cfg.model_dim
        self.speed_emb = nn.Embedding(2, d)
        self.emovec_layer = nn.Linear(self.EMOTION_WIDTH, d)
        self.emo_layer = nn.Linear(d, d)

    def emotion_vector(self, emotion_latent: torch.Tensor) -> torch.Tensor:
        """(b, 1024) emotion perceiver output → (b, d)."""
        return self.emo_layer(self.emovec_layer(emotion_latent))

    def conditioning(self, latents: torch.Tensor, emotion: torch.Tensor) -> torch.Tensor:
        """(b, 32, d) speaker latents and (b, d) emotion → (b, 34, d): the GPT's conditioning rows."""
        rows = latents.shape[0]
        speed = self.speed_emb(torch.ones(rows, dtype=torch.long, device=latents.device))
        plain = self.speed_emb(torch.zeros(rows, dtype=torch.long, device=latents.device))
        return torch.cat([latents + emotion.unsqueeze(1), speed.unsqueeze(1), plain.unsqueeze(1)], dim=1)


class CampPlusSpeechLM(SpeechLM):
    """Release 2.5's speech LM: one conditioning row from the speaker's CAM++ embedding (192 wide,
    through `spk_emb_proj`) shifted by the emotion vector and followed by two zero rows, and a
    language embedding (`lang_embedding`) added to every text row of the prompt. The emotion vector
    is release 2's (`emovec_layer`, `emo_layer` over the emotion perceiver's latent)."""

    SPEAKER_WIDTH = 192  # CAM++'s embedding width (upstream's fixed size)
    EMOTION_WIDTH = EmotionSpeechLM.EMOTION_WIDTH

    def __init__(self, cfg: GPTConfig):
        super().__init__(cfg)
        d = cfg.model_dim
        self.spk_emb_proj = nn.Linear(self.SPEAKER_WIDTH, d)
        self.lang_embedding = nn.Embedding(len(LANGUAGES) + 1, d)
        self.emovec_layer = nn.Linear(self.EMOTION_WIDTH, d)
        self.emo_layer = nn.Linear(d, d)

    def text_embeddings(self, text: torch.Tensor, language: int | None = None) -> torch.Tensor:
        """Release 2's text rows, plus the language's row on each when `language` is given (upstream's
        generation adds it; its latent pass does not)."""
        rows = super().text_embeddings(text)
        return rows if language is None else rows + self.lang_embedding.weight[language]

    def emotion_vector(self, emotion_latent: torch.Tensor) -> torch.Tensor:
        """(b, 1024) emotion perceiver output → (b, d)."""
        return self.emo_layer(self.emovec_layer(emotion_latent))

    def speaker_latent(self, style: torch.Tensor) -> torch.Tensor:
        """(b, 192) CAM++ embeddings → (b, 1, d): what upstream returns as its conditioning latent."""
        return self.spk_emb_proj(style).unsqueeze(1)

    def conditioning(self, latent: torch.Tensor, emotion: torch.Tensor) -> torch.Tensor:
        """(b, 1, d) speaker latent and (b, d) emotion → (b, 3, d): the GPT's conditioning rows."""
        zeros = latent.new_zeros(latent.shape[0], 2, latent.shape[2])
        return torch.cat([latent + emotion.unsqueeze(1), zeros], dim=1)


EMOTION_PREFIXES = ("emo_conditioning_encoder.", "emo_perceiver_encoder.")


def load_campplus_lm(state: Mapping[str, torch.Tensor], cfg: GPTConfig) -> CampPlusSpeechLM:
    """Release 2.5's LM from its whole `gpt.pth` state, strictly, in eval mode, its tensors the
    state's own (built on the meta device): every key but the emotion encoder pair's
    (`conditioning.load_conditioning` reads those) and `inference_model.`'s."""
    with torch.device("meta"):
        lm = CampPlusSpeechLM(cfg)
    own = {k: v for k, v in state.items() if not k.startswith(EMOTION_PREFIXES) and not k.startswith("inference_model.")}
    lm.load_state_dict(own, strict=True, assign=True)
    return lm.eval()
