"""F5-TTS: every bad input gets a clear error (engine level, `load_engine(folder)`), and a failure
through the product (`koe speak`, `koe voices ...`) leaves nothing half-written.

Tiny random-weight models (`write_random_model`); requests use a few ODE steps.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
import yaml
from product_helpers import leftovers, library_voices, speechy, strict_koe_command, tiny_qwen, write_wav
from safetensors.torch import load_file, save_file

import koe
from koe.audio.errors import AudioError
from koe.engines.base import (
    EmptyText,
    InvalidOption,
    RequestError,
    SynthesisRequest,
    UnsupportedLanguage,
    UnsupportedVoice,
    VoicePromptMismatch,
    VoiceReference,
    collect,
)
from koe.engines.f5_tts.config import ARCHS, arch_yaml
from koe.engines.f5_tts.fixtures import write_random_model
from koe.engines.f5_tts.voice import F5Voice
from koe.runtime.weights import WeightsError

REF_TEXT = "A short test clip."
TEXT = "Hello there, this is koe."
FAST = {"nfe_step": 2}


@pytest.fixture(scope="module")
def folder(tmp_path_factory) -> Path:
    return write_random_model(tmp_path_factory.mktemp("f5-err") / "F5TTS_v1_Base", "F5TTS_v1_Base")


@pytest.fixture(scope="module")
def tts(folder):
    engine = koe.load(folder)
    yield engine
    engine.close()


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("f5-err-clips")
    rng = np.random.default_rng(0)
    short = np.zeros(int(1.5 * 24000), np.float32)
    short[: int(0.2 * 24000)] = speechy(0.2)  # 0.2 s of sound in 1.5 s: too short once trimmed
    (d / "text.wav").write_text("this is not audio at all")
    return {
        "good": write_wav(d / "good.wav", speechy(2.0)),
        "zeros": write_wav(d / "zeros.wav", np.zeros(2 * 24000, np.float32)),
        "hiss": write_wav(d / "hiss.wav", (1e-4 * rng.standard_normal(2 * 24000)).astype(np.float32)),  # under -50 dBFS
        "short": write_wav(d / "short.wav", short),
        "tiny": write_wav(d / "tiny.wav", speechy(0.2)),  # 0.2 s in all
        "text": d / "text.wav",
        "missing": d / "missing.wav",
    }


@pytest.fixture(scope="module")
def voice(tts, clips) -> F5Voice:
    return tts.prepare_voice(str(clips["good"]), REF_TEXT)


def synth(tts, text=TEXT, voice=None, **kw):
    options = {**FAST, **kw.pop("options", {})}
    return collect(tts.engine.synthesize(SynthesisRequest(text=text, voice=voice, options=options, seed=kw.pop("seed", 1), **kw)))


# -- the transcript ----------------------------------------------------------------------------
@pytest.mark.parametrize("ref_text", [None, "", "   ", "\n\t"])
def test_a_transcript_is_required(tts, clips, ref_text):
    with pytest.raises(UnsupportedVoice, match="needs the reference's transcript") as e:
        tts.prepare_voice(str(clips["good"]), ref_text)
    assert e.value.param == "voice"
    with pytest.raises(UnsupportedVoice, match="transcript"):
        tts.prepare_voice(VoiceReference(str(clips["good"]), ref_text))
    with pytest.raises(UnsupportedVoice, match="transcript"):
        tts.prepare_voice((speechy(2.0), 24000), ref_text)


def test_prepare_voice_without_transcript_argument(tts, clips):
    with pytest.raises(UnsupportedVoice, match="transcript"):
        tts.prepare_voice(str(clips["good"]))


# -- the reference audio -----------------------------------------------------------------------
@pytest.mark.parametrize(
    ("clip", "match"),
    [
        ("zeros", "silent"),
        ("hiss", "silent"),
        ("short", r"too short: 0\.2\d s .*at least 0\.3 s"),
        ("tiny", "too short"),
        ("text", "not a readable audio file"),
        ("missing", "no such audio file"),
    ],
)
def test_bad_references_are_clear_errors(tts, clips, clip, match):
    with pytest.raises(AudioError, match=match):
        tts.prepare_voice(str(clips[clip]), REF_TEXT)


def test_bad_reference_sources(tts):
    with pytest.raises(AudioError, match="empty"):
        tts.prepare_voice(b"", REF_TEXT)
    with pytest.raises(AudioError):
        tts.prepare_voice(b"RIFF\x00\x00\x00\x00WAVEnot really audio" * 4, REF_TEXT)
    with pytest.raises(AudioError, match="NaN or infinite"):
        tts.prepare_voice((np.full(48000, np.nan, np.float32), 24000), REF_TEXT)
    with pytest.raises(AudioError, match="sample rate"):
        tts.prepare_voice((speechy(2.0), 0), REF_TEXT)
    with pytest.raises(AudioError, match="unsupported reference audio source"):
        tts.prepare_voice(12345, REF_TEXT)


# -- the text ----------------------------------------------------------------------------------
@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_empty_text(tts, voice, text):
    with pytest.raises(EmptyText, match="text is empty") as e:
        synth(tts, text, voice)
    assert e.value.param == "input"
    with pytest.raises(EmptyText):
        tts.generate(text, voice=voice, nfe_step=2)


# -- options -----------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"nfe_step": 0}, r"nfe_step=0: must be in \[1, 1024\]"),
        ({"nfe_step": 2.5}, "nfe_step=2.5: must be a whole number"),
        ({"nfe_step": "many"}, "nfe_step='many'"),
        ({"speed": -1.0}, r"speed=-1.0: must be in \(0, 10\]"),
        ({"speed": 0}, "speed=0"),
        ({"target_rms": 0}, r"target_rms=0(\.0)?: must be in \(0, 1\]"),
        ({"cfg_strength": -0.5}, "cfg_strength=-0.5"),
        ({"fix_duration": 0}, "fix_duration=0"),
        ({"cross_fade_duration": -0.1}, "cross_fade_duration=-0.1"),
    ],
)
def test_option_out_of_range_names_the_option(tts, voice, options, match):
    with pytest.raises(InvalidOption, match=match) as e:
        synth(tts, voice=voice, options=options)
    assert e.value.param == next(iter(options))


def test_unknown_option_names_the_valid_ones(tts, voice):
    with pytest.raises(
        InvalidOption,
        match=r"unknown option\(s\) 'steps'; valid: nfe_step, cfg_strength, sway_sampling_coef, speed, "
        r"fix_duration, target_rms, cross_fade_duration",
    ) as e:
        synth(tts, voice=voice, options={"steps": 4})
    assert e.value.param == "steps"
    with pytest.raises(InvalidOption, match="'temperature'"):  # another family's option
        tts.generate(TEXT, voice=voice, temperature=0.7)
    with pytest.raises(InvalidOption, match="nfe_step=0"):  # the native API checks the same way
        tts.generate(TEXT, voice=voice, nfe_step=0)


def test_unsupported_language_lists_the_valid_ones(tts, voice):
    with pytest.raises(UnsupportedLanguage, match="'german'.*auto, chinese, english"):
        synth(tts, voice=voice, language="german")


def test_an_instruction_is_ignored_with_a_warning(tts, voice):
    with pytest.warns(UserWarning, match="no style instruction"):
        out = synth(tts, voice=voice, instruct="Whisper.")
    assert len(out.samples) > 0


# -- voices ------------------------------------------------------------------------------------
def test_a_preset_speaker_is_unsupported(tts):
    with pytest.raises(UnsupportedVoice, match="no preset speakers.*'alloy'.*clone") as e:
        synth(tts, voice="alloy")
    assert e.value.param == "voice"
    with pytest.raises(UnsupportedVoice, match="cloned voice.*prepare_voice"):
        synth(tts, voice=None)


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    yield from tiny_qwen(tmp_path_factory)


def test_a_voice_prompt_from_another_family(tts, qwen, voice, clips, tmp_path):
    qwen_prompt = qwen.prepare_voice(str(clips["good"]), REF_TEXT)
    with pytest.raises(VoicePromptMismatch, match="another model family.*F5-TTS"):
        synth(tts, voice=qwen_prompt)
    qwen_prompt.save(tmp_path / "qwen")
    with pytest.raises(VoicePromptMismatch, match="made for a qwen3_tts model, not F5-TTS"):
        tts.load_voice(tmp_path / "qwen")
    voice.save(tmp_path / "f5")
    with pytest.raises(VoicePromptMismatch, match="made for a f5_tts model, not Qwen3-TTS"):
        qwen.load_voice(tmp_path / "f5")
    # and the other way round: Qwen3-TTS refuses an F5-TTS prompt (its own words; a RequestError)
    with pytest.raises(RequestError, match="F5Voice"):
        collect(qwen.synthesize(SynthesisRequest(text=TEXT, voice=voice, options={"max_new_tokens": 3})))


def test_unreadable_saved_prompts(tts, voice, tmp_path):
    with pytest.raises(VoicePromptMismatch, match="not a readable voice prompt"):
        tts.load_voice(tmp_path / "nothing-here")
    voice.save(tmp_path / "v")
    meta = json.loads((tmp_path / "v" / "prompt.json").read_text())
    (tmp_path / "v" / "prompt.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(VoicePromptMismatch, match="format 99"):
        tts.load_voice(tmp_path / "v")
    (tmp_path / "v" / "prompt.json").write_text("{not json")
    with pytest.raises(VoicePromptMismatch, match="not a readable voice prompt"):
        tts.load_voice(tmp_path / "v")


def test_a_saved_prompt_round_trips(tts, voice, tmp_path):
    voice.save(tmp_path / "v")
    again = tts.load_voice(tmp_path / "v")
    assert np.array_equal(again.samples, voice.samples) and again.ref_text == voice.ref_text
    assert np.array_equal(synth(tts, voice=again).samples, synth(tts, voice=voice).samples)
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["prompt.json", "prompt.safetensors"]  # no temp files left


# -- model folders -----------------------------------------------------------------------------
def _checkpoint(d: Path) -> Path:
    return next(d.glob("model_*.safetensors"))


def _drop_tensor(d: Path) -> str:
    path = _checkpoint(d)
    state = load_file(path)
    name = sorted(k for k in state if "transformer_blocks" in k)[0]
    del state[name]
    save_file(state, str(path))
    return name.removeprefix("ema_model.")


def _extra_tensor(d: Path) -> str:
    path = _checkpoint(d)
    state = load_file(path)
    state["ema_model.transformer.bogus.weight"] = torch.zeros(3)
    save_file(state, str(path))
    return "ema_model.transformer.bogus.weight"


def _arch(name: str):
    def edit(d: Path) -> str:
        (d / "config.yaml").write_text(arch_yaml(name, ARCHS[name]))
        return name

    return edit


def _mel_type(d: Path) -> str:
    raw = yaml.safe_load((d / "config.yaml").read_text())
    raw["model"]["mel_spec"]["mel_spec_type"] = "bigvgan"
    (d / "config.yaml").write_text(yaml.safe_dump(raw))
    return "bigvgan"


def _unknown_setting(d: Path) -> str:
    raw = yaml.safe_load((d / "config.yaml").read_text())
    raw["model"]["arch"]["wobble"] = 3
    (d / "config.yaml").write_text(yaml.safe_dump(raw))
    return "wobble"


@pytest.mark.parametrize(
    ("edit", "error", "match"),
    [
        (lambda d: (d / "vocab.txt").unlink(), FileNotFoundError, "missing vocab.txt"),
        (lambda d: shutil.rmtree(d / "vocos"), FileNotFoundError, "missing vocos/config.yaml"),
        (lambda d: (d / "vocos" / "pytorch_model.bin").unlink(), FileNotFoundError, "missing vocos/pytorch_model.bin"),
        (lambda d: (d / "config.yaml").unlink(), FileNotFoundError, "without config.yaml"),
        (lambda d: _checkpoint(d).unlink(), FileNotFoundError, r"no checkpoint \(model_<step>.safetensors"),
        (_drop_tensor, WeightsError, "missing tensors: {}"),
        (_extra_tensor, WeightsError, "unexpected tensors: {}"),
        (_arch("E2TTS_Base"), ValueError, "E2-TTS .*UNetT.* is not supported yet"),
        (_mel_type, ValueError, "the bigvgan mel/vocoder is not supported yet"),
        (_unknown_setting, ValueError, "unknown DiT settings: wobble"),
    ],
    ids=["vocab", "vocos", "vocos-bin", "config", "checkpoint", "missing-tensor", "unexpected-tensor", "e2tts", "bigvgan", "dit-setting"],
)
def test_broken_folders_name_what_is_wrong(folder, tmp_path, edit, error, match):
    broken = tmp_path / "model"
    shutil.copytree(folder, broken)
    what = edit(broken)
    with pytest.raises(error, match=match.format(what) if "{}" in match else match):
        koe.load(broken)


def test_other_precisions_are_refused(folder):
    with pytest.raises(ValueError, match="fp32 .exact. or bf16"):
        koe.load(folder, precision="int8")  # bf16 is opt-in: test_f5_tts_precision.py


# -- through the product: nothing half-written -------------------------------------------------
@pytest.fixture
def cli(tmp_path, monkeypatch):
    return strict_koe_command(tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("args", "match"),
    [
        (["--ref", "{good}"], "clones only from a clip with its transcript"),
        (["--ref", "{good}", "--ref-text", "  "], "clones only from a clip with its transcript"),
        (["--ref", "{zeros}", "--ref-text", REF_TEXT], "silence"),
        (["--ref", "{hiss}", "--ref-text", REF_TEXT], "reference audio is silent"),
        (["--ref", "{short}", "--ref-text", REF_TEXT], "too short"),
        (["--ref", "{tiny}", "--ref-text", REF_TEXT], "give at least 0.3 s"),
        (["--ref", "{text}", "--ref-text", REF_TEXT], "not a readable audio file"),
        (["--ref", "{missing}", "--ref-text", REF_TEXT], "no such audio file"),
        (["--ref", "{good}", "--ref-text", REF_TEXT, "--opt", "nfe_step=0"], "nfe_step=0"),
        (["--ref", "{good}", "--ref-text", REF_TEXT, "--opt", "steps=4"], "valid: nfe_step"),
        (["--voice", "alloy"], "unknown voice 'alloy'"),
        ([], "speaks only in a cloned voice"),
    ],
)
def test_a_failed_speak_leaves_no_file(cli, folder, clips, tmp_path, args, match):
    out = tmp_path / "out.wav"
    kept = tmp_path / "kept.wav"
    kept.write_bytes(b"precious")
    args = [a.format(**clips) for a in args]
    r = cli("speak", TEXT, "-m", folder, *args, "-o", out, ok=False)
    assert r.exit_code == 2 and match in r.stderr, r.stderr
    assert not out.exists()
    r = cli("speak", TEXT, "-m", folder, *args, "-o", kept, ok=False)
    assert kept.read_bytes() == b"precious"  # never truncated by a failed run
    assert not (cli.home / "outputs").exists() or not any((cli.home / "outputs").rglob("*.*"))  # nothing kept in KOE_HOME either
    assert leftovers(tmp_path) == []


def test_a_failed_streamed_speak_leaves_no_file(cli, folder, clips, tmp_path):
    out = tmp_path / "out.wav"
    r = cli("speak", TEXT, "-m", folder, "--ref", clips["hiss"], "--ref-text", REF_TEXT, "--stream", "-o", out, ok=False)
    assert "reference audio is silent" in r.stderr
    assert not out.exists()
    kept = tmp_path / "kept.wav"
    kept.write_bytes(b"precious")
    cli("speak", TEXT, "-m", folder, "--ref", clips["hiss"], "--ref-text", REF_TEXT, "--stream", "-o", kept, ok=False)
    assert kept.read_bytes() == b"precious"


def test_a_failed_voice_add_leaves_no_library_entry(cli, clips):
    for clip, match in (("text", "not a readable audio file"), ("tiny", "at least 1.0 s"), ("missing", "missing.wav")):
        r = cli("voices", "add", "bad", "--ref", clips[clip], "--ref-text", REF_TEXT, ok=False)
        assert r.exit_code == 2 and match in r.stderr, r.stderr
    assert json.loads(cli("voices", "list", "--json", ok=True).stdout or "[]") == []
    assert library_voices(cli.home) == {} and not (cli.home / "voices" / "bad").exists()
    assert leftovers(cli.home / "voices") == []


def test_a_failed_prompt_preparation_keeps_no_prompt(cli, folder, clips, tmp_path):
    """Library voices F5-TTS cannot use (silent, no transcript) fail clearly and keep no prompt for it;
    a good voice's prompt is kept, and a damaged one is made again."""
    cli("voices", "add", "hiss", "--ref", clips["hiss"], "--ref-text", REF_TEXT, ok=True)
    cli("voices", "add", "mute", "--ref", clips["good"], ok=True)  # no transcript: fine for the library, not for F5-TTS
    cli("voices", "add", "good", "--ref", clips["good"], "--ref-text", REF_TEXT, ok=True)
    out = tmp_path / "out.wav"
    r = cli("speak", TEXT, "-m", folder, "--voice", "hiss", "--opt", "nfe_step=2", "-o", out, ok=False)
    assert "reference audio is silent" in r.stderr and not out.exists()
    r = cli("speak", TEXT, "-m", folder, "--voice", "mute", "--opt", "nfe_step=2", "-o", out, ok=False)
    assert "needs the reference's transcript" in r.stderr and not out.exists()
    voices = library_voices(cli.home)
    assert voices["hiss"].prepared_for == [] and voices["mute"].prepared_for == []
    assert not (voices["hiss"].folder / "prompts").exists() or not any((voices["hiss"].folder / "prompts").iterdir())
    cli("speak", TEXT, "-m", folder, "--voice", "good", "--opt", "nfe_step=2", "--seed", "1", "-o", out, ok=True)
    first = out.read_bytes()
    [key] = library_voices(cli.home)["good"].prepared_for
    prompt = voices["good"].folder / "prompts" / key
    assert sorted(p.name for p in prompt.iterdir()) == ["prompt.json", "prompt.safetensors"]
    (prompt / "prompt.json").write_text("{damaged")
    cli("speak", TEXT, "-m", folder, "--voice", "good", "--opt", "nfe_step=2", "--seed", "1", "-o", out, ok=True)
    assert out.read_bytes() == first and json.loads((prompt / "prompt.json").read_text())["family"] == "f5_tts"
    assert leftovers(cli.home / "voices") == []


