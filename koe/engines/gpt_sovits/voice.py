"""GPT-SoVITS voice prompts: what upstream's `TTS.run` computes from its reference inputs, kept.

- `semantic`: the clip's semantic tokens (`_set_prompt_semantic`: HuBERT on the 16 kHz samples with
  0.3 s of zeros, SoVITS's `extract_latent`), the AR model's prompt when there is a transcript;
- `specs`: the reference spectrograms SoVITS takes its timbre from (`_get_ref_spec`), the clip's
  first, then any auxiliary clips' (`aux_ref_audio_paths`: SoVITS averages their embeddings);
- `phones`, `bert`, `norm_text`: the transcript's phoneme ids, BERT features and normalised text
  (`segment_and_extract_feature_for_text` on the transcript as upstream ends it), None without one:
  the reference-free mode of v1/v2 (no prompt tokens, SoVITS alone carries the timbre);
- `sv` (v2Pro/ProPlus): each reference's speaker-verification embedding (`compute_embedding3` of
  the clip at SoVITS's rate, resampled to 16 kHz), one per spectrogram;
- `mel` (v3/v4): the reference's normalised log-mel the CFM continues (`vocoder_synthesis.reference_mel`
  of the raw clip, at the vocoder's analysis rate).

Saved as `prompt.safetensors` + `prompt.json` (never pickle). A prompt is made by one version's
models (its HuBERT, codebook and symbol table) and refused by another version.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from pathlib import Path

import torch

from koe.engines.prompt_files import check_header, prompt_tensor, read_prompt, write_prompt

__all__ = ["FAMILY", "GPTSoVITSVoice", "GPTSoVITSVoiceError"]

FORMAT_VERSION = 1
FAMILY = "gpt_sovits"
MAX_CODES = 11 * 25  # 10 s of reference and 0.6 s of zeros at 25 codes a second
MAX_PHONES = 4096
MAX_SPECS = 16
BERT_WIDTH = 1024
SV_WIDTH = 20480  # ERes2NetV2's embedding
MEL_BINS = 100  # v3/v4's reference mel


class GPTSoVITSVoiceError(ValueError):
    """A saved GPT-SoVITS voice prompt that cannot be read or is not one."""


@dataclass(frozen=True, eq=False)
class GPTSoVITSVoice:
    """`semantic` (P,) int64; `specs`: (1, bins, frames) float32 each; `phones` (list of ids) /
    `bert` (1024, len(phones)) / `norm_text` / `text` / `prompt_lang`: the transcript's (None: none);
    `version`: the SoVITS version whose models made it."""

    semantic: torch.Tensor
    specs: tuple[torch.Tensor, ...]
    text: str | None
    prompt_lang: str | None
    phones: list[int] | None
    bert: torch.Tensor | None
    norm_text: str | None
    version: str
    info: dict = field(default_factory=dict)
    sv: tuple[torch.Tensor, ...] | None = None
    mel: torch.Tensor | None = None

    family = FAMILY

    @property
    def has_transcript(self) -> bool:
        return self.phones is not None

    def with_specs(self, extra: list[torch.Tensor], sv: list[torch.Tensor] | None = None) -> GPTSoVITSVoice:
        """The voice with auxiliary reference spectrograms (and, v2Pro/ProPlus, their speaker
        embeddings) added (upstream's aux_ref_audio_paths)."""
        more_sv = None if self.sv is None else (*self.sv, *(sv or ()))
        return replace(self, specs=(*self.specs, *extra), sv=more_sv, info={**self.info, "references": len(self.specs) + len(extra)})

    def save(self, folder: str | Path) -> Path:
        tensors = {"semantic": self.semantic.reshape(-1).to(torch.int64).contiguous()}
        for i, spec in enumerate(self.specs):
            tensors[f"spec.{i}"] = spec.reshape(spec.shape[-2], spec.shape[-1]).to(torch.float32).contiguous()
        if self.phones is not None:
            tensors["phones"] = torch.tensor(self.phones, dtype=torch.int64)
            tensors["bert"] = self.bert.to(torch.float32).contiguous()
        for i, emb in enumerate(self.sv or ()):
            tensors[f"sv.{i}"] = emb.reshape(-1).to(torch.float32).contiguous()
        if self.mel is not None:
            tensors["mel"] = self.mel.reshape(self.mel.shape[-2], self.mel.shape[-1]).to(torch.float32).contiguous()
        meta = {
            "format_version": FORMAT_VERSION,
            "family": FAMILY,
            "text": self.text,
            "prompt_lang": self.prompt_lang,
            "norm_text": self.norm_text,
            "version": self.version,
            "specs": len(self.specs),
            "sv": self.sv is not None,
            "info": self.info,
        }
        return write_prompt(folder, tensors, meta)

    @classmethod
    def load(cls, folder: str | Path) -> GPTSoVITSVoice:
        err = GPTSoVITSVoiceError
        meta, tensors = read_prompt(folder, err)
        check_header(folder, meta, err, family=FAMILY, title="GPT-SoVITS", version=FORMAT_VERSION)
        text, lang, norm, version, count = (meta.get(k) for k in ("text", "prompt_lang", "norm_text", "version", "specs"))
        if not isinstance(version, str) or not isinstance(count, int) or not 1 <= count <= MAX_SPECS:
            raise err(f"{folder}: a damaged GPT-SoVITS voice prompt (prompt.json: version or specs); prepare the voice again")
        semantic = prompt_tensor(folder, tensors, "semantic", err, dtype=torch.int64, shape=(None,), max_len=MAX_CODES, low=0)
        specs = tuple(prompt_tensor(folder, tensors, f"spec.{i}", err, dtype=torch.float32, shape=(None, None), max_len=4096)[None] for i in range(count))
        phones = bert = None
        if text is not None:
            phones = prompt_tensor(folder, tensors, "phones", err, dtype=torch.int64, shape=(None,), max_len=MAX_PHONES, low=0).tolist()
            bert = prompt_tensor(folder, tensors, "bert", err, dtype=torch.float32, shape=(BERT_WIDTH, None), max_len=BERT_WIDTH)
            if bert.shape[1] != len(phones):
                raise err(f"{folder}: a damaged GPT-SoVITS voice prompt (BERT features for {bert.shape[1]} of {len(phones)} phonemes)")
        sv = None
        if meta.get("sv"):
            sv = tuple(prompt_tensor(folder, tensors, f"sv.{i}", err, dtype=torch.float32, shape=(SV_WIDTH,), max_len=SV_WIDTH)[None] for i in range(count))
        mel = None
        if "mel" in tensors:
            mel = prompt_tensor(folder, tensors, "mel", err, dtype=torch.float32, shape=(MEL_BINS, None), max_len=4096)[None]
        return cls(semantic, specs, text, lang, phones, bert, norm, version, dict(meta.get("info") or {}), sv, mel)
