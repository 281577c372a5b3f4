"""Text front ends: tokenizers that reproduce upstream's ids."""

from .qwen_tokenizer import (
    MISTRAL_FIX_SPLIT_REGEX,
    QWEN2_SPLIT_REGEX,
    QwenTokenizer,
    RegexBranch,
    TokenizerFilesError,
    branch_for_config,
    pretokenizer_branch,
)
from .qwen_vocab import (
    QWEN3_TTS_ADDED_TOKENS,
    RELEASED_TRANSFORMERS_VERSION,
    ReleasedVocabularyMissing,
    Vocabulary,
    released_tokenizer_config,
    released_vocabulary_available,
    resolve_vocabulary,
    stamp_transformers_version,
    write_qwen_tokenizer_files,
)

__all__ = [
    "MISTRAL_FIX_SPLIT_REGEX",
    "QWEN2_SPLIT_REGEX",
    "QWEN3_TTS_ADDED_TOKENS",
    "RELEASED_TRANSFORMERS_VERSION",
    "QwenTokenizer",
    "RegexBranch",
    "ReleasedVocabularyMissing",
    "TokenizerFilesError",
    "Vocabulary",
    "branch_for_config",
    "pretokenizer_branch",
    "released_tokenizer_config",
    "released_vocabulary_available",
    "resolve_vocabulary",
    "stamp_transformers_version",
    "write_qwen_tokenizer_files",
]
