"""The IndexTTS 2.5 drop-in (`koe.compat.indextts_v2_5.IndexTTS2`, i.e. `koe.compat.indextts.IndexTTS25`)
against upstream's `infer_v2_5.IndexTTS2` on the golden `infer25` (upstream on koe's tiny random
release 2.5): each job (its language, its speaker clip), with upstream's caches emptied and the
generators seeded as the golden does, gives upstream's int16 return value and leaves Python `random`
where upstream's leaves it; a WAV written is that audio. Then bad arguments: a clear error, no file written."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf
import torch
from goldens import check_state, inputs, load_golden, release_digests, written

from koe.compat import indextts
from koe.compat.indextts_v2_5 import IndexTTS2
from koe.engines.base import EmptyText, InvalidOption, UnsupportedVoice

G = inputs("infer25")
pytestmark = pytest.mark.filterwarnings("ignore:generation stopped at max_mel_tokens")
CACHES = ("cache_spk_cond", "cache_s2mel_style", "cache_s2mel_prompt", "cache_spk_audio_prompt", "cache_emo_cond", "cache_emo_audio_prompt", "cache_mel")


def sha(a) -> str:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()


@pytest.fixture(scope="module")
def golden():
    return load_golden("infer25")


@pytest.fixture(scope="module")
def folder(golden):
    folder = written("infer25")
    for name, digest in release_digests("2.5").items():
        check_state(golden, digest, name=name.replace("/", ":"))
    return folder


@pytest.fixture(scope="module")
def clips(folder, tmp_path_factory) -> Path:
    """The golden's clips and a silent one (the golden's folder is shared: to read only)."""
    clips = tmp_path_factory.mktemp("clips")
    for clip in folder.glob("*.wav"):
        (clips / clip.name).symlink_to(clip)
    sf.write(clips / "silent.wav", np.zeros(22050, np.float32), 22050)
    return clips


@pytest.fixture(scope="module")
def tts(folder):
    """Constructed as the golden constructs upstream's."""
    model = folder / "model"
    return IndexTTS2(cfg_path=str(model / "config.yaml"), model_dir=str(model), use_bf16=False, device="cpu", use_qwen_emo=False)


def run(tts, folder, job: dict, output_path=None):
    job = dict(job)
    seed, text, lang = job.pop("seed"), job.pop("text"), job.pop("lang")
    speaker = folder / job.pop("speaker", "speaker.wav")
    if "emo_audio_prompt" in job:
        job["emo_audio_prompt"] = str(folder / job["emo_audio_prompt"])
    for cache in CACHES:
        setattr(tts, cache, None)
    torch.manual_seed(seed)
    random.seed(seed)
    return tts.infer(str(speaker), text, output_path, lang, **job, **G.GENERATION)


def test_the_drop_in_is_upstreams_name():
    assert IndexTTS2 is indextts.IndexTTS25 and IndexTTS2 is not indextts.IndexTTS2


@pytest.mark.parametrize("i", range(len(G.JOBS)))
def test_each_job_is_upstreams(tts, folder, golden, i):
    rate, wav = run(tts, folder, G.JOBS[i])
    assert rate == 22050 and wav.dtype == np.int16 and wav.shape[1] == 1
    assert sha(wav) == str(golden[f"j{i}.wav_sha256"])
    assert hashlib.sha256(json.dumps(random.getstate()).encode()).hexdigest() == str(golden[f"j{i}.random"])


def test_a_later_call_with_the_same_clip_reads_no_clip_again(tts, folder, golden):
    """Job 0 again without emptying the caches: the clips' features are kept, so w2v-BERT makes no
    draws, as in upstream's later calls: the search's draws differ from the first call's."""
    run(tts, folder, G.JOBS[0])
    torch.manual_seed(G.JOBS[0]["seed"])
    rate, later = tts.infer(str(folder / "speaker.wav"), G.JOBS[0]["text"], None, "zh", **G.GENERATION)
    assert tts.cache_spk_audio_prompt == str(folder / "speaker.wav") and tts.cache_emo_cond is not None
    assert rate == 22050 and later.size > 0


def test_the_file_is_the_audio(tts, folder, golden, tmp_path):
    out = tmp_path / "out.wav"
    assert run(tts, folder, G.JOBS[0], str(out)) == str(out)
    _, wav = run(tts, folder, G.JOBS[0])
    written, rate = sf.read(out, dtype="int16")
    assert rate == 22050 and written.shape[0] == wav.shape[0]
    assert np.abs(written.astype(np.int32) - wav[:, 0].astype(np.int32)).max() <= 2  # the file rounds, the return value truncates


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"lang": None}, ValueError, "lang=None: give the text's language code"),
        ({"duration_factor": 0}, InvalidOption, "duration_factor=0.0: must be in \\[0.5, 2\\]"),
        ({"text_normalization": "yes"}, ValueError, "text_normalization='yes'"),
        ({"text": "   "}, EmptyText, "text is empty"),
        ({"spk": "silent.wav"}, UnsupportedVoice, "spk_audio_prompt cannot be used: audio is all silence"),
        ({"spk": "missing.wav"}, FileNotFoundError, "no such file"),
        ({"top_k": -1}, InvalidOption, "top_k=-1"),
        ({"beams": 2}, TypeError, "beams"),
        ({"emo_vector": [1, 2]}, ValueError, "give 8 numbers"),
    ],
)
def test_bad_arguments_are_clear_errors(tts, clips, tmp_path, change, error, match):
    change = dict(change)
    args = {"lang": "en", "text": "Hello there.", "spk": "speaker.wav"}
    for key in list(args):
        if key in change:
            args[key] = change.pop(key)
    out = tmp_path / "never.wav"
    with pytest.raises(error, match=match):
        tts.infer(str(clips / args["spk"]), args["text"], str(out), args["lang"], max_mel_tokens=10, **change)
    assert not out.exists()


def test_a_release_25_folder_is_refused_by_the_other_drop_ins(folder):
    with pytest.raises(ValueError, match="IndexTTS-2.5 release: use koe.compat.indextts.IndexTTS25"):
        indextts.IndexTTS2(model_dir=str(folder / "model"))
    with pytest.raises(ValueError, match="IndexTTS-2.5 release: use koe.compat.indextts.IndexTTS25"):
        indextts.IndexTTS(model_dir=str(folder / "model"))
