"""GPT-SoVITS v3 end to end against upstream's `TTS.run`, bit for bit, at the released DiT size.

The golden (goldens/infer_v3.npz; tests/oracle_gpt_sovits/infer_run.py) is upstream's
`TTS(TTS_Config(...)).run(inputs)` on koe's random v3 folder (golden_infer_v3.py: a v3 model and a
small BigVGAN), with 1-3 `sample_steps`, speed, serial and batched (`parallel_infer`: one CFM call
for every chunk, SOLA joins) vocoder synthesis and several fragments. Marked slow: the folder holds
a full-size DiT (~330 M numbers, about 30 s to write) and every CFM step runs at that size.

Through `koe.compat.gpt_sovits` (upstream's `TTS(TTS_Config(...)).run(inputs)`, compat_goldens.py) on
the same folder: the drop-in runs the same synthesis as koe's engine after reading upstream's inputs,
whose reading is proven on every case of v1, v2 and v2Pro (test_gpt_sovits_compat*.py), so each case
at this size runs once: `dit_goldens.DROP_IN_CASES` (speed, serial synthesis, several steps) through
the drop-in (upstream's int16 samples, and its floats before that step), every other case through
koe's engine. What the drop-in does after or instead of the synthesis on
v3 (`super_sampling`, `streaming_mode`'s fallback) is checked with the synthesis spied on.
"""

from __future__ import annotations

import dit_goldens
import infer_goldens
import pytest
import torch
from compat_goldens import DropIn
from sovits_goldens import array_sha256, check_recorded, fixtures_with, inputs, load_golden

from koe.engines.base import UnsupportedVoice
from koe.engines.gpt_sovits.fixtures_ap_bwe import TINY, write_ap_bwe
from koe.engines.gpt_sovits.synthesis import postprocess

pytestmark = pytest.mark.slow

G = inputs("infer_v3")
golden, folder, speaker = fixtures_with("infer_v3", infer_goldens.Speaker)


@pytest.fixture(scope="module")
def drop_in(folder):
    return DropIn(folder)


@pytest.mark.parametrize("name", dit_goldens.engine_cases(G.CASES))
def test_v3_run_equals_upstream(name, golden, speaker):
    dit_goldens.check_run(golden, name, speaker, "v3", 24000)


def test_v3_needs_a_transcript_and_one_clip(speaker, folder):
    dit_goldens.check_voice_rules(speaker, folder, "v3")


def test_a_v3_voice_keeps_its_mel_when_saved(speaker, tmp_path):
    dit_goldens.check_voice_saved(speaker, "v3", tmp_path)


def test_the_engine_contract_gives_upstreams_samples(golden, speaker):
    """Through `synthesize`, `sample_steps` and `parallel_infer` as koe's options: upstream's samples."""
    infer_goldens.check_through_synthesize(golden, "serial", speaker, {"sample_steps": 2, "parallel_infer": False})


def test_the_stream_is_upstreams_return_fragment(golden, speaker):
    """koe's stream (`fragments(streamed=True)`) is `return_fragment`: one chunk per batch of 4."""
    assert int(golden["fragments.count"]) == len(speaker.speak("fragments")) > 1


# -- the drop-in -----------------------------------------------------------------------------------
@pytest.mark.parametrize("name", dit_goldens.DROP_IN_CASES)
def test_the_drop_in_equals_upstream(name, golden, drop_in, monkeypatch):
    dit_goldens.check_drop_in_case(drop_in, golden, name, 24000, monkeypatch)


