"""A release 2.5 folder's `config.yaml`, read as data, and the files the folder must hold.

No released 2.5 `config.yaml` is in upstream's repository; the keys are derived from what
`infer_v2_5.IndexTTS2.__init__` reads of it (an OmegaConf of the file):

- `gpt`: `UnifiedVoice(**cfg.gpt, spk_cond_mode="campplus")` (the speaker row from CAM++, a language
  embedding; `condition_type`/`condition_module` are not used in that mode);
- `semantic_codec`: `EnhancedCodec(**cfg.semantic_codec)` over `codec.pth`, a fixed name beside the
  config (`koe_indextts.codec25` reads the section);
- `s2mel`: `MyModel(cfg.s2mel)` without the GPT-latent layer (release 2's `gpt_layer`), over
  `cfg.s2mel_checkpoint`;
- `gpt_checkpoint`, `w2v_stat`, `emo_matrix`, `spk_matrix`, `emo_num` as release 2 reads them;
  `qwen_emo_path` only with `use_qwen_emo=True` (off by default in 2.5); `version` where present.

2.5 has no `dataset.bpe_model`: its tokenizer is the tiktoken vocabulary
`multilingual_zh_ja_yue_char_del.tiktoken` beside the config (`koe_indextts.text25`). A
`glossary.yaml` beside it, when present, feeds the text normaliser. The auxiliary models are
release 2's, where upstream's 2.5 looks for them first: `hf_cache/w2v-bert-2.0/`,
`hf_cache/campplus_cn_common.bin`, `hf_cache/bigvgan/` (its downloader fills `hf_cache/` when one
is missing); 2.5 takes no `aux_paths` and needs no MaskGCT semantic codec.

As `Release2` does, a file name the config leaves out takes the name the released configs give it.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from koe_indextts.config import AUX_BIGVGAN, AUX_BIGVGAN_FILES, AUX_CAMPPLUS, AUX_W2V_BERT, AUX_W2V_BERT_FILES, CONFIG, read_emotion_release
from koe_indextts.text25 import VOCAB_FILE

CODEC_FILE = "codec.pth"  # 2.5's own semantic codec (codec25); here, so that reading a folder needs no torch

__all__ = ["GLOSSARY", "Release25", "aux_paths25"]

GLOSSARY = "glossary.yaml"  # optional: the text normaliser's glossary


@dataclass(frozen=True)
class Release25:
    """What koe reads from a release 2.5 config: the sections, the release's own files and the
    emotion matrices' row counts per emotion (`emo_num`)."""

    version: float | None
    gpt: dict[str, Any]
    semantic_codec: dict[str, Any]
    s2mel: dict[str, Any]
    gpt_checkpoint: str
    s2mel_checkpoint: str
    w2v_stat: str
    emo_matrix: str
    spk_matrix: str
    emo_num: tuple[int, ...]
    qwen_emo_path: str | None

    variant = "IndexTTS-2.5"
    codec_checkpoint = CODEC_FILE
    vocabulary = VOCAB_FILE

    @property
    def files(self) -> tuple[str, ...]:
        """The files koe loads (the auxiliary models' included), relative to the folder."""
        own = (CONFIG, self.gpt_checkpoint, CODEC_FILE, self.s2mel_checkpoint, VOCAB_FILE, self.w2v_stat, self.emo_matrix, self.spk_matrix)
        return (*own, *AUX_W2V_BERT_FILES, AUX_CAMPPLUS, *AUX_BIGVGAN_FILES)

    def missing(self, folder: str | Path) -> tuple[str, ...]:
        """The files of `files` that `folder` lacks."""
        folder = Path(folder)
        return tuple(f for f in self.files if not (folder / f).is_file())

    @classmethod
    def read(cls, folder: str | Path) -> Release25:
        return cls(**read_emotion_release(folder, ("gpt", "semantic_codec", "s2mel"))[1])


def aux_paths25(folder: str | Path) -> dict[str, Path]:
    """A release 2.5 folder's auxiliary models, by upstream's `aux_paths` keys (no semantic codec:
    2.5's is `codec.pth`)."""
    folder = Path(folder)
    return {"w2v_bert": folder / AUX_W2V_BERT, "campplus": folder / AUX_CAMPPLUS, "bigvgan": folder / AUX_BIGVGAN}
