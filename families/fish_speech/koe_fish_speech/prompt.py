"""Fish Speech S2's prompt: the conversation upstream's `generate_long` builds, as plain data, encoded
into the `(num_codebooks + 1, T)` int64 tensor its `encode_for_inference` gives (row 0 the token ids,
rows 1.. the codes under the semantic tokens, zeros elsewhere).

The conversation, one message after another, each `<|im_start|>ROLE\\n[MODALITY]`, its parts, then
`<|im_end|>\\n` (every part tokenized on its own; a codes part is `<|semantic:c0|>` ids in row 0 and
its rows of codes below):

    system     "convert the provided text to speech"                       (no reference), or
               "convert the provided text to speech reference to the following:\\n\\nText:\\n",
               the references' transcripts joined by "\\n" (each tagged `<|speaker:i|>`, i its
               place, unless it holds a speaker tag already), "\\n\\nSpeech:\\n", and their codes
               one after the other as one codes part
    user       a batch of the text
    assistant  `<|voice|>`, the codes generated for that batch (upstream's iterative prompt)
    ...        (a user and an assistant message per earlier batch)
    user       the next batch
    assistant  `<|voice|>`, left open: generation goes on from here

The text is cut into batches at its speaker tags: each turn a tag and the text up to the next tag
(trailing space dropped), at most 5 turns and `chunk_length` UTF-8 bytes a batch (a turn longer
than that alone), turns joined by "\\n"; a text without tags is one batch, however long.

What upstream accepts and koe refuses (`text_batches`, `SpeechPrompt`), each with a clear error:
an empty text, words before the first speaker tag (upstream drops them silently), a speaker tag
with nothing after it, special tokens typed in a text or a transcript (`<|im_end|>`,
`<|semantic:N|>`: upstream reads them as the prompt's control tokens), a reference without a
transcript, and codes of the wrong shape or out of range. For S2 the audio masks and parts upstream
returns beside the tensor are always None (no audio-feature parts), so only the tensor is built.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

import numpy as np
import torch

from koe.engines.base import EmptyText, RequestError, UnsupportedVoice
from koe_fish_speech.tokenizer import IM_END, IM_START, MODALITIES, FishTokenizer

__all__ = [
    "MAX_TURNS",
    "OPEN_ASSISTANT",
    "SPEAKER_TAG",
    "Message",
    "PromptTooLong",
    "Reference",
    "SpeechPrompt",
    "assistant_message",
    "check_length",
    "check_speakers",
    "encode_conversation",
    "encode_message",
    "group_turns",
    "reference_speakers",
    "reference_transcripts",
    "split_turns",
    "system_message",
    "text_batches",
    "user_message",
]

SYSTEM = "convert the provided text to speech"
SYSTEM_WITH_REFERENCES = "convert the provided text to speech reference to the following:\n\nText:\n"
BEFORE_REFERENCE_CODES = "\n\nSpeech:\n"
SPEAKER_TAG = re.compile(r"<\|speaker:\d+\|>")
#: Turns a batch holds at most (upstream's `max_speakers=5`: it counts turns, not speakers).
MAX_TURNS = 5
#: Room upstream keeps for generation: a prompt longer than `max_seq_len - 2048` is refused.
GENERATION_ROOM = 2048

Part = str | torch.Tensor


class PromptTooLong(RequestError):
    param = "input"


class Reference(Protocol):
    """A voice to clone: its clip's codes `(num_codebooks, frames)` and the clip's transcript
    (`voice.FishSpeechVoice` is one)."""

    text: str
    codes: torch.Tensor


@dataclass(frozen=True)
class Message:
    """One message: `<|im_start|>role\\n`, the modality's token, the parts (texts, and codes
    `(num_codebooks, frames)`), and `<|im_end|>\\n` unless left `open`."""

    role: Literal["system", "user", "assistant"]
    parts: tuple[Part, ...] = ()
    modality: Literal["text", "voice", "interleave"] | None = None
    open: bool = False


#: The assistant's turn the model speaks into.
OPEN_ASSISTANT = Message("assistant", (), modality="voice", open=True)


# -- the text's batches ------------------------------------------------------------------------------
def split_turns(text: str) -> list[str]:
    """The text's speaker turns: each tag with the text up to the next tag, trailing whitespace
    dropped. Text before the first tag is not in any turn; no tags, no turns (upstream's
    `split_text_by_speaker`)."""
    pieces = SPEAKER_TAG.split(text)
    tags = SPEAKER_TAG.findall(text)
    return [(tag + body).strip() for tag, body in zip(tags, pieces[1:], strict=True)]


def group_turns(turns: Sequence[str], max_turns: int = MAX_TURNS, max_bytes: int = 300) -> list[str]:
    """Turns joined by "\\n" into batches of at most `max_turns` turns and `max_bytes` UTF-8 bytes;
    a turn longer than `max_bytes` makes a batch alone (upstream's `group_turns_into_batches`)."""
    if max_turns < 1:
        raise ValueError(f"max_turns must be >= 1, got {max_turns}")
    batches: list[str] = []
    batch: list[str] = []
    size = 0
    for turn in turns:
        n = len(turn.encode("utf-8"))
        if batch and (len(batch) >= max_turns or size + n > max_bytes):
            batches.append("\n".join(batch))
            batch, size = [], 0
        batch.append(turn)
        size += n
    if batch:
        batches.append("\n".join(batch))
    return batches


def text_batches(text: str, chunk_length: int) -> list[str]:
    """The batches upstream's `generate_long` speaks one after another (`chunk_length`: the bytes a
    batch holds at most, upstream's request 200 and command line 300), after koe's checks: a text
    that says nothing, words before the first speaker tag and a tag with nothing after it are
    refused (`EmptyText`, `RequestError`)."""
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, not {type(text).__name__}")
    if isinstance(chunk_length, bool) or not isinstance(chunk_length, int) or chunk_length < 0:
        raise ValueError(f"chunk_length must be an int >= 0, got {chunk_length!r}")
    if not text.strip():
        raise EmptyText("the text to speak is empty")
    first = SPEAKER_TAG.search(text)
    if first is None:
        return [text]  # upstream speaks a text without tags as given, in one batch
    before = text[: first.start()]
    if before.strip():
        raise RequestError(
            f"the text has words before its first speaker tag ({before.strip()[:40]!r}), which would not be spoken: "
            f"start it with a speaker tag such as {first.group()} or write it without tags",
            param="input",
        )
    turns = split_turns(text)
    for turn in turns:
        tag = SPEAKER_TAG.match(turn).group()
        if not turn[len(tag) :].strip():
            raise RequestError(f"the speaker tag {tag} has no text after it: remove it or write what the speaker says", param="input")
    return group_turns(turns, MAX_TURNS, chunk_length)


# -- the conversation ---------------------------------------------------------------------------------
def reference_transcripts(texts: Sequence[str]) -> str:
    """The references' transcripts as the system message holds them: each tagged `<|speaker:i|>`
    (i its place) unless it holds a speaker tag, joined by "\\n"."""
    return "\n".join(t if SPEAKER_TAG.search(t) else f"<|speaker:{i}|>{t}" for i, t in enumerate(texts))


def reference_speakers(transcripts: Sequence[str]) -> set[int]:
    """The speakers the references give a voice: the tags their transcripts carry, else their places."""
    speakers: set[int] = set()
    for i, t in enumerate(transcripts):
        tags = [int(m.group(1)) for m in re.finditer(r"<\|speaker:(\d+)\|>", t)]
        speakers.update(tags or [i])
    return speakers


def check_speakers(text: str, transcripts: Sequence[str]) -> None:
    """With references, every speaker tag of the text must name a speaker they give a voice
    (`reference_speakers`): a tag without a reference is a `RequestError` (without references the
    model voices every speaker itself)."""
    if not transcripts:
        return
    known = reference_speakers(transcripts)
    unknown = sorted({int(m.group(1)) for m in re.finditer(r"<\|speaker:(\d+)\|>", text)} - known)
    if unknown:
        names = ", ".join(f"<|speaker:{n}|>" for n in unknown)
        given = ", ".join(f"<|speaker:{n}|>" for n in sorted(known))
        raise RequestError(
            f"the text names {names}, which no reference clip voices (the voice's clips are {given}): "
            "give a clip for each speaker (FishSpeechVoice.joined) or tag the text with these speakers",
            param="input",
        )


def system_message(references: Sequence[tuple[str, torch.Tensor]] = ()) -> Message:
    """The system message: the task, and the references' (transcript, codes) pairs where given."""
    if not references:
        return Message("system", (SYSTEM,))
    codes = torch.cat([c for _, c in references], dim=1)
    return Message("system", (SYSTEM_WITH_REFERENCES, reference_transcripts([t for t, _ in references]), BEFORE_REFERENCE_CODES, codes))


def user_message(text: str) -> Message:
    return Message("user", (text,))


def assistant_message(codes: torch.Tensor) -> Message:
    """An assistant's spoken answer: `<|voice|>` and its codes."""
    return Message("assistant", (codes,), modality="voice")


def _encode_part(part: Part, tokenizer: FishTokenizer, num_codebooks: int) -> torch.Tensor:
    if isinstance(part, str):
        ids = torch.tensor(tokenizer.encode(part), dtype=torch.long)
        out = torch.zeros(num_codebooks + 1, ids.numel(), dtype=torch.long)
        out[0] = ids
        return out
    codes = part.to(torch.long)  # (num_codebooks, frames)
    return torch.cat([(codes[:1] + tokenizer.semantic_begin_id), codes], dim=0)


def encode_message(message: Message, tokenizer: FishTokenizer, num_codebooks: int) -> torch.Tensor:
    """One message as `(num_codebooks + 1, n)` int64 (see the module's doc)."""
    head = f"{IM_START}{message.role}\n{MODALITIES[message.modality] if message.modality else ''}"
    parts = [head, *message.parts] + ([] if message.open else [f"{IM_END}\n"])
    return torch.cat([_encode_part(p, tokenizer, num_codebooks) for p in parts], dim=1)


def encode_conversation(messages: Sequence[Message], tokenizer: FishTokenizer, num_codebooks: int) -> torch.Tensor:
    """The messages as upstream's `Conversation.encode_for_inference` encodes them: `(num_codebooks
    + 1, T)` int64. Codes are taken as given (`SpeechPrompt` checks them)."""
    return torch.cat([encode_message(m, tokenizer, num_codebooks) for m in messages], dim=1)


def check_length(prompt: torch.Tensor, max_seq_len: int) -> None:
    """Refuse a prompt that leaves the model less than upstream's 2048 positions to speak in."""
    if prompt.shape[-1] > max_seq_len - GENERATION_ROOM:
        raise PromptTooLong(
            f"the prompt is {prompt.shape[-1]} tokens long, more than the model's {max_seq_len} positions less {GENERATION_ROOM} "
            "for the speech: shorten the text's batches (chunk_length) or the reference clips"
        )


# -- the prompt of each batch ---------------------------------------------------------------------------
class SpeechPrompt:
    """The conversation of one `generate_long` sample, encoded as it grows: `next_prompt(batch)` for
    each batch's prompt, then `add_codes(codes)` with the codes generated for it (upstream's
    iterative prompt), before the next batch.

    Strategy: every part is tokenized on its own upstream, so each message is encoded once and the
    prompt is the concatenation of the messages so far, the user's batch and the open assistant turn.
    """

    def __init__(self, tokenizer: FishTokenizer, num_codebooks: int, references: Sequence[Reference] = ()) -> None:
        self.tokenizer = tokenizer
        self.num_codebooks = num_codebooks
        pairs = []
        for i, ref in enumerate(references):
            what = f"reference {i}'s transcript"
            if not isinstance(ref.text, str) or not ref.text.strip():
                raise UnsupportedVoice(f"reference {i} has no transcript: Fish Speech reads the words of each reference clip before its codes")
            tokenizer.check_text(ref.text, what)
            pairs.append((ref.text, self._checked_codes(ref.codes, f"reference {i}'s codes", allow_empty=False)))
        self._messages = [encode_message(system_message(pairs), tokenizer, num_codebooks)]
        self._open = encode_message(OPEN_ASSISTANT, tokenizer, num_codebooks)
        self._waiting = False

    def _checked_codes(self, codes: torch.Tensor | np.ndarray, what: str, allow_empty: bool) -> torch.Tensor:
        codes = torch.as_tensor(codes)
        if codes.dtype.is_floating_point or codes.dtype.is_complex or codes.dtype == torch.bool:
            raise ValueError(f"{what} must be integers, not {codes.dtype}")
        if codes.dim() != 2 or codes.shape[0] != self.num_codebooks:
            raise ValueError(f"{what} must be ({self.num_codebooks}, frames), got {tuple(codes.shape)}")
        if codes.shape[1] == 0 and not allow_empty:
            raise ValueError(f"{what} hold no frames")
        codes = codes.to(torch.long).cpu()
        if codes.numel() and (codes.min() < 0 or codes[0].max() >= self.tokenizer.semantic_codes):
            raise ValueError(f"{what} must be >= 0, and the first row < {self.tokenizer.semantic_codes} (the semantic tokens)")
        return codes

    def next_prompt(self, text: str) -> torch.Tensor:
        """The prompt for a batch of the text: the conversation so far, the batch as the user's
        message and the assistant's open `<|voice|>` turn, `(num_codebooks + 1, T)` int64."""
        if self._waiting:
            raise RuntimeError("add_codes(codes) for the previous batch first")
        if not isinstance(text, str) or not text.strip():
            raise EmptyText("the text to speak is empty")
        self.tokenizer.check_text(text)
        self._messages.append(encode_message(user_message(text), self.tokenizer, self.num_codebooks))
        self._waiting = True
        return torch.cat([*self._messages, self._open], dim=1)

    def add_codes(self, codes: torch.Tensor) -> None:
        """The codes `(num_codebooks, frames)` generated for the last batch, the assistant's answer
        in the prompts of the batches after it."""
        if not self._waiting:
            raise RuntimeError("next_prompt(text) first: there is no batch to add codes to")
        codes = self._checked_codes(codes, "the generated codes", allow_empty=True)
        self._messages.append(encode_message(assistant_message(codes), self.tokenizer, self.num_codebooks))
        self._waiting = False
