"""Damaged files (issue 34, items 3 and 5): a damaged prepared voice prompt is refused by name and
prepared again from the voice's stored reference with a warning; a torn weights file, or a
config.json nested too deeply, not JSON or not an object, is one named line through `koe speak
--model DIR` and a named `ModelFailed` through the service, never "unexpected XError".

Tiny random-weight models of the three families. Model folders are mirrored with symlinks
(`test_faults.mirror`), so only the damaged file is a copy.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

import pytest
import torch
from fixtures_models import model_folder
from product_helpers import library_voices, speechy, strict_koe_command, write_wav
from safetensors.torch import load_file, save_file
from test_faults import damage, mirror

import koe
from koe.engines.base import VoicePromptMismatch, VoiceReference
from koe.engines.f5_tts.fixtures import write_random_model as write_f5
from koe.engines.voxcpm.fixtures import write_random_model as write_voxcpm
from koe.runtime.files import read_json_object
from koe.service import KoeHome, SpeechRequest, Synthesizer, load_settings
from koe.service.errors import ModelFailed
from koe.service.storage import Database
from koe.service.voices.library import VoiceLibrary

REF_TEXT = "A short test clip."
TEXT = "Hello there."
FAST = {"f5_tts": ["--opt", "nfe_step=2"], "voxcpm": [], "qwen3_tts": ["--opt", "max_new_tokens=4"]}
TENSORS = {"f5_tts": ("samples",), "voxcpm": ("prompt", "reference"), "qwen3_tts": ("speaker_embedding", "ref_code")}

pytestmark = pytest.mark.filterwarnings("ignore:.*cut off:UserWarning")


def _nonfinite(t: torch.Tensor) -> torch.Tensor:
    """NaN and inf in a float tensor; a negative code in an integer one (codes have no NaN)."""
    t = t.clone()
    if t.is_floating_point():
        t[0], t[-1] = float("nan"), float("inf")
    else:
        t[0, 0] = -3
    return t


DAMAGES = {
    "2-D": lambda t: t.unsqueeze(0),
    "empty": lambda t: t[:0],
    "nan-inf": _nonfinite,
    "over-long": lambda t: t.repeat(200, *([1] * (t.dim() - 1))),
    "dtype": lambda t: t.double() if t.is_floating_point() else t.int(),
}
# what the error says (a fixed-size tensor, the speaker embedding, has the wrong shape when it is empty or over-long)
CAUSES = {
    "2-D": ("has shape",),
    "empty": ("is empty", "has shape (0,)"),
    "nan-inf": ("NaN or infinite", "values under 0"),
    "over-long": ("long, more than", "has shape"),
    "dtype": ("values, not",),
}


@pytest.fixture(scope="module")
def folders(session_tmp, tmp_path_factory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("damaged-models")
    return {
        "f5_tts": write_f5(root / "F5TTS_v1_Base", "F5TTS_v1_Base"),
        "voxcpm": write_voxcpm(root / "VoxCPM2", "VoxCPM2"),
        "qwen3_tts": model_folder(session_tmp, "base"),
    }


@pytest.fixture(scope="module")
def engines(folders):
    loaded = {family: koe.load(folder) for family, folder in folders.items()}
    yield loaded
    for engine in loaded.values():
        engine.close()


@pytest.fixture(scope="module")
def clip(tmp_path_factory) -> Path:
    return write_wav(tmp_path_factory.mktemp("damaged-clip") / "clip.wav", speechy(2.0))


@pytest.fixture(scope="module")
def prepared(engines, clip, tmp_path_factory) -> dict[str, Path]:
    """Each family's prompt for `clip`, saved once (the tests damage copies of it)."""
    root = tmp_path_factory.mktemp("damaged-prompts")
    return {family: engine.prepare_voice(VoiceReference(str(clip), REF_TEXT)).save(root / family) for family, engine in engines.items()}


