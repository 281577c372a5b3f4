"""The talker's prompt: text, control and codec embeddings laid out as upstream lays them out.

Layout of one item (streaming text feeding, the default of the model's own `generate`):

    [instruction tokens]                      <|im_start|>user\\n{instruct}<|im_end|>\\n, text only
    <|im_start|>assistant\\n                  text only (3 tokens)
    codec control, summed with tts_pad...     think/nothink, think_bos, [language], think_eos,
                                              [speaker], pad   (+ tts_pad; the last one + tts_bos)
    first text token + codec bos
  then each decode step adds the next text token (the "trailing text"), then tts_eos, then tts_pad.

With `non_streaming_mode` the whole text (+ tts_eos) is in the prompt, summed with codec pads, and
codec bos + tts_pad closes it. Voice cloning (ICL) puts the reference text + target text against
the reference codes instead. Every projection runs on the same slices as upstream's, because the
float bits of a matrix product can depend on how many rows it is given.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from koe.engines.qwen3_tts.config import Qwen3TTSConfig
from koe.engines.qwen3_tts.talker import Talker


@dataclass
class ClonePrompt:
    """What a voice-clone request adds to one item (see `voice.py`)."""

    speaker_embedding: torch.Tensor | None  # (C,)
    ref_code: torch.Tensor | None  # (T, G) int64, ICL only
    ref_ids: torch.Tensor | None  # (1, N) ids of "<|im_start|>assistant\n{ref_text}<|im_end|>\n", ICL only
    icl: bool


@dataclass
class PromptItem:
    text_ids: torch.Tensor  # (1, N): "<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"
    language: str
    speaker: str | None = None
    instruct_ids: torch.Tensor | None = None  # (1, M)
    clone: ClonePrompt | None = None


@dataclass
class TalkerInputs:
    embeds: torch.Tensor  # (B, L, C), left-padded with zeros
    attention_mask: torch.Tensor  # (B, L) int64, 0 on padding
    trailing_text: torch.Tensor  # (B, S, C), padded with tts_pad
    tts_pad: torch.Tensor  # (1, 1, C)


def build_talker_inputs(talker: Talker, cfg: Qwen3TTSConfig, items: list[PromptItem], non_streaming_mode: bool) -> TalkerInputs:
    """Embed a batch of prompt items and pad them on the left, as upstream's generate does."""
    prompts, trailing = [], []
    tts_pad = None
    for item in items:
        prompt, trail, tts_pad = _item_embeds(talker, cfg, item, non_streaming_mode)
        prompts.append(prompt)
        trailing.append(trail)
    return _pad_batch(prompts, trailing, tts_pad)


def _codec(talker: Talker, ids: list[int], device: torch.device) -> torch.Tensor:
    return talker.embed_codec(torch.tensor([ids], device=device, dtype=torch.long))


def language_id(cfg: Qwen3TTSConfig, language: str, speaker: str | None) -> int | None:
    """Codec id of the language tag (None for `auto`); a dialect speaker turns Chinese/auto into its dialect."""
    talker = cfg.talker
    lang = language.lower()
    lid = None if lang == "auto" else talker.language_ids[lang]
    if lang in ("chinese", "auto") and speaker:
        dialect = talker.speaker_dialects.get(speaker.lower(), False)
        if dialect is not False:
            lid = talker.language_ids[dialect]
    return lid


