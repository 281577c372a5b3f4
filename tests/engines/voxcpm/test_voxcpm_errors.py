"""VoxCPM: every bad input gets a clear error (engine level, `load_engine(folder)`), and a failure
through the product (`koe speak`, `koe voices ...`, the voice library) leaves nothing half-written.

Tiny random-weight models of both variants (`write_random_model`).
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from product_helpers import leftovers, library_voices, speechy, strict_koe_command, tiny_qwen, write_wav
from safetensors.torch import load_file, save_file

import koe
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
from koe.engines.native import TTS
from koe.engines.registry import load_engine
from koe.engines.voxcpm.fixtures import write_random_model
from koe.runtime.weights import WeightsError

REF_TEXT = "A short test clip."
TEXT = "Hello there, this is koe."
OPTION_NAMES = "cfg_value, inference_timesteps, min_len, max_len, retry_badcase, retry_badcase_max_times, retry_badcase_ratio_threshold, normalize, denoise"


@pytest.fixture(scope="module")
def folders(tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("vox-err")
    return {v: write_random_model(root / v, v) for v in ("VoxCPM2", "VoxCPM1.5")}


@pytest.fixture(scope="module")
def engines(folders):
    loaded = {v: load_engine(d) for v, d in folders.items()}
    yield loaded
    for e in loaded.values():
        e.close()


@pytest.fixture(scope="module")
def v2(engines):
    return engines["VoxCPM2"]


@pytest.fixture(scope="module")
def v15(engines):
    return engines["VoxCPM1.5"]


@pytest.fixture(scope="module")
def clips(tmp_path_factory) -> dict[str, Path]:
    d = tmp_path_factory.mktemp("vox-err-clips")
    rng = np.random.default_rng(0)
    (d / "text.wav").write_text("this is not audio at all")
    return {
        "good": write_wav(d / "good.wav", speechy(2.0)),
        "zeros": write_wav(d / "zeros.wav", np.zeros(2 * 24000, np.float32)),
        "hiss": write_wav(d / "hiss.wav", (2e-5 * rng.standard_normal(2 * 24000)).astype(np.float32)),  # peak under 1e-4 (-80 dBFS)
        "short": write_wav(d / "short.wav", speechy(0.3)),  # under VoxCPM's 0.5 s
        "text": d / "text.wav",
        "missing": d / "missing.wav",
    }


def synth(tts, text=TEXT, voice=None, **kw):
    return collect(tts.synthesize(SynthesisRequest(text=text, voice=voice, seed=kw.pop("seed", 1), **kw)))


# -- voices: transcripts and modes -------------------------------------------------------------
def test_voxcpm15_needs_the_transcript(v15, clips):
    for call in (
        lambda: v15.prepare_voice(str(clips["good"])),
        lambda: v15.prepare_voice(VoiceReference(str(clips["good"]), None)),
        lambda: v15.make_voice(reference_wav=str(clips["good"])),
    ):
        with pytest.raises(UnsupportedVoice, match="VoxCPM1.5 clones from a clip and its transcript") as e:
            call()
        assert e.value.param == "voice"


@pytest.mark.parametrize("variant", ["VoxCPM2", "VoxCPM1.5"])
def test_a_clip_and_its_transcript_go_together(engines, clips, variant):
    tts = engines[variant]
    with pytest.raises(UnsupportedVoice, match="a prompt clip and its transcript go together"):
        tts.make_voice(prompt_text=REF_TEXT)  # a transcript without its clip
    with pytest.raises(UnsupportedVoice, match="a prompt clip and its transcript go together"):
        tts.make_voice(prompt_wav=str(clips["good"]))
    with pytest.raises(UnsupportedVoice, match="give a prompt clip with its transcript"):
        tts.make_voice()
    for blank in ("", "   ", "\n\t"):
        with pytest.raises(UnsupportedVoice, match="the prompt's transcript is empty"):
            tts.prepare_voice(str(clips["good"]), blank)


def test_voxcpm2_takes_the_three_voice_modes(v2, clips):
    clip = str(clips["good"])
    assert v2.prepare_voice(clip, REF_TEXT).mode == "ref_continuation"  # upstream's "ultimate" clone: prompt and reference
    assert v2.prepare_voice(clip).mode == "reference"
    assert v2.make_voice(clip, REF_TEXT).mode == "continuation"
    assert v2.make_voice(clip, REF_TEXT, reference_wav=clip).mode == "ref_continuation"
    outs = {
        m: synth(v2, voice=v).samples
        for m, v in (("ultimate", v2.prepare_voice(clip, REF_TEXT)), ("reference", v2.prepare_voice(clip)), ("continuation", v2.make_voice(clip, REF_TEXT)))
    }
    assert not np.array_equal(outs["ultimate"], outs["reference"]) and not np.array_equal(outs["ultimate"], outs["continuation"])


# -- the reference audio -----------------------------------------------------------------------
@pytest.mark.parametrize("variant", ["VoxCPM2", "VoxCPM1.5"])
@pytest.mark.parametrize(
    ("clip", "match"),
    [
        ("zeros", "the reference is silent"),
        ("hiss", "the reference is silent"),
        ("short", r"0\.3.*0\.5"),
        ("text", "not a readable audio file"),
        ("missing", "no such audio file"),
    ],
)
def test_bad_clips_are_clear_errors(engines, clips, variant, clip, match):
    with pytest.raises(UnsupportedVoice, match=f"the voice clip cannot be used: .*{match}") as e:
        engines[variant].prepare_voice(str(clips[clip]), REF_TEXT)
    assert e.value.param == "voice"


def test_bad_clip_sources(v2):
    with pytest.raises(UnsupportedVoice, match="empty"):
        v2.prepare_voice(b"", REF_TEXT)
    with pytest.raises(UnsupportedVoice, match="cannot be used"):
        v2.prepare_voice(b"RIFF\x00\x00\x00\x00WAVEnot really audio" * 4, REF_TEXT)
    with pytest.raises(UnsupportedVoice, match="NaN or infinite"):
        v2.prepare_voice((np.full(48000, np.nan, np.float32), 24000), REF_TEXT)
    with pytest.raises(UnsupportedVoice, match="sample rate"):
        v2.prepare_voice((speechy(2.0), 0), REF_TEXT)
    with pytest.raises(UnsupportedVoice, match=r"longer than|at most|60"):
        v2.prepare_voice((speechy(61.0, 8000), 8000), REF_TEXT)
    assert v2.prepare_voice(VoiceReference((speechy(61.0, 8000), 8000), REF_TEXT, trim=True)).info["prompt_seconds"] == 60.0


# -- the text, options, language, instructions -------------------------------------------------
@pytest.mark.parametrize("text", ["", "   ", "\n\n"])
def test_empty_text(v2, text):
    with pytest.raises(EmptyText, match="text is empty") as e:
        synth(v2, text)
    assert e.value.param == "input"
    with pytest.raises(EmptyText):
        TTS(v2).generate(text)


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"cfg_value": 50}, r"cfg_value=50(\.0)?: must be in \[0.1, 10\]"),
        ({"cfg_value": 0}, "cfg_value=0"),
        ({"inference_timesteps": 0}, r"inference_timesteps=0: must be in \[1, 100\]"),
        ({"inference_timesteps": 2.5}, "inference_timesteps=2.5: must be a whole number"),
        ({"inference_timesteps": "many"}, "inference_timesteps='many'"),
        ({"max_len": 0}, "max_len=0"),
        ({"min_len": -1}, "min_len=-1"),
        ({"retry_badcase": "yes"}, "retry_badcase='yes': must be true or false"),
        ({"retry_badcase_max_times": 0}, "retry_badcase_max_times=0"),
        ({"retry_badcase_ratio_threshold": 0}, r"retry_badcase_ratio_threshold=0(\.0)?: must be in \(0, 100\]"),
        ({"normalize": True}, "normalize=true: upstream's text normaliser .* not supported by koe yet"),
        ({"denoise": True}, "denoise=true: upstream's ZipEnhancer denoiser is not supported by koe yet"),
    ],
)
def test_bad_options_name_the_option(v2, options, match):
    with pytest.raises(InvalidOption, match=match) as e:
        synth(v2, options=options)
    assert e.value.param == next(iter(options))


def test_normalize_and_denoise_false_are_fine(v2):
    assert np.array_equal(synth(v2, options={"normalize": False, "denoise": False}).samples, synth(v2).samples)


def test_unknown_option_names_the_valid_ones(v2):
    with pytest.raises(InvalidOption, match=rf"unknown option\(s\) 'nfe_step'; valid: {OPTION_NAMES}") as e:
        synth(v2, options={"nfe_step": 4})
    assert e.value.param == "nfe_step"
    with pytest.raises(InvalidOption, match="'temperature'"):  # another family's option, in the native API
        TTS(v2).generate(TEXT, temperature=0.7)
    with pytest.raises(InvalidOption, match="cfg_value=50"):
        TTS(v2).generate(TEXT, cfg_value=50)


def test_a_language_is_refused_naming_auto(v2):
    with pytest.raises(UnsupportedLanguage, match="'german'.*reads the language from the text.*auto"):
        synth(v2, language="german")
    assert np.array_equal(synth(v2, language="auto").samples, synth(v2).samples)


def test_instructions_need_voxcpm2(v2, v15):
    with pytest.raises(RequestError, match="VoxCPM1.5 takes no voice description or style instruction") as e:
        synth(v15, instruct="a warm low voice")
    assert e.value.param == "instructions"
    assert np.array_equal(synth(v15, instruct="   ").samples, synth(v15).samples)  # blank is none
    assert not np.array_equal(synth(v2, instruct="a warm low voice").samples, synth(v2).samples)


def test_a_preset_speaker_name_is_refused(v2):
    with pytest.raises(UnsupportedVoice, match="VoxCPM has no preset speakers.*'alloy'") as e:
        synth(v2, voice="alloy")
    assert e.value.param == "voice"


# -- voice prompts -----------------------------------------------------------------------------
def test_a_voxcpm15_voice_on_voxcpm2_is_a_mismatch(v2, v15, clips, tmp_path):
    voice15 = v15.prepare_voice(str(clips["good"]), REF_TEXT)
    with pytest.raises(VoicePromptMismatch, match="prepared for a voxcpm model at 44100 Hz; this model is voxcpm2 at 16000 Hz"):
        synth(v2, voice=voice15)
    voice15.save(tmp_path / "v15")
    with pytest.raises(VoicePromptMismatch, match="prepared for a voxcpm model"):
        v2.load_voice(tmp_path / "v15")
    v2.prepare_voice(str(clips["good"])).save(tmp_path / "v2")
    with pytest.raises(VoicePromptMismatch, match="prepared for a voxcpm2 model at 16000 Hz; this model is voxcpm at 44100 Hz"):
        v15.load_voice(tmp_path / "v2")


@pytest.fixture(scope="module")
def qwen(tmp_path_factory):
    yield from tiny_qwen(tmp_path_factory)


def test_a_voice_prompt_from_another_family(v2, qwen, clips, tmp_path):
    qwen_prompt = qwen.prepare_voice(str(clips["good"]), REF_TEXT)
    with pytest.raises(VoicePromptMismatch, match="another model family.*VoxCPM"):
        synth(v2, voice=qwen_prompt)
    qwen_prompt.save(tmp_path / "qwen")
    with pytest.raises(VoicePromptMismatch, match="made for a qwen3_tts model, not VoxCPM"):
        v2.load_voice(tmp_path / "qwen")
    vox = v2.prepare_voice(str(clips["good"]), REF_TEXT)
    vox.save(tmp_path / "vox")
    with pytest.raises(VoicePromptMismatch, match="voxcpm"):
        qwen.load_voice(tmp_path / "vox")
    with pytest.raises(RequestError):
        collect(qwen.synthesize(SynthesisRequest(text=TEXT, voice=vox, options={"max_new_tokens": 3})))


def test_unreadable_saved_prompts(v2, clips, tmp_path):
    with pytest.raises(VoicePromptMismatch, match="not a readable voice prompt"):
        v2.load_voice(tmp_path / "nothing-here")
    v2.prepare_voice(str(clips["good"]), REF_TEXT).save(tmp_path / "v")
    meta = json.loads((tmp_path / "v" / "prompt.json").read_text())
    (tmp_path / "v" / "prompt.json").write_text(json.dumps({**meta, "format_version": 99}))
    with pytest.raises(VoicePromptMismatch, match="format 99"):
        v2.load_voice(tmp_path / "v")
    (tmp_path / "v" / "prompt.json").write_text("{not json")
    with pytest.raises(VoicePromptMismatch, match="not a readable voice prompt"):
        v2.load_voice(tmp_path / "v")


@pytest.mark.parametrize("ref_text", [REF_TEXT, None])
def test_a_saved_prompt_round_trips(v2, clips, tmp_path, ref_text):
    voice = v2.prepare_voice(str(clips["good"]), ref_text)
    voice.save(tmp_path / "v")
    again = v2.load_voice(tmp_path / "v")
    assert again.mode == voice.mode and again.prompt_text == voice.prompt_text
    for name in ("prompt", "reference"):
        a, b = getattr(again, name), getattr(voice, name)
        assert (a is None and b is None) or np.array_equal(a, b)
    assert np.array_equal(synth(v2, voice=again).samples, synth(v2, voice=voice).samples)
    assert sorted(p.name for p in (tmp_path / "v").iterdir()) == ["prompt.json", "prompt.safetensors"]


# -- model folders -----------------------------------------------------------------------------
def _drop_tensor(d: Path) -> str:
    state = load_file(d / "model.safetensors")
    name = sorted(state)[len(state) // 2]
    del state[name]
    save_file(state, str(d / "model.safetensors"))
    return name


def _extra_tensor(d: Path) -> str:
    state = load_file(d / "audiovae.safetensors")
    state["bogus.weight"] = torch.zeros(3)
    save_file(state, str(d / "audiovae.safetensors"))
    return "bogus.weight"


def _config(edit):
    def apply(d: Path) -> None:
        raw = json.loads((d / "config.json").read_text())
        edit(raw)
        (d / "config.json").write_text(json.dumps(raw))

    return apply


@pytest.mark.parametrize(
    ("edit", "error", "match"),
    [
        (lambda d: (d / "config.json").unlink(), (FileNotFoundError, ValueError), "config.json"),
        (lambda d: (d / "model.safetensors").unlink(), FileNotFoundError, r"no model weights \(model.safetensors or pytorch_model.bin\)"),
        (lambda d: (d / "audiovae.safetensors").unlink(), FileNotFoundError, r"no AudioVAE weights \(audiovae.safetensors or audiovae.pth\)"),
        (lambda d: (d / "tokenizer.json").unlink(), (FileNotFoundError, ValueError), "tokenizer"),
        (_drop_tensor, WeightsError, "missing tensors"),
        (_extra_tensor, WeightsError, "unexpected tensors"),
        (_config(lambda raw: raw["lm_config"].__setitem__("intermediate_size", 96)), WeightsError, "shape"),
    ],
    ids=["config", "weights", "vae", "tokenizer", "missing-tensor", "unexpected-tensor", "wrong-shape"],
)
def test_broken_folders_name_what_is_wrong(folders, tmp_path, edit, error, match):
    broken = tmp_path / "model"
    shutil.copytree(folders["VoxCPM2"], broken)
    edit(broken)
    with pytest.raises(error, match=match):
        koe.load(broken)


def test_other_precisions_are_refused(folders):
    with pytest.raises(ValueError, match="precision='int4' is not offered for VoxCPM: use fp32 .exact., bf16 or int8"):
        koe.load(folders["VoxCPM2"], precision="int4")
    with pytest.raises(ValueError, match="float32 or bfloat16"):
        koe.load(folders["VoxCPM2"], dtype="float16")


# -- through the product: nothing half-written -------------------------------------------------
@pytest.fixture
def cli(tmp_path, monkeypatch):
    return strict_koe_command(tmp_path, monkeypatch)


@pytest.mark.parametrize(
    ("variant", "args", "match"),
    [
        ("VoxCPM1.5", ["--ref", "{good}"], "VoxCPM1.5 clones only from a clip with its transcript"),
        ("VoxCPM1.5", ["--ref", "{good}", "--ref-text", "  "], "clones only from a clip with its transcript"),
        ("VoxCPM2", ["--ref-text", REF_TEXT], "a transcript (ref_text) was given without its reference clip"),
        ("VoxCPM2", ["--voice", "nobody", "--ref-text", REF_TEXT], "without its reference clip"),
        ("VoxCPM2", ["--ref", "{zeros}", "--ref-text", REF_TEXT], "silence"),
        ("VoxCPM2", ["--ref", "{hiss}", "--ref-text", REF_TEXT], "the reference is silent"),
        ("VoxCPM1.5", ["--ref", "{hiss}", "--ref-text", REF_TEXT], "the reference is silent"),
        ("VoxCPM2", ["--ref", "{short}", "--ref-text", REF_TEXT], "give at least 0.5 s"),
        ("VoxCPM2", ["--ref", "{text}", "--ref-text", REF_TEXT], "not a readable audio file"),
        ("VoxCPM2", ["--ref", "{missing}", "--ref-text", REF_TEXT], "no such audio file"),
        ("VoxCPM2", ["--opt", "cfg_value=50"], "cfg_value=50"),
        ("VoxCPM2", ["--opt", "inference_timesteps=0"], "inference_timesteps=0"),
        ("VoxCPM2", ["--opt", "normalize=true"], "not supported by koe yet"),
        ("VoxCPM2", ["--opt", "denoise=true"], "not supported by koe yet"),
        ("VoxCPM2", ["--opt", "steps=4"], "valid: cfg_value"),
        ("VoxCPM2", ["--temperature", "0.7"], "'temperature'"),
        ("VoxCPM2", ["--voice", "alloy"], "unknown voice 'alloy'"),
        ("VoxCPM2", ["--speaker", "ryan"], "preset speakers need a model that ships them"),
        ("VoxCPM2", ["--language", "english"], "supports: auto"),
        ("VoxCPM1.5", ["--design", "a warm low voice"], "designing a voice from a description needs a model that designs voices"),
    ],
)
def test_a_failed_speak_leaves_no_file(cli, folders, clips, tmp_path, variant, args, match):
    out = tmp_path / "out.wav"
    kept = tmp_path / "kept.wav"
    kept.write_bytes(b"precious")
    args = [a.format(**clips) for a in args]
    r = cli("speak", TEXT, "-m", folders[variant], *args, "-o", out, ok=False)
    assert r.exit_code == 2 and match in r.stderr, r.stderr
    assert not out.exists()
    cli("speak", TEXT, "-m", folders[variant], *args, "-o", kept, ok=False)
    assert kept.read_bytes() == b"precious"
    assert not (cli.home / "outputs").exists() or not any((cli.home / "outputs").rglob("*.*"))
    assert leftovers(tmp_path) == []


@pytest.mark.parametrize(("args", "match"), [(["--ref", "{hiss}", "--ref-text", REF_TEXT], "silent"), (["--opt", "denoise=true"], "denoise")])
def test_a_failed_streamed_speak_leaves_no_file(cli, folders, clips, tmp_path, args, match):
    args = [a.format(**clips) for a in args]
    out = tmp_path / "out.wav"
    r = cli("speak", TEXT, "-m", folders["VoxCPM2"], *args, "--stream", "-o", out, ok=False)
    assert match in r.stderr and not out.exists()
    kept = tmp_path / "kept.wav"
    kept.write_bytes(b"precious")
    cli("speak", TEXT, "-m", folders["VoxCPM2"], *args, "--stream", "-o", kept, ok=False)
    assert kept.read_bytes() == b"precious" and leftovers(tmp_path) == []


def test_a_failed_prompt_preparation_keeps_no_prompt(cli, folders, clips, tmp_path):
    """Library voices VoxCPM cannot use (silent; no transcript on 1.5) fail clearly and keep no prompt; a good voice's prompt
    is kept; a damaged one, or one of another variant in its place (a VoicePromptMismatch), is made again."""
    cli("voices", "add", "hiss", "--ref", clips["hiss"], "--ref-text", REF_TEXT, ok=True)
    cli("voices", "add", "mute", "--ref", clips["good"], ok=True)
    cli("voices", "add", "good", "--ref", clips["good"], "--ref-text", REF_TEXT, ok=True)
    out = tmp_path / "out.wav"
    r = cli("speak", TEXT, "-m", folders["VoxCPM2"], "--voice", "hiss", "-o", out, ok=False)
    assert "the reference is silent" in r.stderr and not out.exists()
    r = cli("speak", TEXT, "-m", folders["VoxCPM1.5"], "--voice", "mute", "-o", out, ok=False)
    assert "VoxCPM1.5 clones from a clip and its transcript" in r.stderr and not out.exists()
    voices = library_voices(cli.home)
    assert voices["hiss"].prepared_for == [] and voices["mute"].prepared_for == []

    cli("speak", TEXT, "-m", folders["VoxCPM2"], "--voice", "good", "--seed", "1", "-o", out, ok=True)
    first = out.read_bytes()
    [key] = library_voices(cli.home)["good"].prepared_for
    prompt = voices["good"].folder / "prompts" / key
    assert sorted(p.name for p in prompt.iterdir()) == ["prompt.json", "prompt.safetensors"]
    (prompt / "prompt.json").write_text("{damaged")
    cli("speak", TEXT, "-m", folders["VoxCPM2"], "--voice", "good", "--seed", "1", "-o", out, ok=True)
    assert out.read_bytes() == first and json.loads((prompt / "prompt.json").read_text())["architecture"] == "voxcpm2"

    shutil.rmtree(prompt)
    koe.load(folders["VoxCPM1.5"]).prepare_voice(str(clips["good"]), REF_TEXT).save(prompt)  # a 1.5 prompt where VoxCPM2's belongs
    cli("speak", TEXT, "-m", folders["VoxCPM2"], "--voice", "good", "--seed", "1", "-o", out, ok=True)
    assert out.read_bytes() == first and json.loads((prompt / "prompt.json").read_text())["architecture"] == "voxcpm2"
    assert leftovers(cli.home / "voices") == []


def test_a_failed_voices_prepare_writes_no_prompt_folder(cli, folders, clips, tmp_path):
    for clip in ("hiss", "zeros", "short", "text", "missing"):
        r = cli("voices", "prepare", clips[clip], "-m", folders["VoxCPM2"], "--ref-text", REF_TEXT, "-o", tmp_path / clip, ok=False)
        assert r.exit_code == 2 and not (tmp_path / clip).exists()
    r = cli("voices", "prepare", clips["good"], "-m", folders["VoxCPM1.5"], "--x-vector-only", "-o", tmp_path / "xv", ok=False)
    assert "clones from a clip and its transcript" in r.stderr and not (tmp_path / "xv").exists()
    r = cli("voices", "prepare", clips["good"], "-m", folders["VoxCPM1.5"], "-o", tmp_path / "nt", ok=False)
    assert "--ref-text" in r.stderr and "--x-vector-only" not in r.stderr and not (tmp_path / "nt").exists()
    assert library_voices(cli.home) == {}


def test_broken_model_folders_are_one_line_through_the_cli(cli, folders, tmp_path):
    for name, edit, code, match in (
        ("novae", lambda d: (d / "audiovae.safetensors").unlink(), 2, "missing audiovae.safetensors"),
        ("notok", lambda d: (d / "tokenizer.json").unlink(), 2, "missing tokenizer.json"),
        ("tensor", _drop_tensor, 1, "missing tensors"),
    ):
        broken = tmp_path / name
        shutil.copytree(folders["VoxCPM2"], broken)
        edit(broken)
        out = tmp_path / f"{name}.wav"
        r = cli("speak", TEXT, "-m", broken, "-o", out, ok=False)
        assert r.exit_code == code and match in r.stderr, (name, r.exit_code, r.stderr)
        assert not out.exists()
