"""GPT-SoVITS's `TTS.run` (upstream's `TTS_infer_pack/TTS.py`, every version) on koe's parts: text ->
fragments -> batches -> semantic tokens -> SoVITS -> audio (32 kHz; v3 24 kHz, v4 48 kHz). Its
`streaming_mode` (token chunks, v1/v2/v2Pro/ProPlus) is `streaming.py`'s, on the parts here.

The flow, as upstream runs it:
1. The seed (`set_seed`: Python's `random`, numpy's and torch's global generators), then the
   reference: upstream computes its HuBERT features inside `run` (a reference it has not seen),
   and transformers' HuBERT draws one `torch.rand([])` per encoder layer for its layer-drop even in
   eval mode; koe's prepared voice holds the features, so `run` replays those draws right after the
   seed (`hubert_draws`), and every later draw (the AR sampling, SoVITS's prior noise) is upstream's.
2. The text (`TextPreprocessor.preprocess`): consecutive pause marks squeezed, cut by
   `text_split_method` into fragments (`pre_segment`), each fragment's phonemes and BERT features;
   fragments whose normalised text is empty are dropped.
3. Batches (`to_batch`): with `split_bucket` (on by default; off when speed != 1, and for v3/v4
   with `parallel_infer`), fragments sorted
   by normalised-text length (stable) and grouped `batch_size` at a time, a group shrunk until its
   middle fragment's length over the mean is at least `batch_threshold`; else in order. Each row
   is the transcript's phonemes and BERT features followed by the fragment's (the fragment alone
   without a transcript).
4. Each batch's semantic tokens (`t2s_decode`): `parallel_infer` (on by default) decodes the batch
   as one (`decode_batched`), else row by row (`decode_serial`); each row's last `idx` tokens kept.
5. SoVITS: at speed 1 a batch's tokens and phonemes joined into ONE decode and the audio cut back
   into fragments at 2 x prod(upsample_rates) samples a token; at other speeds one decode per
   fragment. The reference spectrograms are the voice's (the clip's and any auxiliary clips'), and
   for v2Pro/ProPlus each one's speaker-verification embedding.
   v3/v4 (`vocoder_synthesis`): the prompt (its codes' features and the reference mel), then with
   `parallel_infer` the whole batch in one CFM call (`synthesize_batched`), else one fragment at a
   time (`synthesize_serial`), `sample_steps` Euler steps each, and the vocoder.
6. `audio_postprocess`: a fragment whose peak is over 1 divided by it, `fragment_interval` s of
   zeros after each (`fragment_interval` x SoVITS's own 32 kHz, for v3/v4 too, as upstream
   counts them), the fragments back in text order, joined. Upstream returns
   `(audio * 32768).astype(int16)`; koe returns the float32 samples before that step (`to_int16`
   gives upstream's samples).

`return_fragment` (koe's streamed mode, `fragments(..., streamed=True)`): upstream's pre-cut without
the punctuation squeeze, no buckets, each batch (`batch_size` fragments in order) decoded and
post-processed on its own and returned at once: the first audio waits for the first batch's text,
AR decode and SoVITS decode.
"""

from __future__ import annotations

import random
from collections.abc import Iterator, Sequence
from dataclasses import dataclass

import numpy as np
import torch

from koe.engines.gpt_sovits.bert_features import BertFeatures
from koe.engines.gpt_sovits.sampling import Sampling
from koe.engines.gpt_sovits.sovits import SoVITS
from koe.engines.gpt_sovits.sovits_v3 import SoVITSV3
from koe.engines.gpt_sovits.t2s import Text2Semantic
from koe.engines.gpt_sovits.t2s_decode import decode_batched, decode_serial
from koe.engines.gpt_sovits.text.preprocess import Sentence, phones_and_text, pre_segment, squeeze_punctuation
from koe.engines.gpt_sovits.vocoder_synthesis import prompt_of, synthesize_batched, synthesize_serial
from koe.engines.gpt_sovits.voice import GPTSoVITSVoice

__all__ = ["Fragment", "Models", "RunSettings", "batch_indices", "fragment_of", "fragment_texts", "fragments", "postprocess", "run", "set_seed", "to_int16"]


@dataclass(frozen=True)
class RunSettings:
    """`TTS.run`'s inputs that shape the audio, with its defaults."""

    top_k: int = 15
    top_p: float = 1.0
    temperature: float = 1.0
    repetition_penalty: float = 1.35
    text_split_method: str = "cut1"
    batch_size: int = 1
    batch_threshold: float = 0.75
    split_bucket: bool = True
    parallel_infer: bool = True
    speed_factor: float = 1.0
    fragment_interval: float = 0.3
    sample_steps: int = 32

    @property
    def sampling(self) -> Sampling:
        return Sampling(self.top_k, self.top_p, self.temperature, self.repetition_penalty)


