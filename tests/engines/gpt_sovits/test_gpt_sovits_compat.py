"""`koe.compat.gpt_sovits` against upstream's `TTS(TTS_Config(...)).run(inputs)`, bit for bit.

The golden (goldens/infer.npz, tests/oracle_gpt_sovits/golden_infer.py) is upstream's `TTS.run` on
koe's tiny v2 folder (golden_infer.py) for every case of its `cases.json`, each on a fresh prompt
cache; here the drop-in gets the same config dict and the same inputs dicts, each case on a fresh
prompt cache too, and must yield what upstream yielded: as many chunks, the same sample rate, int16
samples (one dimension) whose sha256 and first 32 samples are upstream's.

`streaming_mode` (goldens/infer_stream.npz, tests/oracle_gpt_sovits/golden_infer_stream.py) on the
same folder, its cases in golden_infer_stream.py: every chunk upstream yielded (its sha256, first
and last 32 samples), and the float samples of koe's `streaming.stream` before the int16 step.
"""

from __future__ import annotations

import json

import numpy as np
import pytest
from sovits_goldens import array_sha256, check_recorded, fixtures, inputs, load_golden

from koe.compat.gpt_sovits import TTS, TTS_Config
from koe.engines.base import VoiceReference
from koe.engines.gpt_sovits.streaming import StreamSettings, stream
from koe.engines.gpt_sovits.synthesis import RunSettings, set_seed

G = inputs("infer")
S = inputs("infer_stream")
golden, folder = fixtures("infer")


def upstream_config(model) -> dict:
    """The config dict the oracle script hands upstream's TTS_Config."""
    sub = model / "gsv-v2final-pretrained"
    return {
        "custom": {
            "device": "cpu",
            "is_half": False,
            "version": "v2",
            "t2s_weights_path": str(next(sub.glob("*.ckpt"))),
            "vits_weights_path": str(next(sub.glob("*.pth"))),
            "bert_base_path": str(model / "chinese-roberta-wwm-ext-large"),
            "cnhuhbert_base_path": str(model / "chinese-hubert-base"),
        }
    }


@pytest.fixture(scope="module")
def tts(folder):
    return TTS(TTS_Config(upstream_config(folder / "model")))


@pytest.fixture(scope="module")
def cases(folder):
    return json.loads((folder / "cases.json").read_text(encoding="utf-8"))


def run_case(tts: TTS, folder, case: dict, **extra) -> list[tuple[int, np.ndarray]]:
    """One case as the oracle runs it: a fresh prompt cache, the reference (and aux clip) by path."""
    tts.prompt_cache["ref_audio_path"] = None
    request = {k: v for k, v in case.items() if k != "aux"}
    request["ref_audio_path"] = str(folder / "ref.wav")
    request["aux_ref_audio_paths"] = [str(folder / "aux.wav")] if case.get("aux") else []
    return list(tts.run({**request, **extra}))


def check_equals_golden(chunks, golden, name: str) -> None:
    assert len(chunks) == int(golden[f"{name}.count"])
    for k, (sr, audio) in enumerate(chunks):
        assert sr == int(golden[f"{name}.sr"])
        assert isinstance(audio, np.ndarray) and audio.dtype == np.int16 and audio.ndim == 1, k
        assert len(audio) == int(golden[f"{name}.{k}.length"]), k
        np.testing.assert_array_equal(audio[:32], golden[f"{name}.{k}.head"])
        if f"{name}.{k}.tail" in golden:
            np.testing.assert_array_equal(audio[-32:], golden[f"{name}.{k}.tail"])
        assert array_sha256(audio) == str(golden[f"{name}.{k}.int16"]), k


def test_every_golden_case_is_tested(golden, cases):
    assert set(cases) == set(G.CASES) == {k.split(".")[0] for k in golden if k.endswith(".count")}


@pytest.mark.parametrize("name", list(G.CASES))
def test_run_equals_upstream(name, golden, folder, tts, cases):
    check_equals_golden(run_case(tts, folder, cases[name]), golden, name)


def test_unknown_and_v3_only_keys_are_ignored_as_upstream(golden, folder, tts, cases):
    extra = {"media_type": "wav", "sample_steps": 8, "super_sampling": True, "overlap_length": 4, "min_chunk_length": 8, "streaming_mode": False}
    check_equals_golden(run_case(tts, folder, cases["en"], **extra), golden, "en")


def test_from_folder_and_yaml_name_the_same_files(golden, folder, cases, tmp_path):
    """koe's from_folder, and upstream's yaml path form, make the config the dict makes: upstream's samples."""
    model = folder / "model"
    from_dict = TTS_Config(upstream_config(model))
    yaml_path = tmp_path / "tts_infer.yaml"
    from_dict.save_configs(yaml_path)
    for config in (TTS_Config.from_folder(model), TTS_Config(str(yaml_path))):
        assert config.update_configs() == from_dict.update_configs()
    check_equals_golden(run_case(TTS(TTS_Config(str(yaml_path))), folder, cases["sampling"]), golden, "sampling")


