"""Opt-in reference padding for Qwen3-TTS cloning (`ref_pad_seconds`): off by default (the prompt
and the speech are upstream's), exact when on (zeros appended at the clip's own rate, as
faster-qwen3-tts does), named in the metadata and the saved prompt, part of the prompt cache's key."""

from __future__ import annotations

import numpy as np
import pytest
import soundfile as sf
import torch
from fixtures_models import model_folder

import koe
from koe.engines.base import InvalidOption, SynthesisRequest, VoicePromptMismatch, VoiceReference, collect
from koe.engines.qwen3_tts.voice import VoicePrompt, pad_reference
from koe.service.storage import Database
from koe.service.voices.library import VoiceLibrary, prompt_key

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off")  # short frame budgets on random weights

REF_TEXT = "This is the reference recording."
PAD = "ref_pad_seconds"


def _clip(seconds: float, sr: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    t = np.arange(int(seconds * sr)) / sr
    x = 0.3 * np.sin(2 * np.pi * 150 * t * (1 + 0.05 * np.sin(2 * np.pi * 4 * t))) + 0.03 * rng.standard_normal(t.size)
    return x.astype(np.float32)


@pytest.fixture(scope="module")
def base(tmp_path_factory):
    return koe.load(model_folder(tmp_path_factory.getbasetemp(), "base"))


@pytest.fixture(scope="module")
def ref(tmp_path_factory):
    path = tmp_path_factory.mktemp("ref") / "ref16k.wav"
    sf.write(path, _clip(2.0, 16000), 16000)
    return path


def _same(a: VoicePrompt, b: VoicePrompt) -> bool:
    codes = (a.ref_code is None and b.ref_code is None) or (a.ref_code is not None and b.ref_code is not None and torch.equal(a.ref_code, b.ref_code))
    return codes and torch.equal(a.speaker_embedding, b.speaker_embedding)


def test_off_by_default_the_prompt_is_unchanged(base, ref):
    default = base.prepare_voice(str(ref), REF_TEXT)
    zero = base.prepare_voice(str(ref), REF_TEXT, ref_pad_seconds=0.0)
    assert _same(default, zero) and default.info == zero.info
    assert PAD not in default.info and default.ref_pad_seconds == 0.0


def test_padding_appends_zeros_at_the_clips_rate_before_encoding(base, ref):
    audio, sr = sf.read(ref, dtype="float32")
    padded = base.prepare_voice(str(ref), REF_TEXT, ref_pad_seconds=0.5)
    by_hand = base.prepare_voice((np.concatenate([audio, np.zeros(8000, np.float32)]), sr), REF_TEXT)
    plain = base.prepare_voice(str(ref), REF_TEXT)
    assert _same(padded, by_hand)  # codes and speaker embedding both from the padded clip, as faster-qwen3-tts
    assert padded.ref_code.shape[0] > plain.ref_code.shape[0] and not torch.equal(padded.speaker_embedding, plain.speaker_embedding)
    assert padded.info[PAD] == 0.5 and padded.ref_pad_seconds == 0.5
    assert padded.info["ref_seconds"] == plain.info["ref_seconds"] == 2.0  # the clip's own length
    assert len(pad_reference(audio, sr, 0.25)) == len(audio) + 4000 and pad_reference(audio, sr, 0.0) is audio


def test_an_x_vector_prompt_is_not_padded(base, ref):
    plain = base.prepare_voice(str(ref), x_vector_only=True)
    padded = base.prepare_voice(str(ref), x_vector_only=True, ref_pad_seconds=0.5)
    assert _same(plain, padded) and padded.ref_pad_seconds == 0.0


def test_the_padding_is_named_in_the_metadata_and_changes_the_speech(base, ref):
    plain, padded = base.prepare_voice(str(ref), REF_TEXT), base.prepare_voice(str(ref), REF_TEXT, ref_pad_seconds=0.5)
    kw = dict(language="english", seed=3, max_frames=8, do_sample=False, subtalker_dosample=False)
    a, b = base.generate("Cloned speech.", voice=plain, **kw), base.generate("Cloned speech.", voice=padded, **kw)
    assert a.metadata[PAD] == 0.0 and b.metadata[PAD] == 0.5 and a.metadata["precision"] == b.metadata["precision"]
    assert not (a.codes.shape == b.codes.shape and torch.equal(a.codes, b.codes) and np.array_equal(a.audio, b.audio))
    batch = base.generate(["One text.", "Two."], voice=[plain, padded], **kw)  # the batch path
    assert [r.metadata[PAD] for r in batch] == [0.0, 0.5]
    chunks = list(base.stream("Streamed speech.", voice=padded, first_chunk_frames=2, chunk_frames=2, **kw))
    assert chunks[-1].metadata[PAD] == 0.5


def test_the_request_option_must_match_the_prompt(base, ref):
    padded = base.prepare_voice(str(ref), REF_TEXT, ref_pad_seconds=0.5)
    plain = base.prepare_voice(str(ref), REF_TEXT)
    request = dict(text="Hello there.", language="english", seed=1, max_segment_s=0.4)
    out = collect(base.engine.synthesize(SynthesisRequest(voice=padded, options={PAD: 0.5}, **request)))
    assert out.metadata[PAD] == 0.5
    with pytest.raises(VoicePromptMismatch, match="prepared with 0 s") as e:
        list(base.engine.synthesize(SynthesisRequest(voice=plain, options={PAD: 0.5}, **request)))
    assert e.value.param == PAD
    xvec = base.prepare_voice(str(ref), x_vector_only=True)  # nothing to pad: the option does not apply
    assert collect(base.engine.synthesize(SynthesisRequest(voice=xvec, options={PAD: 0.5}, **request))).metadata[PAD] == 0.0


@pytest.mark.parametrize("value", [-0.1, 2.5, float("nan"), "0.5", True])
def test_bad_values_are_refused(base, ref, value):
    with pytest.raises(InvalidOption) as e:
        base.prepare_voice(str(ref), REF_TEXT, ref_pad_seconds=value)
    assert e.value.param == PAD
    with pytest.raises(InvalidOption):
        base.capabilities.prompt_options({PAD: value})
    with pytest.raises(InvalidOption):
        base.capabilities.options.validate({PAD: value})  # what the service and the server check
    with pytest.raises(InvalidOption):
        list(base.engine.synthesize(SynthesisRequest("Hi.", voice=base.prepare_voice(str(ref), REF_TEXT), options={PAD: value})))


def test_the_options_schema_has_it_on_base_models_only(base, tmp_path_factory):
    option = base.capabilities.options.get(PAD)
    assert option is not None and option.default == 0.0 and option.describe()["range"] == "in [0, 2]"
    assert base.capabilities.options.validate({PAD: 2}) == {PAD: 2.0}
    custom = koe.load(model_folder(tmp_path_factory.getbasetemp(), "custom_voice"))
    assert custom.capabilities.options.get(PAD) is None
    with pytest.raises(InvalidOption, match="Base models"):
        list(custom.engine.synthesize(SynthesisRequest("Hi.", voice="ryan", options={PAD: 0.5})))


def test_prompt_options_name_what_changes_a_prepared_prompt(base):
    assert base.capabilities.prompt_options(None) == base.capabilities.prompt_options({}) == base.capabilities.prompt_options({PAD: 0}) == {}
    assert base.capabilities.prompt_options({PAD: 0.5, "temperature": 0.7}) == {PAD: 0.5}


def test_a_saved_padded_prompt_keeps_its_padding(base, ref, tmp_path):
    padded = base.prepare_voice(str(ref), REF_TEXT, ref_pad_seconds=0.5)
    padded.save(tmp_path / "p")
    loaded = base.load_voice(tmp_path / "p")
    assert _same(padded, loaded) and loaded.ref_pad_seconds == 0.5


def test_cache_keys_of_padded_and_unpadded_prompts_differ(base, ref, tmp_path):
    assert prompt_key("qwen-base") == "qwen-base"  # unpadded: the folder it always had
    assert prompt_key("qwen-base", {PAD: 0.5}) == "qwen-base+ref_pad_seconds=0.5" != prompt_key("qwen-base", {PAD: 0.25})
    library = VoiceLibrary(tmp_path / "voices", Database(tmp_path / "koe.db"))
    library.add("kim", str(ref), REF_TEXT)
    made = []

    def prompt(options):
        variant = base.capabilities.prompt_options(options)

        def prepare(voice):
            made.append(variant)
            return base.prepare_voice(VoiceReference(str(voice.reference_path), voice.ref_text), **variant)

        return library.prompt_for("kim", "qwen-base", prepare, base.load_voice, variant=variant)

    plain, padded = prompt({}), prompt({PAD: 0.5})
    plain_again, padded_again = prompt({}), prompt({PAD: 0.5})
    assert made == [{}, {PAD: 0.5}]  # each prepared once, then loaded from its own folder
    assert plain_again.ref_pad_seconds == 0.0 and padded_again.ref_pad_seconds == 0.5
    assert _same(plain, plain_again) and _same(padded, padded_again) and not _same(plain, padded)
    assert library.get("kim").prepared_for == ["qwen-base", "qwen-base+ref_pad_seconds=0.5"]
