"""The fine-tuning loss, computed on koe's modules with the operations of upstream's recipe.

    loss = talker loss (codebook 0) + 0.3 x code predictor loss (codebooks 1..15)

Kept as upstream has it, though parts look odd (docs/training.md says so too):

- The input is the *unprojected* text embedding plus the codec embeddings; inference passes the
  text embedding through `text_projection` first. So the recipe only runs where the text embedding
  is as wide as the talker (1.7B Base: 2048 = 2048; 0.6B Base: 2048 vs 1024), and
  `text_projection` gets no gradient.
- The labels are shifted twice: the recipe passes `labels[:, 1:]` for inputs `[:, :-1]`, and the
  loss (transformers' causal-LM loss) shifts them once more. The talker's output at position p is
  scored against code 0 of position p + 2.
- The code predictor sees, for each frame, the talker's hidden state at the frame's *own* input
  position (upstream's latest fix: `codec_mask[:, :-1]`), then code 0 (through the talker's
  codec embedding) and codebooks 1..14. Its 15 heads are scored with the same causal-LM loss,
  which shifts the 15 labels by one: head h learns codebook h + 2, the last head nothing.
- The speaker embedding at position 6 comes from the (frozen, detached) speaker encoder.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F

from koe.engines.qwen3_tts.finetune.batch import IGNORE, SPEAKER_POSITION, Batch
from koe.engines.qwen3_tts.generate import rope_positions
from koe.engines.qwen3_tts.model import Qwen3TTSNetwork
from koe.nn.attention import causal_padding_mask
from koe.nn.rotary import rotary_cos_sin

SUB_TALKER_WEIGHT = 0.3


@dataclass
class Loss:
    total: torch.Tensor  # the scalar to back-propagate (before accumulation's division)
    talker: torch.Tensor
    code_predictor: torch.Tensor
    speaker_embedding: torch.Tensor  # (B, C), detached


def causal_lm_loss(logits: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Mean cross-entropy of `logits` (..., V) against `labels` shifted left by one (the last
    position scored against nothing), ignoring -100: transformers' causal-LM loss."""
    vocab = logits.shape[-1]
    shifted = F.pad(labels, (0, 1), value=IGNORE)[..., 1:].contiguous()
    return F.cross_entropy(logits.float().view(-1, vocab), shifted.view(-1), ignore_index=IGNORE)


def speaker_embeddings(net: Qwen3TTSNetwork, ref_mels, device: torch.device, dtype: torch.dtype) -> torch.Tensor:
    """(B, C) x-vectors of a batch's references, from the frozen speaker encoder."""
    encoder = net.speaker_encoder
    with torch.no_grad():
        if isinstance(ref_mels, torch.Tensor):
            return encoder(ref_mels.to(device).to(dtype)).detach()
        return torch.cat([encoder(m.to(device).to(dtype)) for m in ref_mels]).detach()


def input_embeddings(net: Qwen3TTSNetwork, batch: Batch, speaker: torch.Tensor) -> torch.Tensor:
    """(B, T, C): masked text and codec embeddings, the speaker at position 6, codebooks 1..15 added."""
    talker = net.talker
    text = talker.model.text_embedding(batch.input_ids[:, :, 0]) * batch.text_embedding_mask
    codec = talker.model.codec_embedding(batch.input_ids[:, :, 1]) * batch.codec_embedding_mask
    codec[:, SPEAKER_POSITION, :] = speaker
    embeds = text + codec
    frames = batch.codec_mask.unsqueeze(-1)
    for i, table in enumerate(talker.code_predictor.model.codec_embedding, start=1):
        embeds = embeds + table(batch.codec_ids[:, :, i]) * frames
    return embeds


def talker_hidden(net: Qwen3TTSNetwork, embeds: torch.Tensor, attention_mask: torch.Tensor, checkpointing: bool) -> torch.Tensor:
    """The talker over the whole (right-padded) batch, as one prefill: final-norm hidden (B, T, C)."""
    positions, _ = rope_positions(attention_mask)
    mask = causal_padding_mask(attention_mask, torch.arange(embeds.shape[1], device=embeds.device))
    return net.talker.forward_hidden(embeds, positions, None, mask, checkpointed=checkpointing)


def code_predictor_loss(net: Qwen3TTSNetwork, hidden: torch.Tensor, codes: torch.Tensor) -> torch.Tensor:
    """hidden (N, C) of the N frames, codes (N, 16) -> the code predictor's loss."""
    talker = net.talker
    predictor = talker.code_predictor
    groups = codes.shape[1]
    parts = [hidden.unsqueeze(1), talker.model.codec_embedding(codes[:, :1])]
    parts += [predictor.model.codec_embedding[i - 1](codes[:, i : i + 1]) for i in range(1, groups - 1)]
    x = predictor.small_to_mtp_projection(torch.cat(parts, dim=1))  # (N, 16, C')
    positions = torch.arange(x.shape[1], device=x.device).expand(x.shape[0], -1)
    cos, sin = rotary_cos_sin(predictor.inv_freq, positions, x.dtype)
    out = predictor.model.run(x, cos.unsqueeze(1), sin.unsqueeze(1), None, None)
    logits = torch.stack([predictor.lm_head[i - 1](out[:, i]) for i in range(1, groups)], dim=1)  # (N, 15, V)
    return causal_lm_loss(logits, codes[:, 1:])


def speaker_loss(net: Qwen3TTSNetwork, batch: Batch, *, checkpointing: bool = False) -> Loss:
    """The recipe's loss on one batch (tensors already on the network's device)."""
    param = net.talker.codec_head.weight
    speaker = speaker_embeddings(net, batch.ref_mels, param.device, param.dtype)
    embeds = input_embeddings(net, batch, speaker)
    hidden = talker_hidden(net, embeds[:, :-1, :], batch.attention_mask[:, :-1], checkpointing)
    talker_loss = causal_lm_loss(net.talker.codec_head(hidden), batch.labels[:, 1:])
    frames = batch.codec_mask[:, :-1]
    sub_loss = code_predictor_loss(net, hidden[frames], batch.codec_ids[batch.codec_mask])
    return Loss(talker_loss + SUB_TALKER_WEIGHT * sub_loss, talker_loss, sub_loss, speaker)
