"""Qwen3-TTS's benchmark (`koe bench`, the default family): what it declares (`BENCH`).

Cases (`cases.CASES`) each need a model of one kind (custom voice, voice design, base): each kind
is built at the size asked (`models`), and every run decodes exactly `--frames` frames (end of
speech disabled on every side). Compared sides: upstream qwen-tts 0.1.1 (the oracle venv) and the
peer runtime mizuoto 0.2.16 (GPL-3.0, never imported by koe: its own venv, process and worker).
"""

from koe.engines.benchmark import Flag, Side, columns, declare
from koe.engines.qwen3_tts.bench import cases, models
from koe.engines.qwen3_tts.oracle import ORACLE
from koe.engines.qwen3_tts.spec import PRECISIONS

COLUMNS = columns(
    call_s="call s",
    prompt_s="prompt s",
    prefill_s="prefill s",
    ms_per_frame="ms/frame",
    talker_ms_per_frame="talker",
    predictor_ms_per_frame="predictor",
    codec_s_per_audio_s="codec s/s",
    ttfa_s="TTFA s",
    stream_rtf="RTF",
    frames_per_s="frames/s",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="0.6b",
    model_variants=models.MODEL_KINDS,
    columns=COLUMNS,
    also_timed=("ttfa_before_prefill_s", "ttfa_prefill_s", "ttfa_frames_s", "ttfa_codec_s"),  # koe's streaming case: where its TTFA goes
    flags=(Flag("--frames", "frames per run, end of speech disabled (default 24)", default=24, quick=4, least=1),),
    precisions=PRECISIONS,
    compare_precisions=("fp32", "bf16"),
    sides={
        "upstream": Side.upstream(ORACLE, "scripts/bench_upstream_worker.py"),
        "mizuoto": Side(
            "mizuoto 0.2.16",
            "KOE_PEER_MIZUOTO_PYTHON",
            ".peer-mizuoto",
            "peer-mizuoto",
            "scripts/bench_mizuoto_worker.py",
            short="peer",
            about="the peer runtime mizuoto 0.2.16",
        ),
    },
    faster=("frames/s",),
    about="Qwen3-TTS",
    tools={"accuracy": "koe.engines.qwen3_tts.bench.accuracy:main", "codec": "koe.engines.qwen3_tts.bench.codec:main"},
)