def damage_prompt(folder: Path, name: str, how: str) -> None:
    tensors = load_file(str(folder / "prompt.safetensors"))
    tensors[name] = DAMAGES[how](tensors[name]).contiguous()
    save_file(tensors, str(folder / "prompt.safetensors"))


# -- voice prompts --------------------------------------------------------------------------------
@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("family, name", [(f, n) for f, names in TENSORS.items() for n in names])
def test_a_damaged_prompt_is_refused_naming_what_is_wrong(engines, prepared, tmp_path, family, name, how):
    engine, folder = engines[family], tmp_path / "prompt"
    shutil.copytree(prepared[family], folder)
    engine.load_voice(folder)  # the good one loads
    damage_prompt(folder, name, how)
    with pytest.raises(VoicePromptMismatch, match=f"damaged voice prompt: {name} ") as e:
        engine.load_voice(folder)
    assert any(c in str(e.value) for c in CAUSES[how]) and "prepare the voice again" in str(e.value)


def test_damaged_prompt_json_is_refused(engines, prepared, tmp_path):
    for family, engine in engines.items():
        for text in ("[" * 100_000 + "]" * 100_000, "[1, 2]", f'{{"format": 1, "format_version": 1, "family": "{family}", "sample_rate": "fast"}}'):
            folder = tmp_path / family
            shutil.rmtree(folder, ignore_errors=True)
            shutil.copytree(prepared[family], folder)
            (folder / "prompt.json").write_text(text)
            with pytest.raises(VoicePromptMismatch, match="prompt"):
                engine.load_voice(folder)


def test_qwen_codes_past_the_codebook_are_refused(engines, prepared, tmp_path):
    folder = tmp_path / "prompt"
    shutil.copytree(prepared["qwen3_tts"], folder)
    tensors = load_file(str(folder / "prompt.safetensors"))
    tensors["ref_code"][0, 1] = engines["qwen3_tts"].engine.cfg.talker.code_predictor.vocab_size
    save_file(tensors, str(folder / "prompt.safetensors"))
    with pytest.raises(VoicePromptMismatch, match="damaged voice prompt: ref_code holds codes over"):
        engines["qwen3_tts"].load_voice(folder)


@pytest.mark.parametrize("how", DAMAGES)
@pytest.mark.parametrize("family", TENSORS)
def test_the_library_prepares_a_damaged_prompt_again_with_a_warning(engines, clip, tmp_path, caplog, family, how):
    engine = engines[family]
    library = VoiceLibrary(tmp_path / "voices", Database(tmp_path / "koe.db"))
    library.add("kim", str(clip), REF_TEXT)
    made = []

    def prepare(voice):
        made.append(engine.prepare_voice(VoiceReference(str(voice.reference_path), voice.ref_text)))
        return made[-1]

    first = library.prompt_for("kim", "model-a", prepare, engine.load_voice)
    [folder] = (library.get("kim").folder / "prompts").iterdir()
    good = load_file(str(folder / "prompt.safetensors"))
    name = TENSORS[family][-1]
    damage_prompt(folder, name, how)
    with caplog.at_level(logging.WARNING, logger="koe.service.voices.library"):
        again = library.prompt_for("kim", "model-a", prepare, engine.load_voice)
    assert len(made) == 2 and again is made[1] and first is made[0]
    [record] = [r for r in caplog.records if "is damaged" in r.getMessage()]
    assert "preparing it again" in record.getMessage() and name in record.getMessage()
    remade = load_file(str(folder / "prompt.safetensors"))  # the prompt on disk is whole again, made from the stored reference
    assert remade.keys() == good.keys() and all(torch.equal(remade[k], good[k]) for k in good)
    library.prompt_for("kim", "model-a", prepare, engine.load_voice)
    assert len(made) == 2  # and it is used from now on


