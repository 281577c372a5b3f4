"""g2p_en's parts that GPT-SoVITS's English front end keeps (g2p_en 2.1, Kyubyong Park and Jongseok
Kim, Apache-2.0): its neural model, which spells out a word no dictionary has, and its table of
homographs (words read two ways by part of speech: "refuse", "present", ...).

The model is a GRU encoder-decoder over letters: the word's letters (a-z, anything else `<unk>`)
then `</s>` are embedded and run through the encoder GRU; from its last state the decoder GRU,
fed `<s>` and then each phoneme it chose, picks the highest-scoring phoneme (greedy) until `</s>`
or 20 phonemes. koe computes it in numpy float32 with g2p_en's own expressions in g2p_en's order,
so the argmax at every step is g2p_en's.

Its weights (`checkpoint20.npz`, 3.3 MB) and `homographs.en` come with the `g2p_en` package, read
from where it is installed without importing it: importing g2p_en downloads NLTK data at import
time (and loads NLTK's CMUdict, which GPT-SoVITS replaces with its own dictionaries).
"""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

import numpy as np

__all__ = ["G2pEnModel", "g2p_en_folder", "homographs"]

GRAPHEMES = ("<pad>", "<unk>", "</s>", *"abcdefghijklmnopqrstuvwxyz")
PHONEMES = (
    "<pad>",
    "<unk>",
    "<s>",
    "</s>",
    *"AA0 AA1 AA2 AE0 AE1 AE2 AH0 AH1 AH2 AO0 AO1 AO2 AW0 AW1 AW2 AY0 AY1 AY2 B CH D DH EH0 EH1 EH2 ER0 ER1 ER2 EY0 EY1 EY2 F G HH".split(),
    *"IH0 IH1 IH2 IY0 IY1 IY2 JH K L M N NG OW0 OW1 OW2 OY0 OY1 OY2 P R S SH T TH UH0 UH1 UH2 UW UW0 UW1 UW2 V W Y Z ZH".split(),
)
START, END = PHONEMES.index("<s>"), PHONEMES.index("</s>")
MAX_PHONEMES = 20


def g2p_en_folder() -> Path:
    """The installed g2p_en package's folder (found, not imported)."""
    spec = importlib.util.find_spec("g2p_en")
    if spec is None or not spec.submodule_search_locations:
        raise ModuleNotFoundError("GPT-SoVITS's English front end needs the g2p_en package (its model and homograph table): pip install g2p_en")
    return Path(next(iter(spec.submodule_search_locations)))


@functools.cache
def homographs() -> dict[str, tuple[list[str], list[str], str]]:
    """word -> (pronunciation for the part of speech, the other pronunciation, that part of
    speech's Penn tag prefix), from g2p_en's `homographs.en` (`WORD|PRON1|PRON2|POS` lines)."""
    table = {}
    for line in (g2p_en_folder() / "homographs.en").read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            continue
        word, first, other, tag = line.strip().split("|")
        table[word.lower()] = (first.split(), other.split(), tag)
    return table


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return 1 / (1 + np.exp(-x))


def _gru_step(x, h, w_ih, w_hh, b_ih, b_hh):
    """One GRU step, gates r, z then n (PyTorch's layout), as g2p_en computes it."""
    gates_x = np.matmul(x, w_ih.T) + b_ih
    gates_h = np.matmul(h, w_hh.T) + b_hh
    cut = gates_x.shape[-1] * 2 // 3
    r, z = np.split(_sigmoid(gates_x[:, :cut] + gates_h[:, :cut]), 2, -1)
    n = np.tanh(gates_x[:, cut:] + r * gates_h[:, cut:])
    return (1 - z) * n + z * h


class G2pEnModel:
    """g2p_en's letters-to-phonemes model, `predict(word)` its greedy phonemes."""

    def __init__(self, weights: dict[str, np.ndarray]) -> None:
        self.w = weights
        self.letter_ids = {g: i for i, g in enumerate(GRAPHEMES)}

    @classmethod
    @functools.cache
    def load(cls, path: Path | None = None) -> G2pEnModel:
        """The model from `path` (default: the installed g2p_en's `checkpoint20.npz`), cached."""
        with np.load(path or g2p_en_folder() / "checkpoint20.npz", allow_pickle=False) as z:
            return cls({k: z[k] for k in z.files})

    def _gru(self, x: np.ndarray, prefix: str, h: np.ndarray) -> np.ndarray:
        w = self.w
        return _gru_step(x, h, w[f"{prefix}_w_ih"], w[f"{prefix}_w_hh"], w[f"{prefix}_b_ih"], w[f"{prefix}_b_hh"])

    def predict(self, word: str) -> list[str]:
        """The phonemes of `word` (lower case letters; other characters read as `<unk>`)."""
        w = self.w
        ids = [self.letter_ids.get(c, self.letter_ids["<unk>"]) for c in [*word, "</s>"]]
        letters = np.take(w["enc_emb"], np.expand_dims(ids, 0), axis=0)
        h = np.zeros((1, w["enc_w_hh"].shape[-1]), np.float32)
        for t in range(len(word) + 1):
            h = self._gru(letters[:, t, :], "enc", h)
        previous = np.take(w["dec_emb"], [START], axis=0)
        out = []
        for _ in range(MAX_PHONEMES):
            h = self._gru(previous, "dec", h)
            best = (np.matmul(h, w["fc_w"].T) + w["fc_b"]).argmax()
            if best == END:
                break
            out.append(PHONEMES[best])
            previous = np.take(w["dec_emb"], [best], axis=0)
        return out