@dataclass
class Models:
    """The loaded parts `run` needs: the AR model, SoVITS, the BERT features, the text front ends
    (by language, for `clean_text`), fastText's model path for mixed text, the version's name, how
    many layer-drop draws HuBERT makes, and v3/v4's vocoder."""

    t2s: Text2Semantic
    sovits: SoVITS | SoVITSV3
    bert: BertFeatures
    front_ends: dict
    lang_model: str | None
    version: str
    hubert_draws: int
    vocoder: torch.nn.Module | None = None


@dataclass
class Fragment:
    """One fragment's phoneme ids, BERT features (1024, phonemes) and normalised text."""

    phones: list[int]
    bert: torch.Tensor
    norm_text: str


def set_seed(seed: int) -> None:
    """Upstream's `set_seed` (Python's, numpy's and torch's generators; PYTHONHASHSEED is not koe's to set)."""
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def features(models: Models, sentence: Sentence) -> Fragment:
    """`get_phones_and_bert`'s BERT step: each piece's features, joined."""
    bert = models.bert.pieces((p.language, p.ids, p.cleaned.word2ph, p.cleaned.norm_text) for p in sentence.pieces)
    return Fragment(sentence.ids, bert, sentence.norm_text)


def fragment_of(models: Models, text: str, language: str) -> Fragment:
    """`segment_and_extract_feature_for_text(text, language, version)`."""
    return features(models, phones_and_text(text, language, models.version, models.front_ends, models.lang_model))


def fragment_texts(text: str, language: str, method: str, streamed: bool) -> list[str]:
    """The texts `run` cuts a request into (`preprocess` squeezes pause marks first; `return_fragment` does not)."""
    return pre_segment(text if streamed else squeeze_punctuation(text), language, method)


