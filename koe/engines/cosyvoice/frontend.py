"""CosyVoice's model inputs from a request: the text's ids and a prompt clip's speech tokens, mel and
speaker embedding, in the dicts upstream's `CosyVoiceFrontEnd` hands its model (CosyVoice 2 and 3).

A prompt clip gives three things, each computed as upstream computes it:

* `speech_feat`, the flow's prompt mel: the clip at the release's rate (24 kHz; channels averaged,
  resampled as `load_wav(clip, 24000)` resamples, rates under 16 kHz refused), through the yaml's
  `feat_extractor` (Matcha's `mel_spectrogram`: 1920-point STFT every 480 samples, reflect padded by
  720 each side, not centred, magnitude `sqrt(re² + im² + 1e-9)`, 80 Slaney mel bins up to 8 kHz in
  v2 and to Nyquist in v3, `log(max(x, 1e-5))`): `(1, frames, 80)` float32, 50 frames a second;
* `speech_token`, the LM's and the flow's prompt tokens: the S3 tokenizer at 16 kHz,
  `(1, tokens)` int32, 25 a second (clips over 30 s refused, as upstream asserts);
* `embedding`, the speaker embedding: CAM++ at 16 kHz, `(1, 192)` float32.

At a 24 kHz release (every CosyVoice 2 and 3 one) upstream makes the mel exactly twice the token
count for the zero-shot, cross-lingual and instruct inputs: `n = min(frames // 2, tokens)`, the
first `2n` frames and the first `n` tokens kept. Voice conversion keeps the prompt untrimmed.

The dicts (upstream's keys; lengths are `(1,)` int32):

* zero-shot: `text`, `prompt_text` (and their `_len`), `llm_prompt_speech_token`,
  `flow_prompt_speech_token`, `prompt_speech_feat` (and their `_len`), `llm_embedding`,
  `flow_embedding`;
* cross-lingual: zero-shot's less the prompt text and the LM's prompt tokens (the LM hears the
  voice only through its embedding);
* instruct (`instruct2`, v2's and v3's instruct): zero-shot's with the instruction as `prompt_text`,
  less the LM's prompt tokens;
* voice conversion: `source_speech_token`, `flow_prompt_speech_token`, `prompt_speech_feat` (and
  their `_len`), `flow_embedding`.

Texts are tokenized as given (upstream's `frontend_*` take text its `text_normalize` has already
normalised and split; koe's `text.FrontEnd` does that part). The speech tokenizer and CAM++ run
natively (`speech_tokenizer`, `campplus`): the tokens equal upstream's onnxruntime ones, the
embedding differs from onnxruntime's by float rounding only.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path

import torch

from koe.audio.mel import mel_spectrogram
from koe.engines.cosyvoice.campplus import CAMPPlus, load_campplus
from koe.engines.cosyvoice.config import CosyVoiceConfig, read_config
from koe.engines.cosyvoice.features import SAMPLE_RATE, ClipError, clip_at
from koe.engines.cosyvoice.speech_tokenizer import S3Tokenizer, load_speech_tokenizer
from koe.engines.cosyvoice.text import TextTokenizer

__all__ = ["InputFrontEnd", "Prompt", "clip_at", "trim_to_tokens"]

_MEL_KEYS = ("n_fft", "num_mels", "sampling_rate", "hop_size", "win_size", "fmin", "fmax", "center")


def _length(n: int) -> torch.Tensor:
    return torch.tensor([n], dtype=torch.int32)


@dataclass(frozen=True)
class Prompt:
    """A prompt clip's features: `speech_token` `(1, n)` int32, `speech_feat` `(1, frames, 80)`
    float32, `embedding` `(1, 192)` float32."""

    speech_token: torch.Tensor
    speech_feat: torch.Tensor
    embedding: torch.Tensor


def trim_to_tokens(prompt: Prompt) -> Prompt:
    """Upstream's rule at 24 kHz: the mel cut to twice the token count and the tokens to half the
    mel's frames, whichever is shorter (`n = min(frames // 2, tokens)`: 2n frames, n tokens)."""
    n = min(prompt.speech_feat.shape[1] // 2, prompt.speech_token.shape[1])
    return replace(prompt, speech_token=prompt.speech_token[:, :n], speech_feat=prompt.speech_feat[:, : 2 * n])


class InputFrontEnd:
    """A release's front end: text and prompt clips in, the model's input dicts out."""

    def __init__(self, config: CosyVoiceConfig, tokenizer: TextTokenizer, speech_tokenizer: S3Tokenizer, campplus: CAMPPlus) -> None:
        missing = [k for k in _MEL_KEYS if k not in config.feat_extractor]
        if missing:
            raise ClipError(f"the yaml's feat_extractor lacks {', '.join(missing)}")
        self.config = config
        self.tokenizer = tokenizer
        self.speech_tokenizer = speech_tokenizer
        self.campplus = campplus
        self.mel_args = {k: config.feat_extractor[k] for k in _MEL_KEYS}
        self.sample_rate = int(self.mel_args["sampling_rate"])

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> InputFrontEnd:
        """The front end of a released folder: its yaml, `CosyVoice-BlankEN/`'s tokenizer,
        `speech_tokenizer_v<version>.onnx` and `campplus.onnx`."""
        folder = Path(folder)
        config, _ = read_config(folder)
        return cls(
            config,
            TextTokenizer(folder, config.version),
            load_speech_tokenizer(folder / f"speech_tokenizer_v{config.version}.onnx"),
            load_campplus(folder / "campplus.onnx"),
        )

    # -- the parts ------------------------------------------------------------------------------------

    def text_token(self, text: str | Iterable[str]) -> tuple[torch.Tensor | Iterable[str], torch.Tensor]:
        """`(1, n)` int32 ids of `text` as given, and `(1,)` int32 `[n]`; text that arrives in
        pieces (an iterable of strings) is passed on as it is, its length `[0]` (upstream's
        placeholder: the LM tokenizes it as it comes, `CosyVoiceModel.tokens`)."""
        if not isinstance(text, str):
            return text, _length(0)
        ids = torch.tensor([self.tokenizer.encode(text)], dtype=torch.int32).reshape(1, -1)
        return ids, _length(ids.shape[1])

    def speech_feat(self, samples, sample_rate: int) -> torch.Tensor:
        """The flow's prompt mel of a clip: `(1, frames, 80)` float32 at the release's rate."""
        speech = clip_at(samples, sample_rate, self.sample_rate)
        hop = int(self.mel_args["hop_size"])
        pad = (int(self.mel_args["n_fft"]) - hop) // 2
        if speech.shape[1] <= pad:
            raise ClipError(f"the clip is too short for the prompt mel: {speech.shape[1]} samples at {self.sample_rate} Hz, more than {pad} needed")
        with torch.inference_mode():
            mel = mel_spectrogram(speech, **self.mel_args)  # (1, 80, frames)
        return mel.squeeze(0).transpose(0, 1).unsqueeze(0)

    def speech_token(self, samples, sample_rate: int) -> torch.Tensor:
        """The clip's S3 tokens: `(1, tokens)` int32."""
        return self.speech_tokenizer.tokenize(clip_at(samples, sample_rate, SAMPLE_RATE)).to(torch.int32)

    def embedding(self, samples, sample_rate: int) -> torch.Tensor:
        """The clip's speaker embedding: `(1, 192)` float32."""
        return self.campplus.embed(clip_at(samples, sample_rate, SAMPLE_RATE))

    def prompt(self, samples, sample_rate: int, trim: bool = True) -> Prompt:
        """A prompt clip's features; `trim` applies upstream's twice-the-tokens rule (as it does at a
        24 kHz release for the text-to-speech modes; conversion keeps the prompt whole)."""
        prompt = Prompt(self.speech_token(samples, sample_rate), self.speech_feat(samples, sample_rate), self.embedding(samples, sample_rate))
        return self.trimmed(prompt) if trim else prompt

    def trimmed(self, prompt: Prompt) -> Prompt:
        """A whole prompt as the text-to-speech modes take it: trimmed to twice the tokens at a 24 kHz release."""
        return trim_to_tokens(prompt) if self.sample_rate == 24000 else prompt

    # -- the dicts ------------------------------------------------------------------------------------

    @staticmethod
    def _prompt_inputs(prompt: Prompt) -> dict[str, torch.Tensor]:
        tokens, feat = prompt.speech_token, prompt.speech_feat
        return {
            "llm_prompt_speech_token": tokens,
            "llm_prompt_speech_token_len": _length(tokens.shape[1]),
            "flow_prompt_speech_token": tokens,
            "flow_prompt_speech_token_len": _length(tokens.shape[1]),
            "prompt_speech_feat": feat,
            "prompt_speech_feat_len": _length(feat.shape[1]),
            "llm_embedding": prompt.embedding,
            "flow_embedding": prompt.embedding,
        }

    def zero_shot(self, text: str, prompt_text: str, prompt: Prompt) -> dict[str, torch.Tensor]:
        """Upstream's `frontend_zero_shot` inputs: say `text` in the prompt's voice, the LM continuing
        from the prompt's text and tokens. `prompt` as `prompt()` makes it (trimmed)."""
        prompt_ids, prompt_len = self.text_token(prompt_text)
        ids, ids_len = self.text_token(text)
        return {"prompt_text": prompt_ids, "prompt_text_len": prompt_len, **self._prompt_inputs(prompt), "text": ids, "text_len": ids_len}

    def cross_lingual(self, text: str, prompt: Prompt) -> dict[str, torch.Tensor]:
        """Upstream's `frontend_cross_lingual` inputs: the voice without the prompt's words (the LM
        gets no prompt text or tokens)."""
        inputs = self.zero_shot(text, "", prompt)
        for key in ("prompt_text", "prompt_text_len", "llm_prompt_speech_token", "llm_prompt_speech_token_len"):
            del inputs[key]
        return inputs

    def instruct(self, text: str, instruct_text: str, prompt: Prompt) -> dict[str, torch.Tensor]:
        """Upstream's `frontend_instruct2` inputs (v2's and v3's instruct): the instruction in the
        prompt text's place, the LM without the prompt's tokens."""
        inputs = self.zero_shot(text, instruct_text, prompt)
        del inputs["llm_prompt_speech_token"], inputs["llm_prompt_speech_token_len"]
        return inputs

    def convert(self, source, source_rate: int, prompt: Prompt) -> dict[str, torch.Tensor]:
        """Upstream's `frontend_vc` inputs: the source clip's tokens spoken in the prompt's voice.
        `prompt` as `prompt(..., trim=False)` makes it (upstream does not trim it here)."""
        source_tokens = self.speech_token(source, source_rate)
        return {
            "source_speech_token": source_tokens,
            "source_speech_token_len": _length(source_tokens.shape[1]),
            "flow_prompt_speech_token": prompt.speech_token,
            "flow_prompt_speech_token_len": _length(prompt.speech_token.shape[1]),
            "prompt_speech_feat": prompt.speech_feat,
            "prompt_speech_feat_len": _length(prompt.speech_feat.shape[1]),
            "flow_embedding": prompt.embedding,
        }
