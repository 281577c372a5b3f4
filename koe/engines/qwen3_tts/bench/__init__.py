"""Qwen3-TTS's benchmark (`koe bench`, the default family): what it declares (`BENCH`).

Cases (`cases.CASES`) each need a model of one kind (custom voice, voice design, base): each kind
is built at the size asked (`models`), and every run decodes exactly `--frames` frames (end of
speech disabled on every side). Compared sides: upstream qwen-tts 0.1.1 (the oracle venv) and the
peer runtime mizuoto 0.2.16 (GPL-3.0, never imported by koe: its own venv, process and worker).
"""

from koe.engines.benchmark import FamilyBench, Flag, Side
from koe.engines.qwen3_tts.bench import cases, models
from koe.engines.qwen3_tts.spec import PRECISIONS

COLUMNS = (
    ("load_s", "load s", 1),
    ("call_s", "call s", 1),
    ("prompt_s", "prompt s", 1),
    ("prefill_s", "prefill s", 1),
    ("ms_per_frame", "ms/frame", 1),
    ("talker_ms_per_frame", "talker", 1),
    ("predictor_ms_per_frame", "predictor", 1),
    ("codec_s_per_audio_s", "codec s/s", 1),
    ("ttfa_s", "TTFA s", 1),
    ("stream_rtf", "RTF", 1),
    ("frames_per_s", "frames/s", 1),
    ("peak_rss", "peak RSS GB", 1e-9),
)

BENCH = FamilyBench(
    cases=tuple(cases.CASES),
    default_cases=tuple(cases.CASES),
    sizes=models.SIZES,
    default_size="0.6b",
    model_variants=models.MODEL_KINDS,
    model_name=models.model_name,
    write_model=models.write_model,
    model_version=models.FIXTURE_VERSION,
    run="koe.engines.qwen3_tts.bench.run:run",
    table="koe.engines.qwen3_tts.bench.run:table",
    worker="koe.engines.qwen3_tts.bench.worker:KoeWorker",
    columns=COLUMNS,
    flags=(Flag("--frames", "frames per run, end of speech disabled (default 24)", default=24, quick=4, least=1),),
    precisions=PRECISIONS,
    compare_precisions=("fp32", "bf16"),
    sides={
        "upstream": Side("qwen-tts 0.1.1", "KOE_ORACLE_PYTHON", ".oracle", "oracle", "scripts/bench_upstream_worker.py"),
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
