"""`koe bench --family indextts` on the tiny random releases (1.5: cases en and zh; 2: en2 and zh2; 2.5: en25 and zh25):
koe alone (every part timed), and against upstream's `IndexTTS.infer` / `IndexTTS2.infer` in the
oracle's venv (`make oracle-indextts`; a missing venv is an error, not a skip) with the codes' and
waveforms' bits compared; release 2's folder at the released sizes (its parameter counts); and the
KV cache's reorder that the benchmark's profile made cheaper."""

from __future__ import annotations

import itertools
import json

import pytest
import torch
from koe_indextts.bench import BENCH, cases
from koe_indextts.gpt import KVCache

from koe.bench import main, parse_options

QUICK_CODES = 8  # --quick's --codes


CASES_15 = ["--case", "en", "--case", "zh"]
CASES_2 = ["--case", "en2", "--case", "zh2"]
CASES_25 = ["--case", "en25", "--case", "zh25"]
TINY_2_SAMPLES = 3328  # release 2 at the tiny size reaches the cap too: int(8 codes x 1.72) = 13 mel frames of 256 samples


def _check_run(run: dict, case: str, side: str = "koe") -> None:
    parts = cases.parts_of(cases.VARIANTS[case])
    if cases.VARIANTS[case] == "IndexTTS-2.5":  # the tiny GPT's few text positions cut en25 in two; its stop bias ends searches early
        assert run["segments"] == {"en25": 2, "zh25": 1}[case] and 0 < run["codes"] <= QUICK_CODES * run["segments"] and run["audio_s"] > 0, (case, side)
        assert all(0 < run[k] < run["reference_s"] for k in cases.REFERENCE_PARTS_25), (case, side)
        assert sum(run[k] for k in cases.REFERENCE_PARTS_25) < run["reference_s"] and not any(k in run for k in ("latent_s", "codec_s"))
    else:
        assert run["segments"] == 1 and run["codes"] == QUICK_CODES and run["audio_s"] > 0, (case, side)
    if cases.VARIANTS[case] == "IndexTTS-2":
        assert run["audio_samples"] == TINY_2_SAMPLES and abs(run["audio_s"] - TINY_2_SAMPLES / 22050) < 1e-9
        assert all(0 < run[k] < run["reference_s"] for k in cases.REFERENCE_PARTS_2), (case, side)  # parts of the reference
        assert sum(run[k] for k in cases.REFERENCE_PARTS_2) < run["reference_s"]
    elif cases.VARIANTS[case] == "IndexTTS-1.5":
        assert run["audio_samples"] == QUICK_CODES * 1024  # random weights at the tiny size reach the cap: 1024 samples a code
        assert not any(k in run for k in cases.REFERENCE_PARTS_2 + ("s2mel_s",))
    for key in parts + ("total_s", "rtf", "ms_per_code", "peak_rss"):
        assert run[key] > 0, (case, side, key)
    assert abs(run["ms_per_code"] - 1e3 * run["search_s"] / run["codes"]) < 1e-9
    assert -1e-6 < run["other_s"] < run["total_s"] and abs(run["other_s"] + sum(run[k] for k in parts) - run["total_s"]) < 1e-9


PARTS_15 = ("gpt", "conditioning", "bigvgan", "speaker_encoder")
PARTS_2 = ("gpt", "conditioning", "s2mel", "w2v_bert", "semantic_codec", "campplus", "bigvgan")
PARTS_25 = ("gpt", "conditioning", "s2mel", "w2v_bert", "codec", "campplus", "bigvgan")


@pytest.mark.parametrize(
    ("which", "variant", "parts"), [(CASES_15, "IndexTTS-1.5", PARTS_15), (CASES_2, "IndexTTS-2", PARTS_2), (CASES_25, "IndexTTS-2.5", PARTS_25)]
)
def test_indextts_quick_bench_koe(tmp_path, capsys, which, variant, parts) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "indextts", "--quick", *which, "--warmup", "0", "--threads", "1", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    results = json.loads(out.read_text())
    assert results["options"]["codes"] == QUICK_CODES
    per = results["sizes"]["tiny"]
    assert set(per["cases"]) == set(which[1::2]) and set(per["models"]) == {variant}
    for case, entry in per["cases"].items():
        assert "upstream" not in entry and entry["koe"]["precision"] == "float32"
        (run,) = entry["koe"]["runs"]
        _check_run(run, case)
    params = per["models"][variant]["parameters"]
    assert list(params) == [*parts, "total"] and params["total"] == sum(params[k] for k in parts) and min(params.values()) > 0
    table = capsys.readouterr().out
    assert "ms/code" in table and "GPT s" in table and "vocoder s" in table and which[-1] in table
    assert ("s2mel s" in table and "w2v s" in table and "CAM++ s" in table) == (variant != "IndexTTS-1.5")


