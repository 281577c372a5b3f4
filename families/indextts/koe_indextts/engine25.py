"""The IndexTTS 2.5 engine: text in a language + a cloned voice (+ an emotion) -> 2.5's front end ->
per segment the GPT's codes (its CAM++ speaker row, the language embedding), the 2.5 codec's frames,
flow matching, BigVGAN v2 -> 22.05 kHz audio.

Release 2's engine (`koe_indextts.engine2`) with 2.5's model (`koe_indextts.model25`) and front end
(`koe_indextts.front25`): the voices, the emotion (a second clip, the emotion options, or one read
from a text by the release's emotion model: upstream's 2.5 has `use_emo_text` too), the order of the
draws, the silence between segments and the streaming (a chunk per segment, then its silence) are
release 2's. One request is one upstream `infer_v2_5.IndexTTS2.infer` call, its first with the
voice's clip: `seed=N` gives upstream's samples after `torch.manual_seed(N)` (w2v-BERT's draws for
the speaker clip, twice, and the emotion clip, made at every request).

What 2.5 adds: the request's `language` is upstream's required `lang` (a code of
`spec.LANGUAGES_25`, a name such as "english", or left out: guessed from the text by
`spec.language_25`); the options `duration_factor` (the speech's length: the length regulator's
target is `int(frames * 1.72 * duration_factor)`) and `text_normalization`. The front end runs
strict (`front25`): an annotation left open, a Japanese reading not in kana, or a text with nothing
left to speak is refused where upstream would speak it anyway.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import torch

from koe.engines.base import EmptyText, InvalidOption, RequestError, SynthesisRequest, UnsupportedLanguage
from koe.engines.engine import Checked
from koe.engines.spec import SpecError
from koe.runtime.device import resolve_device
from koe_indextts import spec
from koe_indextts.beam import Sampling
from koe_indextts.engine2 import IndexTTS2Engine
from koe_indextts.front25 import FrontEnd25, JapaneseUnavailable, UnknownLanguage
from koe_indextts.model25 import IndexTTS25, Speaker25
from koe_indextts.s2mel import LENGTH_RATIO
from koe_indextts.text25 import language_id
from koe_indextts.text_tokenizer import TextError

__all__ = ["CODE_RATE", "IndexTTS25Engine"]

CODE_RATE = 22050 / 256 / (2 * LENGTH_RATIO)  # codes a second at duration_factor 1 (a code is 2 codec frames, 1.72 mel frames each)


class IndexTTS25Engine(IndexTTS2Engine):
    """A loaded IndexTTS 2.5 release. Not re-entrant: one call at a time."""

    defaults = {**spec.DEFAULTS_25, "do_sample": True}  # upstream's 2.5 always samples too
    model: IndexTTS25
    text: FrontEnd25

    @classmethod
    def load(cls, folder: Path, device: torch.device) -> IndexTTS25Engine:  # type: ignore[override]
        """A release 2.5 folder (checked by `IndexTTSEngine.load`), strictly, in float32 on the CPU;
        its auxiliary models from its `hf_cache/`, as upstream's 2.5 reads them."""
        try:
            model = IndexTTS25.load(folder)
        except KeyError as e:
            raise SpecError(f"{folder / 'config.yaml'}: the setting {e.args[0]!r} is missing: a damaged file; pull the release again") from e
        return cls(folder, model, model.front, resolve_device(device))

    # -- the language --------------------------------------------------------------------------------
    def check_language(self, language: str | None) -> str | None:
        """The code 2.5's front end takes (None: guessed from the text in `check_options`)."""
        if language is None or language.strip().lower() in ("", "auto"):
            return None
        return spec.language_25(language)[0]

    def check_options(self, request: SynthesisRequest, checked: Checked) -> Checked:
        checked = super().check_options(request, checked)
        if checked.language is None:
            checked = replace(checked, language=spec.language_25(None, request.text)[0])
        return checked

    # -- what 2.5 does its own way -------------------------------------------------------------------
    def text_pieces(self, text: str, c: Checked) -> list[torch.Tensor]:
        """2.5's segments of `text` in the request's language (`IndexTTS25.text_segments`, strict)."""
        s = c.settings
        try:
            pieces, _ = self.model.text_segments(text, c.language, int(s["max_text_tokens_per_segment"]), bool(s["text_normalization"]))
        except UnknownLanguage as e:
            raise UnsupportedLanguage(str(e)) from e
        except JapaneseUnavailable as e:
            raise RequestError(str(e), param="language") from e
        except TextError as e:
            if str(e).startswith("nothing to speak"):
                raise EmptyText(f"the text holds nothing to speak (only punctuation or symbols): {text[:40]!r}") from e
            raise RequestError(str(e), param="input") from e
        most = self.model.lm.cfg.text_positions
        longest = max(len(ids) - self.model.lm.prompt_padding(ids) + 2 for ids in pieces)  # with the GPT's start and stop ids
        if longest > most:
            raise InvalidOption(
                f"max_text_tokens_per_segment={s['max_text_tokens_per_segment']}: a segment takes {longest} text positions, more than "
                f"this model's GPT has ({most}); give a smaller one",
                param="max_text_tokens_per_segment",
            )
        return pieces

    def speak_piece(self, ids: torch.Tensor, speaker: Speaker25, emovec: torch.Tensor, sampling: Sampling, c: Checked) -> tuple[torch.Tensor, torch.Tensor]:  # type: ignore[override]
        duration = float(c.settings["duration_factor"])
        try:
            return self.model.segment(ids, language_id(c.language), speaker, emovec, sampling, duration, c.cancel)
        except ValueError as e:  # the GPT drew its stop code first: nothing to decode (upstream fails too)
            raise RequestError(f"{e}; another seed draws again", param="seed") from e

    def code_rate(self, settings: dict) -> float:
        return CODE_RATE / float(settings["duration_factor"])

    def segment_info(self, c: Checked) -> dict:
        return {"language": c.language}
