"""CosyVoice's text tokenizer: Qwen's byte-level BPE from `CosyVoice-BlankEN/` with CosyVoice's
special tokens added, giving upstream's ids.

Upstream builds it with transformers (`AutoTokenizer` on the BlankEN folder: a fast tokenizer
converted from `vocab.json` and `merges.txt`, the folder's added tokens 151643-151645) and then
adds its own special tokens in a fixed order, each new one taking the next id: v2's 19 (from
`<|endofprompt|>` = 151646 to `[mn]` = 151662), v3's the same followed by `<|endofsystem|>` and
260 phone tokens (`[AA]`, ..., `[ǜ]`). koe builds the same pipeline with the `tokenizers` library:
NFC, Qwen2's split regex, the byte-level mapping, BPE; special tokens matched first and never
split or normalised. Encoding adds nothing around the text (no BOS/EOS).

Normalisation of the text (numbers, symbols; upstream's wetext front end) is not done here.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers

from koe.engines.cosyvoice.config import BLANK_FOLDER, ConfigError

__all__ = ["SPECIAL_TOKENS", "TextTokenizer"]

QWEN2_SPLIT = r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""

_V2 = (
    "<|endoftext|>",  # upstream's eos and pad token (already in the vocabulary)
    "<|im_start|>",
    "<|im_end|>",
    "<|endofprompt|>",
    "[breath]",
    "<strong>",
    "</strong>",
    "[noise]",
    "[laughter]",
    "[cough]",
    "[clucking]",
    "[accent]",
    "[quick_breath]",
    "<laughter>",
    "</laughter>",
    "[hissing]",
    "[sigh]",
    "[vocalized-noise]",
    "[lipsmack]",
    "[mn]",
)
_PHONES = (
    "AA AA0 AA1 AA2 AE AE0 AE1 AE2 AH AH0 AH1 AH2 AO AO0 AO1 AO2 AW AW0 AW1 AW2 AY AY0 AY1 AY2 B CH D DH EH EH0 EH1 EH2 ER ER0 "
    "ER1 ER2 EY EY0 EY1 EY2 F G HH IH IH0 IH1 IH2 IY IY0 IY1 IY2 JH K L M N NG OW OW0 OW1 OW2 OY OY0 OY1 OY2 P R S SH T TH UH "
    "UH0 UH1 UH2 UW UW0 UW1 UW2 V W Y Z ZH a ai an ang ao b c ch d e ei en eng f g h i ian in ing iu ià iàn iàng iào iá ián iáng "
    "iáo iè ié iòng ióng iù iú iā iān iāng iāo iē iě iōng iū iǎ iǎn iǎng iǎo iǒng iǔ j k l m n o ong ou p q r s sh t u uang ue "
    "un uo uà uài uàn uàng uá uái uán uáng uè ué uì uí uò uó uā uāi uān uāng uē uě uī uō uǎ uǎi uǎn uǎng uǐ uǒ vè w x y z zh à "
    "ài àn àng ào á ái án áng áo è èi èn èng èr é éi én éng ér ì ìn ìng í ín íng ò òng òu ó óng óu ù ùn ú ún ā āi ān āng āo ē "
    "ēi ēn ēng ě ěi ěn ěng ěr ī īn īng ō ōng ōu ū ūn ǎ ǎi ǎn ǎng ǎo ǐ ǐn ǐng ǒ ǒng ǒu ǔ ǔn ǘ ǚ ǜ"
)
#: The special tokens each version's tokenizer adds, in upstream's order (existing ones keep their ids).
SPECIAL_TOKENS: dict[int, tuple[str, ...]] = {2: _V2, 3: (*_V2, "<|endofsystem|>", *(f"[{p}]" for p in _PHONES.split()))}


def _merges(path: Path) -> list[tuple[str, str]]:
    merges = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        line = line.strip()
        if not line or (i == 0 and line.startswith("#version")):
            continue
        pair = line.split()
        if len(pair) != 2:
            raise ConfigError(f"{path}: line {i + 1} is not a merge (two symbols)")
        merges.append((pair[0], pair[1]))
    return merges


class TextTokenizer:
    """Text -> ids (and back) as upstream's `get_qwen_tokenizer(..., version)` gives them."""

    def __init__(self, folder: str | Path, version: int) -> None:
        """`folder`: a released model folder (its `CosyVoice-BlankEN/`) or the BlankEN folder itself."""
        if version not in SPECIAL_TOKENS:
            raise ConfigError(f"CosyVoice version {version!r}: koe's tokenizer covers 2 or 3")
        folder = Path(folder)
        blank = folder / BLANK_FOLDER if (folder / BLANK_FOLDER).is_dir() else folder
        for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
            if not (blank / name).is_file():
                raise ConfigError(f"{blank}: no {name} (CosyVoice's text tokenizer is Qwen's, in {BLANK_FOLDER}/)")
        vocab = json.loads((blank / "vocab.json").read_text(encoding="utf-8"))
        tokenizer = Tokenizer(models.BPE(vocab, _merges(blank / "merges.txt"), unk_token=None, fuse_unk=False, byte_fallback=False))
        tokenizer.normalizer = normalizers.NFC()
        tokenizer.pre_tokenizer = pre_tokenizers.Sequence(
            [pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False), pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
        )
        tokenizer.decoder = decoders.ByteLevel()
        config = json.loads((blank / "tokenizer_config.json").read_text(encoding="utf-8"))
        for key, entry in sorted(config.get("added_tokens_decoder", {}).items(), key=lambda kv: int(kv[0])):
            token = AddedToken(
                entry["content"],
                single_word=entry.get("single_word", False),
                lstrip=entry.get("lstrip", False),
                rstrip=entry.get("rstrip", False),
                normalized=entry.get("normalized", False),
                special=entry.get("special", True),
            )
            if token.special:
                tokenizer.add_special_tokens([token])
            else:
                tokenizer.add_tokens([token])
            if tokenizer.token_to_id(entry["content"]) != int(key):
                raise ConfigError(
                    f"{blank}/tokenizer_config.json: {entry['content']!r} is id {key}, but the vocabulary puts it at {tokenizer.token_to_id(entry['content'])}"
                )
        tokenizer.add_special_tokens([AddedToken(t, normalized=False, special=True) for t in SPECIAL_TOKENS[version]])
        self.tokenizer, self.version = tokenizer, version
        self.special_ids = frozenset(tokenizer.token_to_id(t) for t in SPECIAL_TOKENS[version]) | {int(k) for k in config.get("added_tokens_decoder", {})}

    def encode(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int], skip_special_tokens: bool = True) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=skip_special_tokens)

    def token_id(self, token: str) -> int | None:
        return self.tokenizer.token_to_id(token)

    def __len__(self) -> int:
        return self.tokenizer.get_vocab_size(with_added_tokens=True)
