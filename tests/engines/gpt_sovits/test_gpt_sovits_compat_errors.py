"""`koe.compat.gpt_sovits`: bad configs and bad inputs are clear errors, before any audio; a yaml
config is read as data (never run); nothing is written on the drop-in's own."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from sovits_goldens import inputs, written

from koe.compat.gpt_sovits import TTS, ReferenceLengthError, ReferenceNotFound, TTS_Config
from koe.engines.base import EmptyText, InvalidOption, UnsupportedLanguage

G = inputs("infer")


@pytest.fixture(scope="module")
def folder() -> Path:
    return written("infer")  # shared: to read only


@pytest.fixture(scope="module")
def short_and_long(tmp_path_factory) -> Path:
    """References of 2.5 and 10.5 s (`ref_<seconds>.wav`)."""
    clips = tmp_path_factory.mktemp("clips")
    for seconds in (2.5, 10.5):
        G.write_wav(clips / f"ref_{seconds}.wav", G.clip(seconds, 32000, 200.0, 3), 32000)
    return clips


def config(model: Path, **changes) -> dict:
    sub = model / "gsv-v2final-pretrained"
    custom = {
        "device": "cpu",
        "is_half": False,
        "version": "v2",
        "t2s_weights_path": str(next(sub.glob("*.ckpt"))),
        "vits_weights_path": str(next(sub.glob("*.pth"))),
        "bert_base_path": str(model / "chinese-roberta-wwm-ext-large"),
        "cnhuhbert_base_path": str(model / "chinese-hubert-base"),
    }
    return {"custom": {**custom, **changes}}


@pytest.fixture(scope="module")
def tts(folder) -> TTS:
    return TTS(TTS_Config(config(folder / "model")))


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working directory without upstream's tree (so its default paths are not there)."""
    monkeypatch.chdir(tmp_path)
    return tmp_path


def request(folder: Path, **changes) -> dict:
    base = {"text": "Hello there.", "text_lang": "en", "ref_audio_path": str(folder / "ref.wav"), "prompt_text": G.PROMPT_EN, "prompt_lang": "en", "seed": 1}
    return {**base, **changes}


# -- configs -------------------------------------------------------------------------------------
@pytest.mark.parametrize("key", ["t2s_weights_path", "vits_weights_path", "bert_base_path", "cnhuhbert_base_path"])
def test_a_missing_path_falls_back_as_upstream_then_names_both(key, folder, elsewhere):
    with pytest.warns(UserWarning, match=key):
        cfg = TTS_Config(config(folder / "model", **{key: str(elsewhere / "nope")}))
    assert getattr(cfg, key).startswith("GPT_SoVITS/pretrained_models/")
    with pytest.raises(FileNotFoundError, match=rf"{key} 'GPT_SoVITS/pretrained_models/.*/nope' is not there either"):
        TTS(cfg)


def test_a_version_whose_files_are_missing_names_them(folder, elsewhere):
    """The drop-in runs every version, reading what upstream reads from its `pretrained_models`
    (here the BERT folder's parent, as the config names it) whatever the config says: a version
    whose files are not there names them, before any weights are read."""
    for header, version, needed in ((b"02", "v3", "models--nvidia--bigvgan"), (b"04", "v4", "gsv-v4-pretrained/s2Gv4.pth"), (b"05", "v2Pro", "sv/pretrained")):
        path = elsewhere / f"{version}.pth"
        path.write_bytes(header + bytes(10000))
        with pytest.raises(FileNotFoundError, match=rf"missing .*{needed}.* \(koe models pull lj1995/GPT-SoVITS/GPT-SoVITS-{version}\)"):
            TTS(TTS_Config(config(folder / "model", vits_weights_path=str(path))))
    junk = elsewhere / "junk.pth"
    junk.write_bytes(b"xx" + bytes(100))
    with pytest.raises(ValueError, match="not a SoVITS checkpoint"):
        TTS(TTS_Config(config(folder / "model", vits_weights_path=str(junk))))


def test_bad_config_shapes(folder, elsewhere):
    with pytest.raises(ValueError, match="version 'v9'"):
        TTS_Config(config(folder / "model", version="v9"))
    with pytest.raises(ValueError, match="maps config names to configs"):
        TTS_Config(config(folder / "model")["custom"])  # the flat form upstream would silently ignore
    with pytest.raises(TypeError):
        TTS_Config(42)


def test_a_yaml_config_is_read_as_data_never_run(folder, elsewhere):
    marker = elsewhere / "ran"
    for tag in ("!!python/object/apply:os.system", "!!python/object/new:os.system"):
        path = elsewhere / "tts_infer.yaml"
        path.write_text(f"custom: {tag} [touch {marker}]\n", encoding="utf-8")
        with pytest.raises(ValueError, match="as data"):
            TTS_Config(str(path))
    assert not marker.exists()
    path.write_text("- a list\n", encoding="utf-8")
    with pytest.raises(ValueError, match="maps config names"):
        TTS_Config(str(path))


def test_nothing_is_written_and_other_devices_fall_back_to_the_cpu(folder, elsewhere):
    with pytest.warns(UserWarning) as caught:
        cfg = TTS_Config(config(folder / "model", device="cuda:0", is_half=True))
    assert (cfg.device, cfg.is_half) == ("cpu", False)
    assert any("CPU" in str(w.message) for w in caught)
    with pytest.warns(UserWarning, match="no such config file"):
        TTS_Config(str(elsewhere / "missing.yaml"))
    TTS_Config(None)
    assert list(elsewhere.iterdir()) == []  # upstream writes GPT_SoVITS/configs/tts_infer.yaml here