def test_a_failed_voices_prepare_writes_no_prompt_folder(cli, folder, clips, tmp_path):
    for clip in ("hiss", "text", "missing"):
        r = cli("voices", "prepare", clips[clip], "-m", folder, "--ref-text", REF_TEXT, "-o", tmp_path / clip, ok=False)
        assert r.exit_code == 2
        assert not (tmp_path / clip).exists()
    r = cli("voices", "prepare", clips["good"], "-m", folder, "--x-vector-only", "-o", tmp_path / "xv", ok=False)
    assert "needs the reference's transcript" in r.stderr and not (tmp_path / "xv").exists()
    r = cli("voices", "prepare", clips["good"], "-m", folder, "-o", tmp_path / "nt", ok=False)
    assert "transcript" in r.stderr and not (tmp_path / "nt").exists()
    assert library_voices(cli.home) == {}  # prepare never touches the library


def test_voices_prepare_without_transcript_does_not_suggest_x_vector_mode_on_f5(cli, folder, clips, tmp_path):
    r = cli("voices", "prepare", clips["good"], "-m", folder, "-o", tmp_path / "nt", ok=False)
    assert "--x-vector-only" not in r.stderr


def test_broken_model_folders_are_one_line_through_the_cli(cli, folder, clips, tmp_path):
    for name, edit, code, match in (
        ("novocab", lambda d: (d / "vocab.txt").unlink(), 2, "missing vocab.txt"),
        ("noconfig", lambda d: (d / "config.yaml").unlink(), 2, "missing config.yaml"),
        ("e2", _arch("E2TTS_Base"), 2, "not supported yet"),
        ("tensor", _drop_tensor, 1, "missing tensors"),
    ):
        broken = tmp_path / name
        shutil.copytree(folder, broken)
        edit(broken)
        out = tmp_path / f"{name}.wav"
        r = cli("speak", TEXT, "-m", broken, "--ref", clips["good"], "--ref-text", REF_TEXT, "-o", out, ok=False)
        assert r.exit_code == code and match in r.stderr, (name, r.exit_code, r.stderr)
        assert not out.exists()
        r = cli("models", "import", broken, "--name", name, "--link")
        if name != "tensor":  # a checkpoint's tensors are checked when it loads, not when it is imported
            assert r.exit_code == 2 and "Traceback" not in r.output, r.output
    installed = [m["name"] for m in json.loads(cli("models", "list", "--json", ok=True).stdout)]
    assert installed in ([], ["tensor"])


def test_the_reference_clip_file_is_read_as_upstream_reads_it(tts, clips):
    """What the service hands the engine (decoded samples) prepares the same voice as the file itself (16-bit PCM)."""
    from koe.audio.io import load_audio

    direct = tts.prepare_voice(str(clips["good"]), REF_TEXT)
    decoded = tts.prepare_voice(load_audio(str(clips["good"])), REF_TEXT)
    buf = io.BytesIO()
    sf.write(buf, load_audio(str(clips["good"]))[0], 24000, format="WAV", subtype="FLOAT")  # the library keeps float32 WAV
    library = tts.prepare_voice(buf.getvalue(), REF_TEXT)
    assert np.array_equal(direct.samples, decoded.samples) and np.array_equal(direct.samples, library.samples)
