"""VoxCPM's benchmark (`koe bench --family voxcpm`): what it declares (`BENCH`).

VoxCPM2 / VoxCPM 1.5 (`--variant`) on random weights, one model (size tiny or real) and one pair of
workers (koe, and with `--compare upstream` voxcpm 2.0.3 in its own venv and process) for all cases
(`cases.CASES`). Every request makes exactly `--patches` latent patches on both sides (min_len =
max_len, no retries: a stop-head length would depend on the random weights). Precision: koe's exact
path runs float32 (the weights, bfloat16 on disk as released, are widened at load); upstream then
reads the folder with its config's dtype set to float32. With `--precision bf16` both sides run the
LM and DiT in bfloat16 (upstream: the release's own config), the AudioVAE in float32 on both.
"""

from koe.engines.benchmark import FamilyBench, Flag, Side
from koe.engines.voxcpm.bench import cases, models

COLUMNS = (
    ("load_s", "load s", 1),
    ("prompt_s", "prompt s", 1),
    ("prefill_s", "prefill s", 1),
    ("total_s", "total s", 1),
    ("rtf", "s/audio s", 1),
    ("first_chunk_s", "1st chunk s", 1),
    ("ms_per_patch", "ms/patch", 1),
    ("base_lm_ms", "base LM", 1),
    ("residual_lm_ms", "res LM", 1),
    ("dit_ms", "DiT", 1),
    ("locenc_ms", "LocEnc", 1),
    ("vae_ms", "VAE", 1),
    ("peak_rss", "peak RSS GB", 1e-9),
)

BENCH = FamilyBench(
    cases=tuple(cases.CASES),
    default_cases=cases.DEFAULT_CASES,
    sizes=models.SIZES,
    default_size="real",
    size_help="the released sizes",
    variants=models.VARIANTS,
    model_name=models.model_name,
    write_model=models.write_model,
    model_version=models.FIXTURE_VERSION,
    run="koe.engines.voxcpm.bench.run:run",
    table="koe.engines.voxcpm.bench.run:table",
    worker="koe.engines.voxcpm.bench.worker:VoxKoeWorker",
    columns=COLUMNS,
    flags=(
        Flag("--patches", "latent patches per request, both sides (min_len = max_len; default 16)", default=16, quick=4, least=1),
        Flag("--timesteps", "CFM steps per patch (default 10, upstream's)", default=10, quick=2, least=1),
    ),
    precisions=("fp32", "bf16"),
    precision_note="fp32 (exact) or bf16, which upstream then runs too (its release config); no --upstream-precision",
    sides={"upstream": Side("voxcpm 2.0.3", "KOE_ORACLE_VOXCPM_PYTHON", ".oracle-voxcpm", "oracle-voxcpm", "scripts/bench_voxcpm_upstream_worker.py")},
    about="VoxCPM",
    tools={"accuracy": "koe.engines.voxcpm.bench.accuracy:main"},
)