# -- run -----------------------------------------------------------------------------------------
def test_a_missing_reference(folder, tts):
    with pytest.raises(ReferenceNotFound, match="nope.wav not exists") as e:
        tts.run(request(folder, ref_audio_path=str(folder / "nope.wav")))
    assert isinstance(e.value, FileNotFoundError) and isinstance(e.value, ValueError)
    fresh = TTS(tts.configs)
    with pytest.raises(ValueError, match="ref_audio_path cannot be empty"):
        fresh.run(request(folder, ref_audio_path=""))


@pytest.mark.parametrize("seconds", [2.5, 10.5])
def test_a_reference_outside_3_to_10_seconds(seconds, folder, short_and_long, tts):
    with pytest.raises(ReferenceLengthError, match="3 to 10 seconds") as e:
        list(tts.run(request(folder, ref_audio_path=str(short_and_long / f"ref_{seconds}.wav"))))
    assert isinstance(e.value, OSError)  # upstream's type
    with pytest.raises(ReferenceLengthError):
        tts.set_ref_audio(str(short_and_long / f"ref_{seconds}.wav"))


def test_languages_the_model_does_not_speak(folder, tts):
    with pytest.raises(UnsupportedLanguage, match="text_lang 'fr'"):
        tts.run(request(folder, text_lang="fr"))
    with pytest.raises(UnsupportedLanguage, match="prompt_lang 'xx'"):
        tts.run(request(folder, prompt_lang="xx"))
    tts.run(request(folder, prompt_lang="xx", prompt_text=""))  # no transcript: its language is not read, as upstream


@pytest.mark.parametrize("text", ["", "  \n", None])
def test_empty_text(text, folder, tts):
    with pytest.raises(EmptyText):
        tts.run(request(folder, text=text))


def test_text_with_nothing_to_speak(folder, tts):
    with pytest.raises(EmptyText, match="nothing to speak"):
        list(tts.run(request(folder, text="。！？…")))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"text_split_method": "cut9"}, "text_split_method='cut9': must be one of cut0, cut1, cut2, cut3, cut4, cut5"),
        ({"top_k": "5"}, "top_k='5'"),
        ({"batch_size": 0}, "batch_fragments=0"),
        ({"split_bucket": "yes"}, "split_bucket"),
    ],
)
def test_bad_options(changes, match, folder, tts):
    with pytest.raises(InvalidOption, match=match):
        tts.run(request(folder, **changes))


@pytest.mark.parametrize(
    ("changes", "match"),
    [
        ({"batch_size": 2}, "batch_size=2 with streaming_mode: .* must be 1"),
        ({"overlap_length": 0}, r"overlap_length=0: must be >= 1"),
        ({"overlap_length": 4, "min_chunk_length": 4, "fixed_length_chunk": True}, "overlap_length=4: must be under 4"),
        ({"overlap_length": 6, "min_chunk_length": 4}, r"overlap_length=6: must be under 6, .*min_chunk_length \+ 2"),
        ({"min_chunk_length": "8"}, "min_chunk_length='8'"),
        ({"fixed_length_chunk": "yes"}, "fixed_length_chunk"),
    ],
)
def test_bad_streaming_options(changes, match, folder, tts):
    """What upstream's streaming fails on deep inside (a larger batch, an overlap that leaves nothing
    of the first chunk) or would misread is refused when `run` is called."""
    with pytest.raises(InvalidOption, match=match):
        tts.run(request(folder, streaming_mode=True, **changes))


def test_streaming_options_are_read_only_when_streaming(folder, tts):
    """As upstream's: without streaming_mode they are not read."""
    tts.run(request(folder, overlap_length=0, min_chunk_length="x", fixed_length_chunk="yes", batch_size=2)).close()
    tts.run(request(folder, streaming_mode=False, overlap_length=0)).close()


def test_a_missing_auxiliary_clip_is_skipped_as_upstream(folder, tts):
    tts.prompt_cache["ref_audio_path"] = None
    alone = list(tts.run(request(folder)))
    tts.prompt_cache["ref_audio_path"] = None
    with pytest.warns(UserWarning, match="does not exist: skipped"):
        skipped = list(tts.run(request(folder, aux_ref_audio_paths=[str(folder / "nope.wav")])))
    assert np.array_equal(alone[0][1], skipped[0][1])


def test_a_failed_weights_swap_keeps_the_loaded_model(folder, tts, elsewhere):
    models = tts.engine.models
    t2s, sovits = models.t2s, models.sovits
    with pytest.raises(FileNotFoundError, match="nope.ckpt"):
        tts.init_t2s_weights(str(elsewhere / "nope.ckpt"))
    v3 = elsewhere / "s2Gv3.pth"
    v3.write_bytes(b"02" + bytes(100))
    with pytest.raises(FileNotFoundError, match="models--nvidia--bigvgan"):
        tts.init_vits_weights(str(v3))
    assert tts.engine.models is models and models.t2s is t2s and models.sovits is sovits and tts.configs.version == "v2"
