"""The released layout against upstream (its source at ace7c47 in `.oracle-cosyvoice`): upstream's
`AutoModel` loads koe's random-weight folders whole (every `.pt` with `strict=True`, the ONNX
graphs in onnxruntime, the tokenizer from CosyVoice-BlankEN), what its yaml loader builds from
them is what koe's reader reads without executing the yaml, and koe reads upstream's own yamls of
the released architectures (CosyVoice2-0.5B, Fun-CosyVoice3-0.5B-2512) to the release's sizes;
koe's `llm.pt` at the released size has the names, order and shapes of upstream's LM built from
those yamls on a Qwen2.5-0.5B-sized backbone."""

from __future__ import annotations

import json

import pytest
from oracle_harness import run_oracle

from koe.engines.cosyvoice.config import parse_config, parse_yaml, read_config
from koe.engines.cosyvoice.fixtures import VARIANTS, lm_shapes, qwen_config_for, write_random_model

pytestmark = pytest.mark.oracle


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    root = tmp_path_factory.mktemp("cosyvoice-folders")
    return [write_random_model(root / variant, variant, seed=11) for variant in VARIANTS]


@pytest.fixture(scope="module")
def upstream(folders, tmp_path_factory):
    return run_oracle("folder_load", {"folders": [str(f) for f in folders]}, tmp_path_factory.mktemp("load"), family="cosyvoice")[1]


@pytest.mark.parametrize("i", range(len(VARIANTS)), ids=list(VARIANTS))
def test_upstream_loads_the_folder_and_builds_what_koe_reads(i, folders, upstream):
    found = upstream["folders"][i]
    config, qwen = read_config(folders[i])
    assert found["class"] == f"CosyVoice{config.version}" and found["sample_rate"] == config.sample_rate
    assert found["llm"] == (31 if config.version == 2 else 29)  # llm.pt's tensors, the tied head included
    assert found["special"]["<|endofprompt|>"] == 151646 and found["special"]["[breath]"] == 151647
    assert found["special"]["<|endofsystem|>"] == (151663 if config.version == 3 else None)
    built, lm = found["built"], config.lm
    assert built["llm_class"] == ("Qwen2LM" if config.version == 2 else "CosyVoice3LM")
    assert (built["llm_input_size"], built["llm_output_size"], built["speech_token_size"]) == (lm.input_size, lm.output_size, lm.speech_token_size)
    assert built["ids"] == [lm.sos, lm.task_id, lm.eos, lm.fill]
    assert built["stop_token_ids"] == list(lm.stop_tokens)
    assert built["mix_ratio"] == list(lm.mix_ratio)
    assert built["sampling"] == {"top_p": lm.sampling.top_p, "top_k": lm.sampling.top_k, "win_size": lm.sampling.win_size, "tau_r": lm.sampling.tau_r}
    assert built["tokenizer"] == {"skip_special_tokens": True, **({"version": "cosyvoice3"} if config.version == 3 else {})}
    assert built["feat_extractor"] == config.feat_extractor and built["allowed_special"] == config.tokenizer.allowed_special
    for key in ("sample_rate", "token_frame_rate", "token_mel_ratio", "chunk_size"):
        assert built[key] == getattr(config, key), key


@pytest.mark.parametrize("version", [2, 3])
def test_koe_reads_upstreams_released_yamls(version, upstream):
    config = parse_config(parse_yaml(upstream["released_yamls"][str(version)], {"qwen_pretrain_path": ""}), version)
    assert config.lm.input_size == config.lm.output_size == 896 and config.lm.vocab_size == (6564 if version == 2 else 6761)
    assert config.sample_rate == 24000 and config.chunk_size == 25 and config.spk_embed_dim == 192
    if version == 2:
        assert config.flow["encoder"]["num_blocks"] == 6 and config.flow["decoder"]["estimator"]["static_chunk_size"] == 50
    else:
        assert config.flow["decoder"]["estimator"]["depth"] == 22 and config.hift["conv_pre_look_right"] == 4


def test_the_released_size_llm_pt_has_upstreams_layout(tmp_path):
    blank = tmp_path / "blank"  # the job's input: the run's own folder lies beside it
    blank.mkdir()
    (blank / "config.json").write_text(json.dumps(qwen_config_for("real")))
    layouts = run_oracle("lm_release_layout", {"blank": str(blank)}, tmp_path / "run", family="cosyvoice")[1]
    for variant, version in VARIANTS.items():
        want = [(name, tuple(shape)) for name, shape in layouts[str(version)]]
        assert list(lm_shapes(variant, "real").items()) == want, variant
    assert len(layouts["2"]) == 295 and len(layouts["3"]) == 293  # 24 layers of 12 tensors, the tied head, the LM's own