def batch_indices(lengths: Sequence[int], batch_size: int, threshold: float, split_bucket: bool) -> list[list[int]]:
    """`to_batch`'s index lists for fragments of normalised-text `lengths` (see the module's doc)."""
    if not split_bucket:
        return [list(range(i, min(i + batch_size, len(lengths)))) for i in range(0, len(lengths), batch_size)]
    order = sorted(range(len(lengths)), key=lambda i: lengths[i])
    sorted_lengths = np.array([lengths[i] for i in order], dtype=np.int64)
    out, pos = [], 0
    while pos < len(order):
        end = min(pos + batch_size, len(order))
        while pos < end:
            batch = sorted_lengths[pos:end].astype(np.float32)
            score = batch[(end - pos) // 2] / (batch.mean() + 1e-8)
            if score >= threshold or end - pos == 1:
                out.append(order[pos:end])
                pos = end
                break
            end -= 1
    return out


def _semantic(models: Models, voice: GPTSoVITSVoice, batch: list[Fragment], s: RunSettings) -> list[torch.Tensor]:
    """A batch's semantic tokens per fragment (each row's last idx tokens)."""
    if voice.has_transcript:
        phones = [torch.LongTensor(voice.phones + f.phones) for f in batch]
        bert = [torch.cat([voice.bert, f.bert], 1) for f in batch]
        prompts = voice.semantic.expand(len(batch), -1)
    else:
        phones = [torch.LongTensor(f.phones) for f in batch]
        bert = [f.bert for f in batch]
        prompts = None
    max_len = max(max(b.shape[-1] for b in bert), max(p.shape[-1] for p in phones))
    early_stop = models.t2s.config.early_stop_num
    if s.parallel_infer:
        rows, idxs = decode_batched(models.t2s, phones, bert, prompts, s.sampling, early_stop, max_len=max_len)
    else:
        rows, idxs = decode_serial(models.t2s, phones, bert, prompts, s.sampling, early_stop)
    # reference-free rows come out int32 (upstream's empty int32 start); SoVITS's embedding takes either
    return [row[-idx:].long() for row, idx in zip(rows, idxs, strict=True)]


def _audio(models: Models, voice: GPTSoVITSVoice, batch: list[Fragment], tokens: list[torch.Tensor], s: RunSettings) -> list[torch.Tensor]:
    """SoVITS's audio per fragment: one decode of the batch joined at speed 1, else one each; v3/v4
    through the CFM and the vocoder."""
    if models.vocoder is not None:
        return _vocoded(models, voice, batch, tokens, s)
    specs, speed = list(voice.specs), s.speed_factor
    sv = None if voice.sv is None else list(voice.sv)
    sovits = models.sovits
    if speed == 1.0:
        per_code = sovits.config.samples_per_code
        ends = np.cumsum([0] + [t.shape[0] * per_code for t in tokens]).tolist()
        codes = torch.cat(tokens).unsqueeze(0).unsqueeze(0)
        phones = torch.cat([torch.LongTensor(f.phones) for f in batch]).unsqueeze(0)
        wave = sovits.decode(codes, phones, specs, speed=speed, sv=sv)[0, 0, :]
        return [wave[ends[i] : ends[i + 1]] for i in range(len(batch))]
    return [
        sovits.decode(t.unsqueeze(0).unsqueeze(0), torch.LongTensor(f.phones).unsqueeze(0), specs, speed=speed, sv=sv)[0, 0, :]
        for f, t in zip(batch, tokens, strict=True)
    ]


def _vocoded(models: Models, voice: GPTSoVITSVoice, batch: list[Fragment], tokens: list[torch.Tensor], s: RunSettings) -> list[torch.Tensor]:
    """v3/v4: the batch at once (`parallel_infer`, upstream's batched vocoder synthesis) or one
    fragment after another; the timbre is the first reference's."""
    spec = voice.specs[0]
    prompt = prompt_of(models.sovits, voice.semantic.view(1, 1, -1), torch.LongTensor(voice.phones).unsqueeze(0), spec, voice.mel)
    codes = [t.unsqueeze(0).unsqueeze(0) for t in tokens]
    phones = [torch.LongTensor(f.phones).unsqueeze(0) for f in batch]
    args = (s.speed_factor, s.sample_steps)
    if s.parallel_infer:
        return synthesize_batched(models.sovits, models.vocoder, prompt, codes, phones, spec, *args)
    return [synthesize_serial(models.sovits, models.vocoder, prompt, c, p, spec, *args) for c, p in zip(codes, phones, strict=True)]


def postprocess(audio: list[list[torch.Tensor]], order: list[list[int]] | None, interval_samples: int) -> torch.Tensor:
    """`audio_postprocess` before its int16 step: peaks over 1 normalised, silences, text order."""
    done = []
    zeros = torch.zeros(interval_samples, dtype=torch.float32)
    for batch in audio:
        row = []
        for fragment in batch:
            peak = torch.abs(fragment).max()
            if peak > 1:
                fragment /= peak  # in place, as upstream
            row.append(torch.cat([fragment, zeros], 0) if interval_samples > 0 else fragment)
        done.append(row)
    if order is not None:
        flat: list = [None] * sum(len(o) for o in order)
        for row, indices in zip(done, order, strict=True):
            for fragment, i in zip(row, indices, strict=True):
                flat[i] = fragment
    else:
        flat = [f for row in done for f in row]
    return torch.cat(flat, 0)


def to_int16(audio: np.ndarray) -> np.ndarray:
    """Upstream's last step: `(audio * 32768).astype(np.int16)`."""
    return (audio * 32768).astype(np.int16)


def fragments(models: Models, voice: GPTSoVITSVoice, text: str, language: str, s: RunSettings, streamed: bool = False, cancel=None) -> Iterator[np.ndarray]:
    """`TTS.run`'s audio after the seed (see the module's doc): one float32 array (one-shot), or one
    per batch (`streamed`, upstream's return_fragment). Raises ValueError for text with nothing to read."""
    texts = fragment_texts(text, language, s.text_split_method, streamed)
    interval = int(models.sovits.config.sampling_rate * s.fragment_interval) if s.fragment_interval > 0 else 0
    for _ in range(models.hubert_draws):
        torch.rand([])
    with torch.inference_mode():
        if streamed:
            for start in range(0, len(texts), s.batch_size):
                batch = [fragment_of(models, t, language) for t in texts[start : start + s.batch_size]]
                if cancel is not None:
                    cancel.raise_if_cancelled()
                tokens = _semantic(models, voice, batch, s)
                yield postprocess([_audio(models, voice, batch, tokens, s)], None, interval).numpy()
            return
        found = [fragment_of(models, t, language) for t in texts]
        found = [f for f in found if f.norm_text]
        if not found:
            raise ValueError("no text to read (nothing is left of it after normalisation)")
        bucket = s.split_bucket and s.speed_factor == 1.0 and not (models.vocoder is not None and s.parallel_infer)
        order = batch_indices([len(f.norm_text) for f in found], s.batch_size, s.batch_threshold, bucket)
        audio = []
        for indices in order:
            if cancel is not None:
                cancel.raise_if_cancelled()
            batch = [found[i] for i in indices]
            audio.append(_audio(models, voice, batch, _semantic(models, voice, batch, s), s))
        yield postprocess(audio, order if bucket else None, interval).numpy()


def run(models: Models, voice: GPTSoVITSVoice, text: str, language: str, s: RunSettings, seed: int | None = None) -> np.ndarray:
    """One `TTS.run(inputs)` call's audio as float32 (see `to_int16`), seeded as upstream seeds."""
    if seed is not None:
        set_seed(seed)
    return np.concatenate(list(fragments(models, voice, text, language, s)))