def _item_embeds(talker: Talker, cfg: Qwen3TTSConfig, item: PromptItem, non_streaming: bool):
    tc = cfg.talker
    ids = item.text_ids
    dev = ids.device
    instruct = talker.embed_text(item.instruct_ids) if item.instruct_ids is not None else None

    if item.clone is None:
        speaker = None
        if item.speaker:
            speaker = talker.embed_codec(torch.tensor(tc.speaker_ids[item.speaker.lower()], device=dev, dtype=ids.dtype))
    else:
        speaker = item.clone.speaker_embedding
    lid = language_id(cfg, item.language, item.speaker if item.clone is None else None)

    special = talker.embed_text(torch.tensor([[cfg.tts_bos_id, cfg.tts_eos_id, cfg.tts_pad_id]], device=dev, dtype=ids.dtype))
    tts_bos, tts_eos, tts_pad = special.chunk(3, dim=1)  # 3 x (1, 1, C)

    if lid is None:
        control = [tc.codec_nothink_id, tc.codec_think_bos_id, tc.codec_think_eos_id]
    else:
        control = [tc.codec_think_id, tc.codec_think_bos_id, lid, tc.codec_think_eos_id]
    parts = [_codec(talker, control, dev)]
    if speaker is not None:
        parts.append(speaker.view(1, 1, -1))
    parts.append(_codec(talker, [tc.codec_pad_id, tc.codec_bos_id], dev))
    codec = torch.cat(parts, dim=1)  # (1, K, C)

    role = talker.embed_text(ids[:, :3])
    control_text = torch.cat((tts_pad.expand(-1, codec.shape[1] - 2, -1), tts_bos), dim=1) + codec[:, :-1]
    prompt = torch.cat((role, control_text), dim=1)

    if item.clone is not None and item.clone.icl and item.clone.ref_code is not None:
        icl, trailing = _icl_embeds(talker, cfg, ids[:, 3:-5], item.clone, tts_pad, tts_eos, non_streaming)
        prompt = torch.cat([prompt, icl], dim=1)
    elif non_streaming:
        body = ids[:, 3:-5]
        text = torch.cat((talker.embed_text(body), tts_eos), dim=1) + _codec(talker, [tc.codec_pad_id] * (body.shape[1] + 1), dev)
        prompt = torch.cat([prompt, text, tts_pad + _codec(talker, [tc.codec_bos_id], dev)], dim=1)
        trailing = tts_pad
    else:
        prompt = torch.cat([prompt, talker.embed_text(ids[:, 3:4]) + codec[:, -1:]], dim=1)
        trailing = torch.cat((talker.embed_text(ids[:, 4:-5]), tts_eos), dim=1)

    if instruct is not None:
        prompt = torch.cat([instruct, prompt], dim=1)
    return prompt, trailing, tts_pad


def _icl_embeds(talker: Talker, cfg: Qwen3TTSConfig, text_ids: torch.Tensor, clone: ClonePrompt, tts_pad, tts_eos, non_streaming: bool):
    """Reference text + target text against the reference codes (in-context cloning)."""
    tc = cfg.talker
    dev = text_ids.device
    text = talker.embed_text(torch.cat([clone.ref_ids[:, 3:-2], text_ids], dim=-1))
    text = torch.cat([text, tts_eos], dim=1)  # (1, T1, C)
    ref = clone.ref_code.to(dev)  # (T, G)
    tables = [talker.model.codec_embedding] + list(talker.code_predictor.model.codec_embedding)
    codes = torch.cat([tables[g](ref[:, g : g + 1]) for g in range(tc.num_code_groups)], dim=1)  # (T, G, C)
    codes = codes.sum(1).unsqueeze(0)  # (1, T, C)
    codes = torch.cat([_codec(talker, [tc.codec_bos_id], dev), codes], dim=1)  # (1, T+1, C)
    n_text, n_codes = text.shape[1], codes.shape[1]
    if non_streaming:
        icl = text + _codec(talker, [tc.codec_pad_id] * n_text, dev)
        return torch.cat([icl, codes + tts_pad], dim=1), tts_pad
    if n_text > n_codes:
        return text[:, :n_codes] + codes, text[:, n_codes:]
    text = torch.cat([text] + [tts_pad] * (n_codes - n_text), dim=1)
    return text + codes, tts_pad


def _pad_batch(prompts: list[torch.Tensor], trailing: list[torch.Tensor], tts_pad: torch.Tensor) -> TalkerInputs:
    lengths = torch.tensor([p.shape[1] for p in prompts])
    seqs = [p.squeeze(0).flip(dims=[0]) for p in prompts]
    embeds = torch.nn.utils.rnn.pad_sequence(seqs, batch_first=True, padding_value=0.0).flip(dims=[1])  # (B, L, C)
    b, length = embeds.shape[:2]
    mask = (torch.arange(length).expand(b, -1) >= (length - lengths).unsqueeze(1)).long().to(embeds.device)
    trail = [t.squeeze(0) for t in trailing]
    trail_lengths = torch.tensor([t.shape[0] for t in trail], device=embeds.device)
    padded = torch.nn.utils.rnn.pad_sequence(trail, batch_first=True, padding_value=0.0)  # (B, S, C)
    pad_rows = torch.arange(padded.shape[1], device=embeds.device).expand(b, -1) >= trail_lengths.unsqueeze(1)
    padded[pad_rows] = tts_pad.squeeze()
    return TalkerInputs(embeds=embeds, attention_mask=mask, trailing_text=padded, tts_pad=tts_pad)
