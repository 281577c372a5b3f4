"""`koe voices prepare`: a reusable voice prompt from a clip, and clear errors."""

import numpy as np
import pytest
import soundfile as sf
import torch
from fixtures_models import model_folder
from typer.testing import CliRunner

import koe
import koe.engines.base
from koe.cli.main import app
from koe.compat.qwen_tts import VoicePrompt as QwenVoicePrompt


@pytest.fixture(scope="module")
def base_model(tmp_path_factory):
    return model_folder(tmp_path_factory.getbasetemp(), "base", "tiny")


@pytest.fixture
def clip(tmp_path, monkeypatch):
    monkeypatch.setenv("KOE_HOME", str(tmp_path / "home"))
    t = np.arange(2 * 24000) / 24000
    path = tmp_path / "clip.wav"
    sf.write(path, (0.3 * np.sin(2 * np.pi * 190 * t)).astype(np.float32), 24000)
    return path


def test_prepare_writes_a_prompt_the_engine_reuses(base_model, clip, tmp_path):
    out = tmp_path / "voice"
    result = CliRunner().invoke(app, ["voices", "prepare", str(clip), "--model", str(base_model), "--ref-text", "A test clip.", "-o", str(out)])
    assert result.exit_code == 0, result.output
    tts = koe.load(base_model)
    prompt = tts.load_voice(out)  # the engine contract's way back, every family's
    assert isinstance(prompt, koe.VoicePrompt) and koe.VoicePrompt is koe.engines.base.VoicePrompt
    direct = tts.prepare_voice(str(clip), "A test clip.")
    assert torch.equal(prompt.ref_code, direct.ref_code) and torch.equal(prompt.speaker_embedding, direct.speaker_embedding)
    assert prompt.ref_text == "A test clip." and not prompt.x_vector_only


def test_prepare_x_vector_only(base_model, clip, tmp_path):
    out = tmp_path / "xvec"
    result = CliRunner().invoke(app, ["voices", "prepare", str(clip), "--model", str(base_model), "--x-vector-only", "-o", str(out)])
    assert result.exit_code == 0, result.output
    assert QwenVoicePrompt.load(out).x_vector_only  # Qwen3-TTS's own prompt class, from its drop-in


def test_prepare_without_transcript_explains_x_vector_mode(base_model, clip, tmp_path):
    result = CliRunner().invoke(app, ["voices", "prepare", str(clip), "--model", str(base_model), "-o", str(tmp_path / "v")])
    assert result.exit_code == 2
    assert "--x-vector-only" in result.stderr and "Traceback" not in result.output
    assert not (tmp_path / "v").exists()


def test_prepare_with_reference_padding(base_model, clip, tmp_path):
    out = tmp_path / "padded"
    result = CliRunner().invoke(
        app, ["voices", "prepare", str(clip), "--model", str(base_model), "--ref-text", "A test clip.", "--ref-pad-seconds", "0.5", "-o", str(out)]
    )
    assert result.exit_code == 0, result.output
    prompt = QwenVoicePrompt.load(out)
    direct = koe.load(base_model).prepare_voice(str(clip), "A test clip.", ref_pad_seconds=0.5)
    assert prompt.ref_pad_seconds == 0.5 and torch.equal(prompt.ref_code, direct.ref_code)
    bad = CliRunner().invoke(
        app, ["voices", "prepare", str(clip), "--model", str(base_model), "--ref-text", "A test clip.", "--ref-pad-seconds", "3", "-o", str(tmp_path / "bad")]
    )
    assert bad.exit_code == 2 and "ref_pad_seconds" in bad.output and not (tmp_path / "bad").exists()


def test_prepare_flags_are_the_model_s_voice_prompt_options(base_model, clip, tmp_path):
    """`--ref-pad-seconds` is a Base model's declared voice option (`Capabilities.voice_options`), not a flag of the command:
    a model without voice options takes none, and says which it has."""
    from koe.engines.registry import describe, write_fixture

    caps = describe(base_model).capabilities
    assert "ref_pad_seconds" in caps.voice_options.names
    other = next(f for f in ("f5_tts", "voxcpm") if not describe(write_fixture(tmp_path / f, f)).capabilities.voice_options.options)
    result = CliRunner().invoke(
        app,
        ["voices", "prepare", str(clip), "--model", str(tmp_path / other), "--ref-text", "A test clip.", "--ref-pad-seconds", "0.5", "-o", str(tmp_path / "p")],
    )
    assert result.exit_code == 2 and "no such option: --ref-pad-seconds" in result.stderr and "takes these voice-prompt options: none" in result.stderr
    assert not (tmp_path / "p").exists() and "Traceback" not in result.output
    padded = CliRunner().invoke(
        app, ["voices", "prepare", str(clip), "--model", str(base_model), "--ref-text", "A test clip.", "--ref-pad-seconds=0", "-o", str(tmp_path / "plain")]
    )
    assert padded.exit_code == 0, padded.output  # the default: the plain prompt
    assert QwenVoicePrompt.load(tmp_path / "plain").ref_pad_seconds == 0.0
    info = CliRunner().invoke(app, ["models", "info", str(base_model)], env={"COLUMNS": "200"})
    assert "voice options (koe voices prepare --NAME VALUE" in info.stdout and "ref_pad_seconds" in info.stdout
