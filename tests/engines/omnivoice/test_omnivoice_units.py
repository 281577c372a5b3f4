"""OmniVoice's parts without the oracle: config, the fixture in the released layout (koe loads it
strictly), the text front end, the length estimate, the step schedule, the audio edges, and the
oracle declaration."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import torch

from koe.engines.omnivoice import audio
from koe.engines.omnivoice.config import ConfigError, parse_audio_tokenizer_config, parse_config, read_audio_tokenizer_config, read_config
from koe.engines.omnivoice.fixtures import FIRST_MARKER_ID, MARKERS, audio_tokenizer_config_for, audio_tokenizer_shapes, config_for, write_random_model
from koe.engines.omnivoice.generate import Settings, schedule, unmask
from koe.engines.omnivoice.oracle import ORACLE
from koe.engines.omnivoice.synthesis import OmniVoiceModel, Output
from koe.engines.omnivoice.text import combine_text, estimate_frames, prompt_style, text_weight

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory) -> Path:
    return write_random_model(tmp_path_factory.mktemp("omnivoice") / "model")


@pytest.fixture(scope="module")
def model(model_dir) -> OmniVoiceModel:
    return OmniVoiceModel.load(model_dir)


def test_the_oracle_is_declared_with_its_files() -> None:
    assert ORACLE.package == "omnivoice==0.2.1" and ORACLE.venv == ".oracle-omnivoice" and ORACLE.shares_torch
    assert (ROOT / ORACLE.scripts / "generate.py").is_file()
    for name in (*ORACLE.requirements, *ORACLE.nodeps):
        lines = (ROOT / name).read_text().splitlines()
        assert not any(ln.lower().startswith("omnivoice") for ln in lines), "the package is pinned once, in its declaration"
    assert any(ln.startswith("transformers==5.") for ln in (ROOT / ORACLE.requirements[0]).read_text().splitlines())


def test_configs_of_both_sizes_parse_with_the_released_shapes() -> None:
    for size in ("tiny", "real"):
        c = parse_config(config_for(size))
        assert c.num_audio_codebook == 8 and c.audio_vocab_size == 1025 and c.audio_mask_id == 1024 and c.llm.vocab_size == 151676
        t = parse_audio_tokenizer_config(audio_tokenizer_config_for(size)[0])
        assert (t.hop_length, t.frame_rate, t.num_quantizers, t.semantic_downsample_factor) == (960, 25, 8, 2)
    real = parse_config(config_for("real")).llm
    assert (real.hidden_size, real.num_hidden_layers, real.num_attention_heads, real.num_key_value_heads, real.head_dim, real.rope_theta) == (
        1024,
        28,
        16,
        8,
        128,
        1e6,
    )


def test_config_errors_name_the_problem() -> None:
    with pytest.raises(ConfigError, match="not an OmniVoice config"):
        parse_config({"model_type": "qwen3"})
    bad = config_for()
    bad["llm_config"]["num_key_value_heads"] = 3
    with pytest.raises(ConfigError, match="multiple of num_key_value_heads"):
        parse_config(bad)
    with pytest.raises(ConfigError, match="HiggsAudio"):
        parse_audio_tokenizer_config({"model_type": "dac"})


def test_the_fixture_is_the_released_layout(model_dir) -> None:
    names = {p.relative_to(model_dir).as_posix() for p in model_dir.rglob("*") if p.is_file()}
    assert {"config.json", "model.safetensors", "tokenizer.json", "tokenizer_config.json"} <= names
    assert {"audio_tokenizer/config.json", "audio_tokenizer/model.safetensors", "audio_tokenizer/preprocessor_config.json"} <= names
    assert read_config(model_dir).llm.hidden_size == 32 and read_audio_tokenizer_config(model_dir).codebook_dim == 8
    added = {t["content"]: t["id"] for t in json.loads((model_dir / "tokenizer.json").read_text())["added_tokens"]}
    assert [added[m] for m in MARKERS] == list(range(FIRST_MARKER_ID, FIRST_MARKER_ID + 7))
    from safetensors import safe_open

    with safe_open(str(model_dir / "audio_tokenizer" / "model.safetensors"), "pt") as f:
        assert set(f.keys()) == set(audio_tokenizer_shapes(audio_tokenizer_config_for()[0]))
    with safe_open(str(model_dir / "model.safetensors"), "pt") as f:
        assert f.get_tensor("codebook_layer_offsets").tolist() == [i * 1025 for i in range(8)]


def test_the_text_front_end(model) -> None:
    assert combine_text("  world\r\n  again ", "Hello ") == "Hello world again"
    assert combine_text("你好 world （x）\t\tend") == "你好world (x) end"
    assert prompt_style(None, None, False) == "<|lang_start|>None<|lang_end|><|instruct_start|>None<|instruct_end|>"
    style, ids = model.text.prompt_ids("Hi [laughter] there", None, "en", None, denoise=False)
    assert style[0] == FIRST_MARKER_ID + 1 and style[-1] == FIRST_MARKER_ID + 4
    assert ids[0] == FIRST_MARKER_ID + 5 and ids[-1] == FIRST_MARKER_ID + 6
    tag = model.text.ids("[laughter]")
    assert any(ids[i : i + len(tag)] == tag for i in range(len(ids)))  # the tag tokenized on its own


def test_the_length_estimate() -> None:
    assert text_weight("Nice to meet you.") == pytest.approx(14.1)
    assert estimate_frames("Nice to meet you.") == 39  # 25 frames, lifted: 50 * (25 / 50) ** (1 / 3)
    long = "word " * 40
    assert estimate_frames(long) == int(text_weight(long) / (text_weight("Nice to meet you.") / 25))
    assert estimate_frames(long, speed=2.0) == int(text_weight(long) / (text_weight("Nice to meet you.") / 25) / 2.0)
    assert estimate_frames("你好") > estimate_frames("ab")  # CJK weighs 3, Latin 1


@pytest.mark.parametrize(("frames", "steps", "shift"), [(46, 32, 0.1), (5, 8, 1.0), (1, 4, 0.5), (300, 16, 0.1)])
def test_the_schedule_unmasks_every_slot(frames, steps, shift) -> None:
    counts = schedule(frames, 8, steps, shift)
    assert len(counts) == steps and sum(counts) == frames * 8 and min(counts) >= 0


def test_generation_is_seeded_and_fills_the_grid(model) -> None:
    items = model.items(["Hello there.", "Two."], frames=[7, 4])
    torch.manual_seed(3)
    first = unmask(model.lm, items, Settings(num_step=4))
    torch.manual_seed(3)
    again = unmask(model.lm, items, Settings(num_step=4))
    assert [c.shape for c in first] == [(8, 7), (8, 4)]
    assert all(torch.equal(a, b) for a, b in zip(first, again, strict=True))
    assert all(int(c.max()) < 1024 for c in first)  # no mask id left
    wave = model.finish(model.decode(first[0]), None, Output(postprocess_output=False))
    assert wave.dtype == np.float32 and wave.shape == (7 * 960 + 2 * 2400,)
    assert 0 < np.abs(wave).max() <= 0.5 + 1e-6  # a 0.5 peak before the fades


def test_silence_removal_shortens_long_pauses_through_16_bit() -> None:
    rate = 24000
    tone = (0.3 * np.sin(np.arange(rate) * 0.05)).astype(np.float32)
    clip = np.concatenate([np.zeros(rate // 2, np.float32), tone, np.zeros(2 * rate, np.float32), tone, np.zeros(rate, np.float32)])
    out = audio.remove_silence(clip, rate, 500, 100, 100)
    assert out.dtype == np.float32
    assert 2 * rate + rate * 0.5 < out.shape[0] < 2 * rate + rate * 1.3  # the 2 s pause kept as about 2 x 500 ms, the edges as 100 ms
    assert np.array_equal(out * 32768, np.round(out * 32768))  # 16-bit values
    assert audio.remove_silence(np.zeros(rate, np.float32), rate, 500, 100, 100).shape[0] < rate // 2


def test_fades_pads_and_joins() -> None:
    x = np.ones(10000, np.float32)
    y = audio.fade_and_pad(x, 24000, 0.1, 0.1)
    assert y.shape == (10000 + 4800,) and y[2400] == 0 and y[2400 + 5000] == 1
    assert audio.fade_and_pad(np.zeros(0, np.float32), 24000).shape == (0,)
    joined = audio.cross_fade_chunks([x.copy(), x.copy()], 24000)
    assert joined.shape == (20000 + 2400,) and joined[10000:12400].max() == 0
    assert np.array_equal(audio.loudness(np.array([0.2, -0.4], np.float32), None), np.array([0.25, -0.5], np.float32))


def test_a_voice_prompt_from_a_clip(model) -> None:
    from koe.engines.omnivoice.reference import ReferenceError, add_punctuation

    t = np.arange(int(1.5 * 16000)) / 16000
    clip = (0.05 * np.sin(2 * np.pi * 150 * t)).astype(np.float32)
    voice = model.prompt((np.stack([clip, clip]), 16000), "  some words ")
    assert voice.text == "some words." and voice.rms == pytest.approx(0.05 / np.sqrt(2), rel=1e-3)
    assert voice.codes.shape[0] == 8 and voice.codes.dtype == torch.long and int(voice.codes.max()) < 1024
    assert model.frames_for("Hello.", voice=voice) > 0
    with pytest.raises(ReferenceError, match="transcript"):
        model.prompt((clip, 16000), None)
    with pytest.raises(ReferenceError, match="silent"):
        model.prompt((np.zeros(16000, np.float32), 16000), "words")
    assert add_punctuation("你好") == "你好。" and add_punctuation("Hi!") == "Hi!" and add_punctuation("  ") == ""
    wave = model.generate(["Hi there."], Settings(num_step=2), voices=[voice])[0]
    assert wave.dtype == np.float32 and wave.ndim == 1


def test_voice_design_instructions() -> None:
    from koe.engines.omnivoice.design import InvalidInstruction, resolve_instruct

    assert resolve_instruct("Female, Low Pitch", "Hello") == "female, low pitch"
    assert resolve_instruct("female, low pitch", "你好") == "女，低音调"  # Chinese text: translated
    assert resolve_instruct("女，british accent", "你好") == "female, british accent"  # an accent keeps it English
    assert resolve_instruct("male, 四川话", "Hello") == "男，四川话"  # a dialect makes it Chinese
    assert resolve_instruct("  ", "x") is None and resolve_instruct(None) is None
    with pytest.raises(InvalidInstruction, match="did you mean 'female'"):
        resolve_instruct("femal", "Hello")
    with pytest.raises(InvalidInstruction, match="mix a Chinese dialect and an English accent"):
        resolve_instruct("四川话, british accent")
    with pytest.raises(InvalidInstruction, match="conflicting"):
        resolve_instruct("male, female")


def test_languages() -> None:
    from koe.engines.omnivoice.languages import UnknownLanguage, language_names, resolve_language

    assert len(language_names()) == 646
    assert resolve_language("English") == "en" and resolve_language("en") == "en" and resolve_language("none") is None and resolve_language(None) is None
    with pytest.raises(UnknownLanguage, match="Klingon"):
        resolve_language("Klingon")


def test_long_texts_are_cut_after_punctuation(model) -> None:
    from koe.engines.omnivoice.synthesis import Chunking
    from koe.engines.omnivoice.text import chunk_text

    assert chunk_text("Mr. Smith came. He left!", 12) == ["Mr. Smith came.", "He left!"]  # no cut after "Mr."
    assert chunk_text("A. B. C. D.", 5) == ["A. B.", "C.", "D."]
    assert chunk_text("Hi. \u201cYes,\u201d he said.", 6) == ["Hi.", "\u201cYes,\u201d", "he said."]  # a closing mark joins the sentence before
    assert chunk_text("O. Then more words here.", 4, 3) == ["O. Then more words here."]  # a short first chunk joins the next
    assert chunk_text("", 10) == []
    long = "One sentence here. Another one there. And a third one, longer than the rest."
    torch.manual_seed(0)
    (wave,) = model.generate([long], Settings(num_step=2), chunking=Chunking(audio_chunk_duration=1.0, audio_chunk_threshold=1.0))
    assert wave.dtype == np.float32 and wave.shape[0] > 2 * 2400
