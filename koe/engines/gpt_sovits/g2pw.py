"""G2PW, GPT-SoVITS's polyphone disambiguation (upstream `GPT_SoVITS/text/g2pw/onnx_api.py`, from
PaddleSpeech's, from GitYCC/g2pW), natively: a sentence's characters to pinyin, the polyphonic ones by
g2pW's network (`g2pw_model.G2PWNet`, the weights read from the released `g2pW.onnx`).

The released model folder (`G2PWModel/`, the hub's `G2PWModel_1.1.zip`) holds `g2pW.onnx`, `config.py`,
`POLYPHONIC_CHARS.txt` (character TAB bopomofo-with-tone, one reading a line), `MONOPHONIC_CHARS.txt`,
`bopomofo_to_pinyin_wo_tune_dict.json` and `char_bopomofo_dict.json`; the tokenizer is the BERT folder's
(`bert_path`: chinese-roberta-wwm-ext-large). `config.py` is read as data (its literal assignments,
never executed), with g2pW's defaults for what it leaves out.

`G2PW.__call__(sentences)`, as upstream's converter:

1. Each sentence is converted to Traditional Chinese (Taiwan) with OpenCC's `s2tw` (the tables are the
   traditional characters of g2pW's training data); upstream asserts the length is kept.
2. Each character: polyphonic (in POLYPHONIC_CHARS, less upstream's `NON_POLYPHONIC`) -> a query for the
   network; monophonic (MONOPHONIC_CHARS less `NON_MONOPHONIC`) -> its listed reading; anything else ->
   pypinyin's TONE3 reading (with 5 for the neutral tone) of the sentence converted back to simplified
   by the normaliser's table, at the character's index (punctuation reads as itself).
3. The queries of a sentence see the sentence cut to 16 characters before the first and after the last
   polyphonic one; each text is lower-cased, split into words (runs of ASCII letters and digits, else one
   character), each word tokenized alone ([UNK] when it gives nothing); `[CLS] tokens [SEP]`, the query's
   position the first token of its character + 1; padded with zeros to the batch's longest. A text of
   more than 510 tokens is cut to 510 around the query, as upstream does.
4. Queries sharing a text run as one sentence (its first row) with all their masks, as upstream's
   de-duplication does (`g2pw_sentence_dedup`, on by default); when no text repeats, all rows at once.
5. Each query's label is the argmax of the probabilities (the first of equal maxima), its bopomofo turned
   into pinyin with the tone digit by the JSON table.

On the argmax: onnxruntime and torch do not compute the same float32 probabilities to the last bit
(different matrix kernels, onnxruntime's fused attention / layer norm / GELU), so koe picks upstream's label
unless a character's two best readings are within that rounding of each other, where the choice can differ.
Measured on the stand-in (tests' `chinese` golden, onnxruntime 1.32 with upstream's session options): the
probabilities at most 1.3e-6 apart, the closest top-2 gap of its 303 queries 0.010, every label equal.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

from koe.engines.gpt_sovits.bert_tokenizer import BertTokenizer
from koe.engines.gpt_sovits.g2pw_model import G2PWNet, read_g2pw_onnx
from koe.engines.gpt_sovits.text.zh_norm import traditional_to_simplified

__all__ = ["G2PW", "G2PWConfig", "G2PWFolderError", "Queries", "labels_of"]

# upstream's exceptions to the released character lists
NON_POLYPHONIC = frozenset("一不和咋嗲剖差攢倒難奔勁拗肖瘙誒泊听噢")
NON_MONOPHONIC = frozenset("似攢")
CONTEXT_CHARS = 16  # upstream's `g2pw_polyphonic_context_chars` default
MAX_TOKENS = 512


class G2PWFolderError(ValueError):
    """A G2PW model folder is missing a file, or its config asks for what koe does not build."""


@dataclass(frozen=True)
class G2PWConfig:
    """What a G2PW folder's `config.py` says the network is (g2pW's defaults where it is silent)."""

    use_mask: bool = True
    use_char_phoneme: bool = False
    use_conditional: bool = True
    conditional: tuple = (
        ("affect_location", "softmax"),
        ("bias", True),
        ("char+pos-second", True),
        ("char+pos-second_fm", False),
        ("char+pos-second_lowrank", False),
        ("char-linear", True),
        ("fix_mode", None),
        ("pos-linear", False),
    )  # the terms of `param_conditional` that shape the network, sorted
    use_pos: bool = True
    pos_joint_training: bool = True

    @classmethod
    def from_file(cls, path: Path) -> G2PWConfig:
        """The literal top-level assignments of `config.py`, read with `ast` (the file is never run)."""
        values = {}
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                try:
                    values[node.targets[0].id] = ast.literal_eval(node.value)
                except ValueError:
                    continue  # an expression (a path built from `root`): not the network's
        default = cls()
        conditional = dict(default.conditional)
        conditional.update({k: v for k, v in values.get("param_conditional", {}).items() if k in conditional})
        return cls(
            use_mask=values.get("use_mask", default.use_mask),
            use_char_phoneme=values.get("use_char_phoneme", default.use_char_phoneme),
            use_conditional=values.get("use_conditional", default.use_conditional),
            conditional=tuple(sorted(conditional.items())),
            use_pos=values.get("use_pos", default.use_pos),
            pos_joint_training=values.get("param_pos", {}).get("pos_joint_training", default.pos_joint_training),
        )

    def check(self, path: Path) -> None:
        """Refuse a configuration other than the release's (the only network `G2PWNet` builds)."""
        released = G2PWConfig()
        if self.use_char_phoneme or not self.use_mask or not self.use_conditional or not self.use_pos or not self.pos_joint_training:
            raise G2PWFolderError(f"{path}: koe runs g2pW as released (masked labels, conditional weights, joint POS head); this config differs")
        if dict(self.conditional) != dict(released.conditional):
            raise G2PWFolderError(f"{path}: param_conditional {dict(self.conditional)} is not the released {dict(released.conditional)}")


