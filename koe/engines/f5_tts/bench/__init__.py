"""F5-TTS's benchmark (`koe bench --family f5_tts`): what it declares (`BENCH`).

One model (`--variant`, size tiny or real), one pair of workers for all cases (`cases.CASES`); a
warm-up is the case's request at `--warmup-nfe` steps (the same shapes and code, a fraction of the
time); with `--compare upstream` (f5-tts 1.1.22) a last request per side at one thread checks that
both sides' waveforms are equal bit for bit (`--no-exact-check` skips it). koe runs the precision
asked (`koe.runtime.precision`); upstream float32, its precision on the CPU.
"""

from koe.engines.benchmark import Flag, Side, columns, declare
from koe.engines.f5_tts.bench import cases, models
from koe.engines.f5_tts.oracle import ORACLE
from koe.engines.f5_tts.spec import PRECISIONS

COLUMNS = columns(
    prompt_s="prompt s", total_s="total s", rtf="s/audio s", text_s="text s", dit_s="DiT s", ms_per_step="ms/step", vocoder_s="vocoder s", dit_gflops="GFLOP/s"
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help="DiT dim 1024 x 22",
    columns=COLUMNS,
    also_timed=("other_s",),
    flags=(
        Flag("--warmup-nfe", "NFE steps of a warm-up request and of the 1-thread bit check (default 2)", default=2, least=1),
        Flag("--nfe", "run every case at this NFE instead of its own (e.g. a quick profile)", least=1),
        Flag("--no-exact-check", "skip the 1-thread request per side whose waveforms are compared", type=None, default=True, dest="exact_check", switch=False),
    ),
    precisions=PRECISIONS,
    precision_note="koe: the DiT in bfloat16 with bf16; upstream runs float32, its precision on the CPU",
    sides={"upstream": Side.upstream(ORACLE, "scripts/bench_f5_upstream_worker.py")},
    faster=("GFLOP/s",),
    about="F5-TTS",
    tools={"accuracy": "koe.engines.f5_tts.bench.accuracy:main"},
)
