"""CosyVoice voice prompts, reusable: a clip's features as upstream's front end makes them (its S3
speech tokens, its 24 kHz prompt mel, its CAM++ speaker embedding) and its transcript (None: the
voice clones without one, cross-lingual). Saved as `prompt.safetensors` + `prompt.json` (never
pickle). The features are kept whole; text-to-speech trims them to twice the tokens as upstream
does (`frontend.trim_to_tokens`), voice conversion uses them whole. A prompt is made by one CosyVoice
version's tokenizer and mel (v2 and v3 differ in both) and is refused by the other.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import torch

from koe.engines.cosyvoice.frontend import Prompt
from koe.engines.prompt_files import check_header, prompt_tensor, read_prompt, write_prompt

__all__ = ["FAMILY", "CosyVoiceVoice", "CosyVoiceVoiceError"]

FORMAT_VERSION = 1
FAMILY = "cosyvoice"
TOKEN_RATE = 25
MEL_RATE = 50
MAX_SECONDS = 31  # the tokenizer takes at most 30 s
EMBEDDING = 192
MELS = 80


class CosyVoiceVoiceError(ValueError):
    """A saved CosyVoice voice prompt that cannot be read or is not one."""


@dataclass(frozen=True, eq=False)
class CosyVoiceVoice:
    """`prompt`: the clip's features, untrimmed (`speech_token` (1, n) int32, `speech_feat` (1,
    frames, 80), `embedding` (1, 192)); `text`: its transcript as given (None: none); `version`: the
    CosyVoice version whose front end made it."""

    prompt: Prompt
    text: str | None
    version: int
    info: dict = field(default_factory=dict)

    family = FAMILY

    @property
    def seconds(self) -> float:
        return self.prompt.speech_token.shape[1] / TOKEN_RATE

    def save(self, folder: str | Path) -> Path:
        """Write `prompt.safetensors` + `prompt.json` into `folder` (atomically)."""
        p = self.prompt
        tensors = {
            "speech_token": p.speech_token.reshape(-1).to(torch.int64).contiguous(),
            "speech_feat": p.speech_feat.reshape(-1, MELS).to(torch.float32).contiguous(),
            "embedding": p.embedding.reshape(-1).to(torch.float32).contiguous(),
        }
        meta = {"format_version": FORMAT_VERSION, "family": FAMILY, "text": self.text, "version": self.version, "info": self.info}
        return write_prompt(folder, tensors, meta)

    @classmethod
    def load(cls, folder: str | Path) -> CosyVoiceVoice:
        meta, tensors = read_prompt(folder, CosyVoiceVoiceError)
        check_header(folder, meta, CosyVoiceVoiceError, family=FAMILY, title="CosyVoice", version=FORMAT_VERSION)
        text, version, info = meta.get("text"), meta.get("version"), meta.get("info") or {}
        if not (text is None or isinstance(text, str)) or version not in (2, 3) or not isinstance(info, dict):
            raise CosyVoiceVoiceError(f"{folder}: a damaged CosyVoice voice prompt (prompt.json: text, version or info); prepare the voice again")
        err = CosyVoiceVoiceError
        tokens = prompt_tensor(folder, tensors, "speech_token", err, dtype=torch.int64, shape=(None,), max_len=MAX_SECONDS * TOKEN_RATE, low=0)
        feat = prompt_tensor(folder, tensors, "speech_feat", err, dtype=torch.float32, shape=(None, MELS), max_len=MAX_SECONDS * MEL_RATE + 2)
        embedding = prompt_tensor(folder, tensors, "embedding", err, dtype=torch.float32, shape=(EMBEDDING,), max_len=EMBEDDING)
        prompt = Prompt(tokens.to(torch.int32)[None], feat[None], embedding[None])
        return cls(prompt, text, int(version), dict(info))