def labels_of(polyphonic: Sequence[tuple[str, str]]) -> tuple[list[str], dict[str, list[int]]]:
    """g2pW's labels (the sorted distinct readings) and each character's label indices in file order."""
    labels = sorted({reading for _, reading in polyphonic})
    index = {label: i for i, label in enumerate(labels)}
    readings: dict[str, list[int]] = {}
    for char, reading in polyphonic:
        readings.setdefault(char, []).append(index[reading])
    return labels, readings


def _pairs(path: Path) -> list[tuple[str, str]]:
    lines = path.read_text(encoding="utf-8").strip().split("\n")
    return [tuple(line.split("\t")) for line in lines]


def _words(text: str) -> tuple[list[str], list[tuple[int, int]]]:
    # upstream's `wordize_and_map`: spaces skipped, ASCII letter/digit runs one word, else one character
    words, spans, i = [], [], 0
    while i < len(text):
        if text[i] == " ":
            i += 1
            continue
        m = re.match(r"[a-zA-Z0-9]+", text[i:])
        end = i + (len(m.group(0)) if m else 1)
        words.append(text[i:end])
        spans.append((i, end))
        i = end
    return words, spans


@dataclass
class Queries:
    """The network's inputs for a batch of queries (upstream's `prepare_onnx_input`), int64 / float32 tensors."""

    input_ids: torch.Tensor  # (N, T)
    token_type_ids: torch.Tensor  # (N, T)
    attention_mask: torch.Tensor  # (N, T)
    phoneme_mask: torch.Tensor  # (N, L)
    char_ids: torch.Tensor  # (N,)
    position_ids: torch.Tensor  # (N,)