@pytest.mark.parametrize("family, name, how", [("f5_tts", "samples", "nan-inf"), ("voxcpm", "prompt", "2-D"), ("voxcpm", "reference", "over-long")])
def test_koe_speak_with_a_damaged_library_prompt_speaks_as_before(folders, clip, tmp_path, monkeypatch, family, name, how):
    cli = strict_koe_command(tmp_path, monkeypatch)
    cli("voices", "add", "good", "--ref", clip, "--ref-text", REF_TEXT, ok=True)
    out = tmp_path / "out.wav"
    speak = ("speak", TEXT, "-m", folders[family], "--voice", "good", "--seed", "1", *FAST[family], "-o", out)
    cli(*speak, ok=True)
    first = out.read_bytes()
    [key] = library_voices(cli.home)["good"].prepared_for
    prompt = cli.home / "voices" / "good" / "prompts" / key
    damage_prompt(prompt, name, how)
    r = cli(*speak, ok=True)
    assert "Traceback" not in r.output
    assert out.read_bytes() == first
    koe.load(folders[family]).load_voice(prompt)  # prepared again and kept


# -- model files ----------------------------------------------------------------------------------
def torn(data: bytes) -> bytes:
    return data[: len(data) // 2]


def nested(data: bytes) -> bytes:
    return b"[" * 100_000 + b"]" * 100_000


CONFIGS = {
    "nested": (nested, "nested too deeply"),
    "not-json": (lambda b: b"not json {", "not valid JSON"),
    "list": (lambda b: b"[1, 2]", "expected a JSON object"),
}
TORN = [
    ("qwen3_tts", "model.safetensors"),
    ("qwen3_tts", "speech_tokenizer/model.safetensors"),
    ("f5_tts", None),
    ("voxcpm", "model.safetensors"),
    ("voxcpm", "audiovae.safetensors"),
]


def broken_copy(folders, family: str, rel: str | None, how, root: Path) -> tuple[Path, str]:
    folder = mirror(folders[family], root / family)
    rel = rel or next(p.name for p in folders[family].glob("model_*.safetensors"))  # F5-TTS: the checkpoint's own name
    damage(folder, rel, how)
    return folder, rel


def error_line(r) -> str:
    """The failed command's one `error:` line (a warning line, e.g. about random weights, may come before it), no traceback."""
    errors = [ln for ln in r.stderr.splitlines() if ln.startswith("error:")]
    assert r.exit_code != 0 and "Traceback" not in r.output and len(errors) == 1, r.output
    return errors[0]


@pytest.mark.parametrize("family, rel", TORN)
def test_a_torn_weights_file_is_one_named_line_through_koe_speak(folders, clip, tmp_path, monkeypatch, family, rel):
    folder, rel = broken_copy(folders, family, rel, torn, tmp_path)
    cli = strict_koe_command(tmp_path, monkeypatch)
    r = cli("speak", TEXT, "-m", folder, "--ref", clip, "--ref-text", REF_TEXT, "-o", tmp_path / "out.wav")
    line = error_line(r)
    assert r.exit_code == 1 and "unexpected" not in line and "reinstall" in line  # ModelFailed, with its hint
    assert f"model {family!r} failed to load" in line and f"{rel}: damaged or incomplete safetensors file" in line, line
    assert not (tmp_path / "out.wav").exists()


@pytest.mark.parametrize("how", CONFIGS)
@pytest.mark.parametrize("family, rel", [("qwen3_tts", "config.json"), ("voxcpm", "config.json"), ("qwen3_tts", "speech_tokenizer/config.json")])
def test_a_damaged_config_is_one_named_line_through_koe_speak(folders, clip, tmp_path, monkeypatch, family, rel, how):
    edit, words = CONFIGS[how]
    folder, rel = broken_copy(folders, family, rel, edit, tmp_path)
    cli = strict_koe_command(tmp_path, monkeypatch)
    r = cli("speak", TEXT, "-m", folder, "--ref", clip, "--ref-text", REF_TEXT, "-o", tmp_path / "out.wav")
    line = error_line(r)
    assert r.exit_code == 2 and "unexpected" not in line and "RecursionError" not in line
    assert rel in line and words in line, line


@pytest.mark.parametrize(
    "family, rel, how, words",
    [
        ("qwen3_tts", "model.safetensors", torn, "model.safetensors: damaged or incomplete safetensors file"),
        ("voxcpm", "audiovae.safetensors", torn, "audiovae.safetensors: damaged or incomplete safetensors file"),
        ("qwen3_tts", "config.json", nested, "config.json: not a usable JSON file (nested too deeply)"),
        ("qwen3_tts", "generation_config.json", nested, "generation_config.json: not a usable JSON file (nested too deeply)"),
        ("voxcpm", "config.json", lambda b: b"[1, 2]", "config.json: expected a JSON object"),
    ],
    ids=["qwen-torn", "voxcpm-torn-vae", "qwen-nested-config", "qwen-nested-generation-config", "voxcpm-list-config"],
)
def test_damaged_model_files_are_a_named_model_failed_through_the_service(folders, tmp_path, family, rel, how, words):
    home = KoeHome(load_settings(tmp_path / "home", environ={}))
    home.models.import_model(mirror(folders[family], tmp_path / "m"), "broken", link=True)  # validated while whole, then damaged
    damage(tmp_path / "m", rel, how)
    synth = Synthesizer(home)
    audio = (speechy(2.0), 24000)
    with pytest.raises(ModelFailed) as e:
        synth.speak(SpeechRequest(text=TEXT, model="broken", ref_audio=audio, ref_text=REF_TEXT, options={}))
    assert words in e.value.message and "RecursionError" not in e.value.message and str(tmp_path) not in e.value.message
    assert e.value.hint and "reinstall" in e.value.hint
    synth.cache.clear()


def test_one_json_reader_names_the_file_for_every_fault(tmp_path):
    path = tmp_path / "config.json"
    for data, words in (
        (b"[" * 100_000 + b"]" * 100_000, "nested too deeply"),
        (b'{"a":' * 100_000 + b"1" + b"}" * 100_000, "nested too deeply"),
        (b"{oops", "not valid JSON"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"null", "found null"),
        (b"[]", "found list"),
    ):
        path.write_bytes(data)
        with pytest.raises(ValueError, match=words) as e:
            read_json_object(path)
        assert str(path) in str(e.value)
    path.write_bytes(b'{"model_type": "x"}')
    assert read_json_object(path) == {"model_type": "x"}
    os.symlink(tmp_path / "missing.json", tmp_path / "dangling.json")
    with pytest.raises(ValueError, match="cannot read it"):
        read_json_object(tmp_path / "dangling.json")


def test_an_f5_config_yaml_nested_too_deeply_is_one_line_not_a_recursion_error(folders, clip, tmp_path, monkeypatch):
    folder, _ = broken_copy(folders, "f5_tts", "config.yaml", lambda b: b"model: " + b"[" * 100_000 + b"]" * 100_000 + b"\n", tmp_path)
    r = strict_koe_command(tmp_path, monkeypatch)("speak", TEXT, "-m", folder, "--ref", clip, "--ref-text", REF_TEXT, "-o", tmp_path / "out.wav")
    line = error_line(r)
    assert "unexpected" not in line and "RecursionError" not in line, line


def test_tokenizer_json_nested_too_deeply_is_the_tokenizers_own_error(tmp_path):
    from koe.engines.qwen3_tts.text.tokenizer import TokenizerFilesError
    from koe.engines.qwen3_tts.text.tokenizer import _read_json as qwen_read
    from koe.engines.voxcpm.text import TokenizerError
    from koe.engines.voxcpm.text import _read_json as voxcpm_read

    path = tmp_path / "tokenizer.json"
    path.write_bytes(nested(b""))
    with pytest.raises(TokenizerFilesError, match="nested too deeply"):
        qwen_read(path)
    with pytest.raises(TokenizerError, match="nested too deeply"):
        voxcpm_read(path)
