"""`koe.bench.accuracy` (Qwen3-TTS's accuracy tool): teacher forcing follows the decode path, and a mode's error is reported."""

from __future__ import annotations

import math
from dataclasses import replace

import torch
from fixtures_models import model_folder

from koe.bench import kit
from koe.bench.accuracy import compare, main
from koe.engines.qwen3_tts.bench import cases
from koe.engines.qwen3_tts.bench.accuracy import forced_logits, measure


def test_teacher_forcing_reproduces_a_greedy_decode(session_tmp) -> None:
    from koe.engines.qwen3_tts.engine import Qwen3TTSEngine

    engine = Qwen3TTSEngine.load(model_folder(session_tmp, "custom_voice"), device="cpu")
    items = engine.prompt_items([cases.TEXT], [cases.LANGUAGE], [cases.SPEAKER], [None])
    settings = engine.decode_settings(max_new_tokens=7, do_sample=False, subtalker_dosample=False, repetition_penalty=1.0)
    settings = replace(settings, eos_id=settings.suppress_ids[-1])
    (codes,) = engine.generate_codes(items, settings, non_streaming_mode=engine.default_non_streaming(), generator=None)
    talker, predictor = forced_logits(engine, items, codes)
    assert talker.shape[0] == predictor.shape[0] == codes.shape[0] == 6
    # greedy picks the largest logit, so forcing the drawn codes gives back logits whose argmax is each code
    suppressed = torch.tensor(settings.suppress_ids)
    talker = talker.clone()
    talker[:, suppressed] = -math.inf
    assert torch.equal(talker.argmax(-1), codes[:, 0])
    assert torch.equal(predictor.argmax(-1), codes[:, 1:])


def test_measure_reports_the_mode_and_its_error(session_tmp, tmp_path, capsys, monkeypatch) -> None:
    monkeypatch.delenv("KOE_FAST_CODEC", raising=False)
    result = measure(kit, model_folder(session_tmp, "custom_voice"), "int8", frames=4)
    assert result["precision"] == "int8" and result["frames"] == 4
    for part in ("talker", "predictor"):
        assert 0.9 < result[part]["cosine_mean"] <= 1.0 and 0.0 <= result[part]["top1_agreement"] <= 1.0
    # int8 decodes with the fast codec (bf16 convolutions): a finite error, measured ~37 dB on the tiny codec
    assert result["codec"].startswith("fast-") and 30 < result["codec_snr_db"] < math.inf
    monkeypatch.setenv("KOE_FAST_CODEC", "0")  # the exact codec in int8: the same waveform as float32's
    exact_codec = measure(kit, model_folder(session_tmp, "custom_voice"), "int8", frames=4)
    assert exact_codec["codec"] == "exact" and exact_codec["codec_snr_db"] == math.inf
    same = torch.randn(3, 5)
    assert compare(same, same)["top1_agreement"] == 1.0


def test_command_line_writes_json(session_tmp, tmp_path) -> None:
    out = tmp_path / "acc.json"
    assert main(["--size", "tiny", "--precision", "bf16", "--frames", "3", "--models", str(tmp_path / "models"), "--out", str(out)]) == 0
    assert '"precision": "bfloat16"' in out.read_text()