class G2PW:
    """G2PW over a model folder and a BERT tokenizer folder (see the module docstring)."""

    def __init__(self, folder: str | Path, tokenizer_folder: str | Path, net: G2PWNet | None = None) -> None:
        folder = Path(folder)
        for name in ("config.py", "POLYPHONIC_CHARS.txt", "MONOPHONIC_CHARS.txt", "bopomofo_to_pinyin_wo_tune_dict.json"):
            if not (folder / name).is_file():
                raise G2PWFolderError(f"{folder} is not a G2PW model folder: no {name}")
        G2PWConfig.from_file(folder / "config.py").check(folder / "config.py")
        self.labels, self.char_labels = labels_of(_pairs(folder / "POLYPHONIC_CHARS.txt"))
        self.chars = sorted(self.char_labels)
        self.char_ids = {c: i for i, c in enumerate(self.chars)}
        self.polyphonic = set(self.chars) - NON_POLYPHONIC
        self.monophonic = {c: r for c, r in _pairs(folder / "MONOPHONIC_CHARS.txt") if c not in NON_MONOPHONIC}
        self.bopomofo_to_pinyin = json.loads((folder / "bopomofo_to_pinyin_wo_tune_dict.json").read_text(encoding="utf-8"))
        self.tokenizer = BertTokenizer.from_folder(tokenizer_folder).tokenizer
        if net is None:
            onnx = next((p for p in (folder / "g2pW.onnx", folder / "g2pw.onnx") if p.is_file()), None)
            if onnx is None:
                raise G2PWFolderError(f"{folder}: no g2pW.onnx")
            net = read_g2pw_onnx(onnx, len(self.labels), len(self.chars))
        self.net = net
        self._opencc = None

    # --- readings ------------------------------------------------------------------------------------
    def pinyin(self, bopomofo: str) -> str | None:
        """A bopomofo reading with its tone digit -> pinyin with it ("ㄏㄤ2" -> "hang2"); None when the
        table lacks it (upstream prints a warning and keeps None)."""
        base = self.bopomofo_to_pinyin.get(bopomofo[:-1])
        return base + bopomofo[-1] if base else None

    def to_traditional(self, sentence: str) -> str:
        if self._opencc is None:
            import opencc

            self._opencc = opencc.OpenCC("s2tw")
        converted = self._opencc.convert(sentence)
        if len(converted) != len(sentence):
            raise ValueError(f"OpenCC s2tw changed the length of {sentence!r} (to {converted!r})")
        return converted

    # --- the network's inputs --------------------------------------------------------------------------
    def _tokens(self, text: str) -> tuple[list[str], list[int | None], list[tuple[int, int]]]:
        # upstream's `tokenize_and_map`: tokens, each character's token index, each token's character span
        words, spans = _words(text)
        tokens: list[str] = []
        token_spans: list[tuple[int, int]] = []
        for word, (start, _end) in zip(words, spans):
            pieces = self.tokenizer.encode(word, add_special_tokens=False).tokens
            if not pieces or pieces == ["[UNK]"]:
                token_spans.append((start, _end))
                tokens.append("[UNK]")
                continue
            at = start
            for piece in pieces:
                n = len(piece[2:] if piece.startswith("##") else piece)
                token_spans.append((at, at + n))
                tokens.append(piece)
                at += n
        # characters of a word point at the word's index, then each token's span at the token (upstream's order)
        word_of = [None] * len(text)
        for w, (start, end) in enumerate(spans):
            for i in range(start, end):
                word_of[i] = w
        for t, (start, end) in enumerate(token_spans):
            for i in range(start, end):
                word_of[i] = t
        return tokens, word_of, token_spans

    def queries(self, texts: list[str], query_ids: list[int]) -> Queries:
        """The network's inputs for each (text, query index) (upstream's `prepare_onnx_input`)."""
        rows: list[list[int]] = []
        masks, char_ids, positions = [], [], []
        cache: dict[str, tuple] = {}
        for text, query in zip(texts, query_ids, strict=True):
            text = text.lower()
            if text not in cache:
                cache[text] = self._tokens(text)
            tokens, text_to_token, token_spans = cache[text]
            if len(tokens) > MAX_TOKENS - 2:
                text, query, tokens, text_to_token = _truncate(text, query, tokens, text_to_token, token_spans)
            ids = [self.tokenizer.token_to_id(t) for t in ["[CLS]", *tokens, "[SEP]"]]
            unk = self.tokenizer.token_to_id("[UNK]")
            rows.append([unk if i is None else i for i in ids])
            char = text[query]
            mask = [0.0] * len(self.labels)
            for label in self.char_labels[char]:
                mask[label] = 1.0
            masks.append(mask)
            char_ids.append(self.char_ids[char])
            positions.append(text_to_token[query] + 1)
        width = max(len(r) for r in rows)
        ids = torch.tensor([r + [0] * (width - len(r)) for r in rows], dtype=torch.int64)
        attention = torch.tensor([[1] * len(r) + [0] * (width - len(r)) for r in rows], dtype=torch.int64)
        return Queries(ids, torch.zeros_like(ids), attention, torch.tensor(masks, dtype=torch.float32), torch.tensor(char_ids), torch.tensor(positions))

    # --- prediction ------------------------------------------------------------------------------------
    @torch.inference_mode()
    def probabilities(self, q: Queries) -> torch.Tensor:
        """The network's label probabilities (N, L) for `q`, all rows in one batch."""
        return self.net(q.input_ids, q.token_type_ids, q.attention_mask, q.phoneme_mask, q.char_ids, q.position_ids)

    def predict(self, texts: list[str], query_ids: list[int]) -> list[str]:
        """Each query's label (bopomofo with tone), with upstream's de-duplication of shared texts."""
        q = self.queries(texts, query_ids)
        groups: dict[str, list[int]] = {}
        for i, text in enumerate(texts):
            groups.setdefault(text, []).append(i)
        if len(texts) <= 1 or all(len(g) == 1 for g in groups.values()):
            return [self.labels[i] for i in self.probabilities(q).argmax(dim=-1).tolist()]
        labels: list[str] = [""] * len(texts)
        for rows in groups.values():
            first = rows[:1]  # the shared text's first row serves all its queries
            group = Queries(q.input_ids[first], q.token_type_ids[first], q.attention_mask[first], q.phoneme_mask[rows], q.char_ids[rows], q.position_ids[rows])
            for row, label in zip(rows, self.probabilities(group).argmax(dim=-1).tolist()):
                labels[row] = self.labels[label]
        return labels

    def __call__(self, sentences: list[str] | str) -> list[list[str | None]]:
        """Each sentence's characters as pinyin with tone digits ("hang2"), punctuation as itself, None
        where a predicted reading has no pinyin in the folder's table."""
        from pypinyin import Style, pinyin

        if isinstance(sentences, str):
            sentences = [sentences]
        sentences = [self.to_traditional(s) for s in sentences]
        results: list[list[str | None]] = []
        texts, model_ids, result_ids, owners = [], [], [], []
        for n, sentence in enumerate(sentences):
            fallback = pinyin(traditional_to_simplified(sentence), neutral_tone_with_five=True, style=Style.TONE3)
            result: list[str | None] = [None] * len(sentence)
            polyphones = []
            for i, char in enumerate(sentence):
                if char in self.polyphonic:
                    polyphones.append(i)
                elif char in self.monophonic:
                    result[i] = self.pinyin(self.monophonic[char])
                else:
                    result[i] = fallback[i][0]
            if polyphones:
                left = max(0, polyphones[0] - CONTEXT_CHARS)
                right = min(len(sentence), polyphones[-1] + CONTEXT_CHARS + 1)
                for i in polyphones:
                    texts.append(sentence[left:right])
                    model_ids.append(i - left)
                    result_ids.append(i)
                    owners.append(n)
            results.append(result)
        if texts:
            for n, i, label in zip(owners, result_ids, self.predict(texts, model_ids)):
                results[n][i] = self.pinyin(label)
        return results


def _truncate(text: str, query: int, tokens: list[str], text_to_token: list, token_spans: list) -> tuple:
    # upstream's `_truncate`: 510 tokens around the query's, shifted to stay inside the text
    keep = MAX_TOKENS - 2
    start = text_to_token[query] - keep // 2
    end = start + keep
    if start < 0:
        start, end = 0, keep
    elif end > len(tokens):
        start, end = start - (end - len(tokens)), len(tokens)
    first, last = token_spans[start][0], token_spans[end - 1][1]
    shifted = [None if i is None else i - start for i in text_to_token[first:last]]
    return text[first:last], query - first, tokens[start:end], shifted
