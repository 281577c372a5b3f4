"""IndexTTS 2's emotion from a text (upstream's `QwenEmotion`) against upstream's, bit for bit.

The golden (goldens/qwen_emotion.npz) is upstream's `QwenEmotion.inference` on koe's tiny emotion LM
(golden_qwen_emotion.py): the prompt's ids, the generated ids, the answer and its eight weights (or
the error upstream raised) for texts and seeds, in float16 (upstream's dtype) and float32; the last
logits of a tied-head LM; and upstream's parsing of fixed answers.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from goldens import array_sha256, check_recorded, inputs, load_golden, written
from koe_indextts.qwen_emotion import EmotionAnswerError, EmotionLMError, QwenEmotion, weights_from_answer

from koe.runtime.kv_cache import ConcatCache

G = inputs("qwen_emotion")


@pytest.fixture(scope="module")
def golden():
    return load_golden("qwen_emotion")


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    return written("qwen_emotion")


@pytest.fixture(scope="module")
def readers(folder):
    return {dtype: QwenEmotion.load(folder / "untied", getattr(torch, dtype)) for dtype in G.DTYPES}


def test_fixture_is_the_goldens(golden, folder):
    check_recorded(golden, folder)


@pytest.mark.parametrize("i", range(len(G.ANSWERS)))
def test_answers_read_as_upstream_reads_them(golden, i):
    answer, text = G.ANSWERS[i]
    if f"answer.{i}.error" in golden:
        with pytest.raises(EmotionAnswerError):
            weights_from_answer(answer, text)
    else:
        assert np.array_equal(np.array(weights_from_answer(answer, text), dtype=np.float64), golden[f"answer.{i}.weights"])


@pytest.mark.parametrize("dtype", G.DTYPES)
def test_readings_equal_upstream(golden, readers, dtype):
    """Every case: prompt ids (the folder's template and Qwen's tokenizer), the sampled ids (the global
    generator's draws), the answer after a think block, the weights or the error."""
    reader = readers[dtype]
    assert reader.lm.lm_head.weight.dtype == getattr(torch, dtype)
    for t, seed in G.CASES:
        key, text = f"{dtype}.{t}.{seed}", G.TEXTS[t]
        prompt = reader.prompt_ids(text)
        assert prompt == golden[f"{key}.prompt"].tolist(), key
        torch.manual_seed(seed)
        generated = reader.lm.generate(prompt, reader.settings)
        assert generated == golden[f"{key}.generated"].tolist(), key
        answer = reader.answer(generated)
        assert answer == str(golden[f"{key}.answer"]), key
        if f"{key}.error" in golden:
            with pytest.raises(EmotionAnswerError):
                weights_from_answer(answer, text)
        else:
            assert np.array_equal(np.array(weights_from_answer(answer, text)), golden[f"{key}.weights"]), key


@pytest.mark.parametrize("dtype", G.DTYPES)
def test_draws_leave_the_generator_as_upstream(readers, dtype):
    """`read` draws once per generated id when sampling (torch.multinomial's draws), no more."""
    reader = readers[dtype]
    t, seed = G.CASES[0]
    torch.manual_seed(seed)
    n = len(reader.read(G.TEXTS[t]).generated)
    after = torch.rand(4)
    torch.manual_seed(seed)
    for _ in range(n):
        torch.multinomial(torch.full((1, 151936), 1.0 / 151936), 1)
    assert torch.equal(torch.rand(4), after)


@pytest.mark.parametrize("dtype", G.DTYPES)
def test_tied_head_logits(golden, folder, dtype):
    reader = QwenEmotion.load(folder / "tied", getattr(torch, dtype))
    assert reader.lm.lm_head.weight is reader.lm.model.embed_tokens.weight
    messages = [{"role": "system", "content": "文本情感分类"}, {"role": "user", "content": G.TEXTS[0]}]
    assert reader.template.render(messages, enable_thinking=False) == str(golden["tied.prompt_text"])
    with torch.inference_mode():
        logits = reader.lm.last_logits(torch.tensor([reader.prompt_ids(G.TEXTS[0])]), 0, ConcatCache(reader.lm.cfg.decoder.num_layers))
    assert np.array_equal(logits[:, :1024].numpy(), golden[f"{dtype}.tied.logits_head"])
    assert array_sha256(logits) == str(golden[f"{dtype}.tied.logits_sha256"])


@pytest.mark.parametrize("dtype", G.DTYPES)
def test_a_sliding_window_in_the_config_moves_to_a_mask(golden, folder, dtype):
    """`sliding_window` (unused) shorter than the keys: transformers attends through its additive
    causal mask, not SDPA's causal flag; koe too, with the same ids and logits."""
    reader = QwenEmotion.load(folder / "window", getattr(torch, dtype))
    assert reader.lm.cfg.sliding_window == G.WINDOW
    for t, seed in G.WINDOW_CASES:
        key = f"{dtype}.window.{t}.{seed}"
        torch.manual_seed(seed)
        reading = reader.read(G.TEXTS[t])
        assert reading.generated == golden[f"{key}.generated"].tolist()
        assert np.array_equal(np.array(reading.weights), golden[f"{key}.weights"])
    with torch.inference_mode():
        logits = reader.lm.last_logits(torch.tensor([reader.prompt_ids(G.TEXTS[0])]), 0, ConcatCache(reader.lm.cfg.decoder.num_layers))
    assert array_sha256(logits) == str(golden[f"{dtype}.window.logits_sha256"])


def test_folder_errors(folder, tmp_path):
    with pytest.raises(EmotionLMError, match="qwen0.6bemo4-merge"):
        QwenEmotion.load(tmp_path / "qwen0.6bemo4-merge")
    broken = tmp_path / "lm"
    broken.mkdir()
    for name in ("config.json", "model.safetensors", "vocab.json", "merges.txt", "tokenizer_config.json"):
        (broken / name).write_bytes((folder / "untied" / name).read_bytes())
    (broken / "generation_config.json").write_text(json.dumps({"do_sample": True, "num_beams": 4}))
    with pytest.raises(EmotionLMError, match="num_beams"):
        QwenEmotion.load(broken)


def test_release_folder_without_the_emotion_lm(tmp_path):
    """Only an emotion read from a text needs the folder: its absence is an error that names it."""
    import yaml
    from koe_indextts.config import ConfigError, Release2, emotion_lm_folder
    from koe_indextts.fixtures2 import release_config

    (tmp_path / "config.yaml").write_text(yaml.safe_dump(release_config()))
    release = Release2.read(tmp_path)
    assert release.qwen_emo_path == "qwen0.6bemo4-merge"
    with pytest.raises(ConfigError, match=r"qwen0\.6bemo4-merge \(qwen_emo_path\) is missing"):
        emotion_lm_folder(tmp_path, release)
    (tmp_path / "config.yaml").write_text(yaml.safe_dump({**release_config(), "qwen_emo_path": "../elsewhere"}))
    with pytest.raises(ConfigError, match="qwen_emo_path"):
        Release2.read(tmp_path)


def test_release_2_takes_an_emotion_in_words_and_pulls_its_model():
    from koe_indextts import spec

    caps = spec.capabilities("IndexTTS-2")
    assert caps.instruct and not spec.capabilities("IndexTTS-1.5").instruct
    assert caps.options.validate({"emo_text": True}) == {"emo_text": True} and spec.DEFAULTS_2["emo_text"] is False
    (release,) = [r for r in spec.SPEC.released if r.repo_id == spec.REPO_2]
    (emotion,) = [h for h in release.files if h.subfolder == "qwen0.6bemo4-merge"]
    assert emotion.repo == spec.REPO_2 and emotion.dest == "qwen0.6bemo4-merge" and emotion.patterns() == ["qwen0.6bemo4-merge/*"]


def test_a_folder_with_tokenizer_json_only(golden, folder, tmp_path):
    """A folder whose tokenizer is `tokenizer.json` alone (what transformers reads first) gives the same ids."""
    from koe.engines.qwen3_tts.text.tokenizer import QwenTokenizer

    lm = tmp_path / "lm"
    lm.mkdir()
    for name in ("config.json", "generation_config.json", "model.safetensors", "tokenizer_config.json"):
        (lm / name).write_bytes((folder / "untied" / name).read_bytes())
    QwenTokenizer.from_folder(folder / "untied", branch="qwen2")._backend.save(str(lm / "tokenizer.json"))
    reader = QwenEmotion.load(lm, torch.float32)
    for t, seed in G.CASES:
        key = f"float32.{t}.{seed}"
        assert reader.prompt_ids(G.TEXTS[t]) == golden[f"{key}.prompt"].tolist()
        assert reader.answer(golden[f"{key}.generated"].tolist()) == str(golden[f"{key}.answer"])