def test_weights_swapped_in_give_their_samples(golden, folder, tts, cases):
    """init_t2s_weights / init_vits_weights load the named files in place of the engine's (here the same
    release's files again, so upstream's samples must come out unchanged); the config names them."""
    config = upstream_config(folder / "model")["custom"]
    before = (tts.engine.models.t2s, tts.engine.models.sovits)
    tts.init_t2s_weights(config["t2s_weights_path"])
    tts.init_vits_weights(config["vits_weights_path"])
    assert tts.engine.models.t2s is not before[0] and tts.engine.models.sovits is not before[1]
    assert tts.configs.version == "v2" and tts.configs.t2s_weights_path == config["t2s_weights_path"]
    check_equals_golden(run_case(tts, folder, cases["batched"]), golden, "batched")


def test_a_read_reference_is_not_read_again(folder, tts, cases):
    """Upstream's prompt cache: the same ref_audio_path is not read again (no HuBERT, no layer-drop
    draws), so a second call with the same seed is not the first's samples; a fresh cache is."""
    case = cases["en"]
    first = run_case(tts, folder, case)
    again = list(tts.run({**case, "ref_audio_path": str(folder / "ref.wav")}))
    fresh = run_case(tts, folder, case)
    assert array_sha256(first[0][1]) == array_sha256(fresh[0][1])
    assert array_sha256(first[0][1]) != array_sha256(again[0][1])
    tts.set_ref_audio(str(folder / "ref.wav"))  # api_v2's /set_refer_audio: read outside run, then no path
    preset = list(tts.run({**case, "ref_audio_path": None}))
    assert array_sha256(preset[0][1]) == array_sha256(again[0][1])


def test_stop_ends_a_fragment_run_with_a_second_of_zeros(folder, tts, cases):
    case = cases["fragments"]
    run = tts.run({**case, "ref_audio_path": str(folder / "ref.wav"), "aux_ref_audio_paths": []})
    sr, first = next(run)
    tts.stop()
    rest = list(run)
    assert len(rest) == 1 and rest[0][0] == sr and np.array_equal(rest[0][1], np.zeros(sr, np.int16))
    assert len(first) > 0


# -- streaming_mode --------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def stream_golden(folder):
    """The infer_stream golden, made on this module's folder's files (its inputs are the infer golden's, its cases apart)."""
    made = load_golden("infer_stream")
    check_recorded(made, folder)
    return made


@pytest.mark.parametrize("name", list(S.CASES))
def test_streaming_mode_equals_upstream(name, stream_golden, folder, tts):
    check_equals_golden(run_case(tts, folder, S.case(name)), stream_golden, name)


def test_streamed_floats_are_upstreams(stream_golden, folder, tts):
    """`streaming.stream` (what the drop-in runs) on a voice prepared before the seed: the float32
    samples upstream's `audio_postprocess` turned into int16, chunk by chunk (a fragment's silence,
    which upstream yields itself, apart)."""
    name = "short_cuts"
    case, engine = S.case(name), tts.engine
    voice = engine.build_voice(VoiceReference(str(folder / "ref.wav"), case["prompt_text"]), prompt_lang=case["prompt_lang"])
    chunking = StreamSettings.checked(case)
    set_seed(case["seed"])
    chunks = list(stream(engine.models, voice, case["text"], case["text_lang"], RunSettings(), chunking))
    assert len(chunks) == int(stream_golden[f"{name}.count"])
    floats = [k for k in range(len(chunks)) if f"{name}.{k}.float" in stream_golden]
    assert floats == list(range(len(chunks) - 1))  # the last chunk is the fragment's silence
    for k in floats:
        assert array_sha256(chunks[k]) == str(stream_golden[f"{name}.{k}.float"]), k


def test_stop_ends_a_streaming_run_once_its_fragment_is_spoken(stream_golden, folder, tts):
    """Upstream reads `stop_flag` once a fragment's chunks and silence are out: the rest of the first
    fragment comes, then one second of zeros instead of the second fragment."""
    name = "mute_cuts"
    tts.prompt_cache["ref_audio_path"] = None
    run = tts.run({**S.case(name), "ref_audio_path": str(folder / "ref.wav")})
    sr, _ = next(run)
    tts.stop()
    rest = list(run)
    lengths = [int(stream_golden[f"{name}.{k}.length"]) for k in range(int(stream_golden[f"{name}.count"]))]
    silence = lengths.index(int(sr * S.case(name).get("fragment_interval", 0.3)))
    assert [len(a) for _, a in rest] == [*lengths[1 : silence + 1], sr]
    assert array_sha256(rest[0][1]) == str(stream_golden[f"{name}.1.int16"])
    assert not rest[-1][1].any()
