"""CosyVoice's yaml read as data (never executed), the Qwen2 config, and their checks."""

from __future__ import annotations

import json

import pytest

from koe.engines.cosyvoice.config import ConfigError, Node, parse_config, parse_qwen_config, parse_yaml, plain, read_config
from koe.engines.cosyvoice.fixtures import qwen_config_for, write_random_model, yaml_text


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-config")
    return {v: write_random_model(root / name, name, parts=("yaml", "blank")) for v, name in ((2, "CosyVoice2-0.5B"), (3, "Fun-CosyVoice3-0.5B-2512"))}


@pytest.mark.parametrize("version", [2, 3])
def test_a_written_folder_reads_back(folders, version):
    config, qwen = read_config(folders[version])
    assert config.version == version and config.sample_rate == 24000 and config.token_frame_rate == 25
    assert config.chunk_size == 25 and config.token_mel_ratio == 2 and config.num_decoding_left_chunks == -1
    lm = config.lm
    assert lm.input_size == lm.output_size == qwen.hidden_size == 32
    assert lm.speech_token_size == 6561 and lm.mix_ratio == (5, 15)
    assert (lm.sampling.top_p, lm.sampling.top_k, lm.sampling.win_size, lm.sampling.tau_r) == (0.8, 25, 10, 0.1)
    if version == 2:
        assert (lm.vocab_size, lm.sos, lm.task_id, lm.eos, lm.fill) == (6564, 0, 1, 6561, 6563)
    else:
        assert (lm.vocab_size, lm.sos, lm.task_id, lm.eos, lm.fill) == (6761, 6561, 6563, 6562, 6564)
    assert list(lm.stop_tokens) == list(range(6561, lm.vocab_size))
    assert config.tokenizer.version == f"cosyvoice{version}" and config.tokenizer.skip_special_tokens
    assert config.feat_extractor["n_fft"] == 1920 and config.feat_extractor["fmax"] == (8000 if version == 2 else None)
    assert config.classes["llm.llm"] == "cosyvoice.llm.llm.Qwen2Encoder"
    assert config.hift["istft_params"] == {"n_fft": 16, "hop_len": 4}
    assert config.flow["decoder"]["cfm_params"]["content"]["sigma_min"] == 1e-06  # a YAML 1.2 float, as HyperPyYAML reads it
    assert (qwen.num_hidden_layers, qwen.head_dim, qwen.rope_theta, qwen.tie_word_embeddings) == (2, 16, 1e6, True)


def test_references_resolve_with_overrides_and_arithmetic():
    text = "a: 3\nb: !ref <a>\nc: !ref <a> * <d> - 1\nd: 4\nobj: !new:pkg.Cls\n    x: !ref <b>\n    inner: !name:pkg.fn\n        y: [1, !ref <d>]\nseed: !apply:random.seed [7]\n"
    data = parse_yaml(text, {"a": 5})
    assert data["b"] == 5 and data["c"] == 19
    assert data["obj"] == Node("new", "pkg.Cls", {"x": 5, "inner": Node("name", "pkg.fn", {"y": [1, 4]})})
    assert data["seed"] == Node("apply", "random.seed", [7])
    assert plain(data["obj"]) == {"x": 5, "inner": {"y": [1, 4]}}


@pytest.mark.parametrize(
    "text, message",
    [
        ("a: !ref <nope>", "no top-level key 'nope'"),
        ("a: !ref <a>", "refers to itself"),
        ("a: 1\nb: !ref <a> ** 2", "arithmetic over numbers"),
        ("a: !ref __import__('os')", "names no key"),
        ("- 1\n- 2", "not a mapping"),
        ("a: [", "not a readable yaml"),
    ],
)
def test_bad_yaml_is_refused_clearly(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)").replace("*", r"\*")):
        parse_yaml(text)


def _mutated(version: int, old: str, new: str) -> dict:
    text = yaml_text("CosyVoice2-0.5B" if version == 2 else "Fun-CosyVoice3-0.5B-2512")
    assert old in text
    return parse_yaml(text.replace(old, new, 1), {"qwen_pretrain_path": "/x"})


@pytest.mark.parametrize(
    "version, old, new, message",
    [
        (2, "!new:cosyvoice.llm.llm.Qwen2LM", "!new:cosyvoice.llm.llm.CosyVoice3LM", "llm must be !new:cosyvoice.llm.llm.Qwen2LM"),
        (3, "!new:cosyvoice.llm.llm.CosyVoice3LM", "!new:cosyvoice.llm.llm.Qwen2LM", "llm must be !new:cosyvoice.llm.llm.CosyVoice3LM"),
        (2, "speech_token_size: 6561", "speech_token_size: 4096", "hard-codes ids past it"),
        (2, "top_k: 25", "top_k: 0", "top_k must be an integer of at least 1"),
        (2, "top_p: 0.8", "top_p: 1.5", r"top_p must be in \(0, 1\]"),
        (3, "    version: cosyvoice3\n", "", "uses 'cosyvoice3'"),
        (2, "!name:cosyvoice.utils.common.ras_sampling", "!name:cosyvoice.utils.common.topk_sampling", "llm.sampling must be"),
        (
            3,
            "flow: !new:cosyvoice.flow.flow.CausalMaskedDiffWithDiT",
            "flow: !new:cosyvoice.flow.flow.CausalMaskedDiffWithXvec",
            "flow is CausalMaskedDiffWithDiT",
        ),
        (2, "get_tokenizer: !name:", "get_tokenizer_x: !name:", "no 'get_tokenizer'"),
    ],
)
def test_a_yaml_that_is_not_a_releases_is_refused(version, old, new, message):
    with pytest.raises(ConfigError, match=message):
        parse_config(_mutated(version, old, new), version)


def test_the_backbone_config_is_checked(folders, tmp_path):
    raw = qwen_config_for("tiny")
    assert parse_qwen_config(raw).head_dim == 16
    for change, message in (
        ({"model_type": "llama"}, "CosyVoice's LM is a 'qwen2'"),
        ({"rope_scaling": {"type": "yarn"}}, "rope_scaling"),
        ({"use_sliding_window": True}, "use_sliding_window"),
        ({"num_attention_heads": 3}, "not a multiple of num_attention_heads"),
        ({"num_key_value_heads": 0}, "num_key_value_heads must be an integer"),
    ):
        with pytest.raises(ConfigError, match=message):
            parse_qwen_config({**raw, **change})
    folder = folders[2]
    blank = folder / "CosyVoice-BlankEN" / "config.json"
    saved = blank.read_text()
    try:
        blank.write_text(json.dumps({**raw, "hidden_size": 64, "num_attention_heads": 4}))
        with pytest.raises(ConfigError, match="not the backbone's hidden_size"):
            read_config(folder)
    finally:
        blank.write_text(saved)


def test_a_folder_holds_exactly_one_yaml(folders, tmp_path):
    with pytest.raises(ConfigError, match="exactly one of cosyvoice2.yaml or cosyvoice3.yaml, found 0"):
        read_config(tmp_path)
    (tmp_path / "cosyvoice2.yaml").write_text((folders[2] / "cosyvoice2.yaml").read_text())
    (tmp_path / "cosyvoice3.yaml").write_text((folders[3] / "cosyvoice3.yaml").read_text())
    with pytest.raises(ConfigError, match="found 2"):
        read_config(tmp_path)