def test_set_ref_audio_reads_the_clip_alone_and_run_adds_the_transcript(drop_in, folder, monkeypatch):
    """api_v2's /set_refer_audio on v3: the clip is read without its transcript (its semantic tokens,
    spectrogram and mel), the run that brings `prompt_text` finishes the voice: the synthesis is given
    what a run on the same reference read before is given (the voice, its settings, no HuBERT
    layer-drop draws), spied on, not run (the cases above prove what it makes of them)."""
    import koe.compat.gpt_sovits as compat

    given = []
    monkeypatch.setattr(compat, "fragments", lambda models, voice, *args, **kwargs: given.append((models.hubert_draws, voice, args)) or iter(()))
    tts, case = drop_in.inputs(next(iter(G.CASES)))
    tts.set_ref_audio(str(folder / "ref.wav"))
    assert tts.prompt_cache["ref_audio_path"] == str(folder / "ref.wav")
    assert list(tts.run({**case, "ref_audio_path": None})) == []
    assert list(tts.run({**case, "ref_audio_path": str(folder / "ref.wav")})) == []
    (draws, preset, args), (draws_again, again, args_again) = given
    assert draws == draws_again == 0 and args == args_again
    assert preset.has_transcript and preset.phones == again.phones and preset.norm_text == again.norm_text
    for a, b in [(preset.semantic, again.semantic), (preset.bert, again.bert), (preset.mel, again.mel), *zip(preset.specs, again.specs, strict=True)]:
        assert torch.equal(a, b)


def test_streaming_mode_is_return_fragment_on_v3_as_upstreams(drop_in, monkeypatch):
    """Upstream's v3/v4 do not stream by chunks: streaming_mode runs return_fragment, with a
    warning (upstream prints it), its own options not read; the fragments' synthesis is spied on,
    not run (its samples are the `fragments` case's)."""
    import koe.compat.gpt_sovits as compat

    calls = []
    monkeypatch.setattr(compat, "fragments", lambda *args, **kwargs: calls.append(kwargs["streamed"]) or iter(()))
    tts, case = drop_in.inputs(next(iter(G.CASES)))
    with pytest.warns(UserWarning, match="return_fragment is used"):
        run = tts.run({**case, "streaming_mode": True, "return_fragment": False, "overlap_length": 0, "batch_size": 4})
    assert list(run) == [] and calls == [True]


def test_v3_needs_a_transcript(drop_in):
    tts, case = drop_in.inputs(next(iter(G.CASES)))
    with pytest.raises(UnsupportedVoice, match="prompt_text cannot be empty"):
        tts.run({**case, "prompt_text": ""})


def test_super_sampling_is_upstreams_and_goes_on_without_the_model(drop_in, monkeypatch, tmp_path):
    """v3's super_sampling through the drop-in: the audio a run makes (here the `ap_bwe` golden's
    `two` fragments, joined, spied in for the DiT's, whose samples the cases above prove) through
    AP-BWE found where upstream reads it (`tools/AP_BWE_main/24kto48k` under its root, the working
    directory): upstream's 48 kHz int16 (ap_bwe.npz); without the model a warning and the 24 kHz
    audio, as upstream prints and goes on."""
    import koe.compat.gpt_sovits as compat

    A = inputs("ap_bwe")
    sr_golden = load_golden("ap_bwe")
    A.write_inputs(tmp_path / "ap_bwe")
    check_recorded(sr_golden, tmp_path / "ap_bwe")
    fragments, interval = A.fragments(tmp_path / "ap_bwe", "two")
    audio = postprocess([fragments], None, interval).numpy()
    monkeypatch.setattr(compat, "fragments", lambda *args, **kwargs: iter([audio.copy()]))
    tts, case = drop_in.inputs(next(iter(G.CASES)))
    tts.sr_model = None
    monkeypatch.chdir(tmp_path)
    with pytest.warns(UserWarning, match="not super-sampled"):
        ((sr, pcm),) = list(tts.run({**case, "super_sampling": True}))
    assert sr == int(sr_golden["missing.sr"]) == 24000 and array_sha256(pcm) == str(sr_golden["missing.int16"])
    write_ap_bwe(tmp_path / compat.UPSTREAM_AP_BWE, TINY, A.SEED)
    ((sr, pcm),) = list(tts.run({**case, "super_sampling": True}))
    assert sr == int(sr_golden["two.sr"]) == 48000 and array_sha256(pcm) == str(sr_golden["two.int16"])
    assert tts.sr_model is not None and not tts.sr_model_not_exist