@pytest.mark.oracle
@pytest.mark.goldens_oracle("indextts")
@pytest.mark.parametrize("which", [CASES_15, CASES_2, CASES_25])
def test_indextts_quick_bench_against_upstream(tmp_path, capsys, which) -> None:
    out = tmp_path / "bench.json"
    argv = ["--family", "indextts", "--quick", *which, "--threads", "1", "--compare", "upstream", "--models", str(tmp_path / "models"), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    per = json.loads(out.read_text())["sizes"]["tiny"]
    assert set(per["cases"]) == set(which[1::2])
    for case, entry in per["cases"].items():
        koe_run, up_run = entry["koe"]["runs"][0], entry["upstream"]["runs"][0]
        _check_run(koe_run, case)
        _check_run(up_run, case, "upstream")
        assert entry["upstream"]["precision"] == "float32" and entry["ratio"]["total_s"] > 0 and entry["ratio"]["search_s"] > 0
        assert entry["codes_equal"] and entry["wave_equal"], case  # same seed: upstream's codes and waveform, bit for bit
        assert koe_run["codes_sha1"] == up_run["codes_sha1"] and koe_run["wave_sha1"] == up_run["wave_sha1"]
    out_text = capsys.readouterr().out
    assert "koe/up" in out_text and "waveforms equal" in out_text and "codes equal" in out_text


def test_indextts_bench_options() -> None:
    opts, _ = parse_options(["--family", "indextts"])
    assert opts.sizes == ["real"] and opts.cases == ["en", "zh", "en2", "zh2"] and opts.codes == 150 and opts.precision == "fp32"
    opts, _ = parse_options(["--family", "indextts", "--quick", "--case", "zh2", "--codes", "20"])
    assert opts.sizes == ["tiny"] and opts.cases == ["zh2"] and opts.codes == 20 and opts.variant is None
    assert BENCH.sides["upstream"].venv == ".oracle-indextts" and BENCH.model_variants == ("IndexTTS-1.5", "IndexTTS-2", "IndexTTS-2.5")
    assert {cases.VARIANTS[c] for c in cases.CASES} == set(BENCH.model_variants) and cases.CASES["en2"] == cases.CASES["en"]
    opts, _ = parse_options(["--family", "indextts", "--quick", "--case", "en25"])
    assert opts.cases == ["en25"] and cases.LANGUAGES == {"en25": "en", "zh25": "zh"} and cases.CASES["zh25"] == cases.CASES["zh"]
    for wrong in (["--case", "ja"], ["--size", "2"], ["--precision", "bf16"], ["--codes", "0"], ["--variant", "IndexTTS-2"]):  # the cases pick the release
        with pytest.raises(SystemExit):
            parse_options(["--family", "indextts", *wrong])


def _keys(d: dict, prefix: str = "") -> set[str]:
    return {k for key, v in d.items() for k in (_keys(v, f"{prefix}{key}.") if isinstance(v, dict) else {f"{prefix}{key}"})}


REAL_2_PARAMETERS = {  # koe's modules built from release_config("real") (weight-normed layers as released: g and v)
    "lm": 530_034_915,
    "speaker": 178_304_168,
    "emotion": 157_641_556,
    "s2mel": 103_668_688,
    "w2v_bert": 580_493_120,
    "codec": 44_289_808,
    "campplus": 6_848_544,
    "bigvgan": 112_231_249,
}


def test_indextts2_real_size_is_the_released_one(tmp_path, monkeypatch) -> None:
    """Release 2 at the released sizes (the benchmark's "real" folder, 6.5 GB, built here on the
    meta device only): config.yaml's keys as the tiny folder's, the released values, each part's
    parameters; the spec's fixture hook hands size "real" through; an unknown size is refused."""
    from koe_indextts import fixtures, fixtures2
    from koe_indextts.bigvgan2 import BigVGAN2, BigVGAN2Config
    from koe_indextts.campplus import CAMPPlus
    from koe_indextts.conditioning import ConditioningConfig, SpeechConditioning
    from koe_indextts.s2mel import S2Mel, S2MelConfig
    from koe_indextts.semantic_codec import SemanticCodec, SemanticCodecConfig
    from koe_indextts.voice_lm import EmotionSpeechLM, GPTConfig
    from koe_indextts.w2vbert import W2VBert, W2VBertConfig

    real, tiny = fixtures2.release_config("real"), fixtures2.release_config("tiny")
    assert _keys(real) == _keys(tiny)
    gpt = real["gpt"]
    assert (gpt["layers"], gpt["model_dim"], gpt["heads"], gpt["max_mel_tokens"], gpt["max_text_tokens"], gpt["number_text_tokens"]) == (
        24,
        1280,
        20,
        1815,
        600,
        12000,
    )
    assert [gpt[m][k] for m in ("condition_module", "emo_condition_module") for k in ("num_blocks", "output_size", "linear_units", "attention_heads")] == [
        6, 512, 2048, 8, 4, 512, 1024, 4,
    ]  # fmt: skip
    assert real["semantic_codec"] == {**tiny["semantic_codec"], "vocos_dim": 384, "vocos_intermediate_dim": 2048, "vocos_num_layers": 12}
    dit, wavenet, regulator = real["s2mel"]["DiT"], real["s2mel"]["wavenet"], real["s2mel"]["length_regulator"]
    assert (dit["depth"], dit["hidden_dim"], dit["num_heads"], wavenet["num_layers"], wavenet["hidden_dim"], regulator["channels"]) == (13, 512, 8, 8, 512, 512)
    assert fixtures2.w2v_config("real") == {} and fixtures2.vocoder_config("real")["upsample_initial_channel"] == 1536
    with torch.device("meta"):
        built = {
            "lm": EmotionSpeechLM(GPTConfig.from_dict(gpt)),
            "speaker": SpeechConditioning(ConditioningConfig.speaker(gpt, input_size=1024)),
            "emotion": SpeechConditioning(ConditioningConfig.emotion(gpt)),
            "s2mel": S2Mel(S2MelConfig.from_dict(real["s2mel"])),
            "w2v_bert": W2VBert(W2VBertConfig(), 24),
            "codec": SemanticCodec(SemanticCodecConfig.from_dict(real["semantic_codec"])),
            "campplus": CAMPPlus(),
            "bigvgan": BigVGAN2(BigVGAN2Config.from_dict(fixtures2.vocoder_config("real"))),
        }
    assert {name: sum(p.numel() for p in module.parameters()) for name, module in built.items()} == REAL_2_PARAMETERS
    asked = []
    monkeypatch.setattr(fixtures2, "write_random_model2", lambda folder, seed, size: asked.append((seed, size)) or folder)
    assert fixtures.write_random_model(tmp_path, "IndexTTS-2", "real", seed=3) == tmp_path and asked == [(3, "real")]
    monkeypatch.undo()
    with pytest.raises(ValueError, match="size 'huge'"):
        fixtures2.release_config("huge")


def test_indextts_compare_without_upstream_venv_is_a_clear_error(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setenv("KOE_ORACLE_INDEXTTS_PYTHON", str(tmp_path / "missing" / "python"))
    assert main(["--family", "indextts", "--quick", "--compare", "upstream", "--models", str(tmp_path)]) == 2
    assert "make oracle-indextts" in capsys.readouterr().err


@pytest.mark.parametrize("beams", [1, 2, 3, 4])
def test_kv_cache_reorder_is_the_gather_it_replaces(beams) -> None:
    """The search's cache reorder (made cheaper after this benchmark's profile: only the rows that
    change are copied, cycles through a row set aside) gives `keys[:, rows]` for every choice of
    rows, and leaves the positions past the cache's length alone."""
    for rows in itertools.product(range(beams), repeat=beams):
        cache = KVCache(2, beams, 2, 3, 10, torch.float32)
        cache.keys.normal_()
        cache.values.normal_()
        cache.length = 7
        keys, values = cache.keys.clone(), cache.values.clone()
        order = torch.tensor(rows)
        cache.reorder(order)
        assert torch.equal(cache.keys[:, :, :, :7], keys[:, order, :, :7]) and torch.equal(cache.values[:, :, :, :7], values[:, order, :, :7]), rows
        assert torch.equal(cache.keys[:, :, :, 7:], keys[:, :, :, 7:]) and torch.equal(cache.values[:, :, :, 7:], values[:, :, :, 7:])
