"""VoxCPM's benchmark (`koe bench --family voxcpm`): what it declares (`BENCH`).

VoxCPM2 / VoxCPM 1.5 (`--variant`) on random weights, one model (size tiny or real) and one pair of
workers (koe, and with `--compare upstream` voxcpm 2.0.3 in its own venv and process) for all cases
(`cases.CASES`). Every request makes exactly `--patches` latent patches on both sides (min_len =
max_len, no retries: a stop-head length would depend on the random weights). Precision: koe's exact
path runs float32 (the weights, bfloat16 on disk as released, are widened at load); upstream then
reads the folder with its config's dtype set to float32. With `--precision bf16` both sides run the
LM and DiT in bfloat16 (upstream: the release's own config), the AudioVAE in float32 on both.
"""

from koe.engines.benchmark import Flag, Side, columns, declare
from koe.engines.voxcpm.bench import cases, models
from koe.engines.voxcpm.oracle import ORACLE

COLUMNS = columns(
    prompt_s="prompt s",
    prefill_s="prefill s",
    total_s="total s",
    rtf="s/audio s",
    first_chunk_s="1st chunk s",
    ms_per_patch="ms/patch",
    base_lm_ms="base LM",
    residual_lm_ms="res LM",
    dit_ms="DiT",
    locenc_ms="LocEnc",
    vae_ms="VAE",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help="the released sizes",
    columns=COLUMNS,
    also_timed=("other_s",),
    flags=(
        Flag("--patches", "latent patches per request, both sides (min_len = max_len; default 16)", default=16, quick=4, least=1),
        Flag("--timesteps", "CFM steps per patch (default 10, upstream's)", default=10, quick=2, least=1),
    ),
    precisions=("fp32", "bf16"),
    precision_note="fp32 (exact) or bf16, which upstream then runs too (its release config); no --upstream-precision",
    sides={"upstream": Side.upstream(ORACLE, "scripts/bench_voxcpm_upstream_worker.py")},
    about="VoxCPM",
    tools={"accuracy": "koe.engines.voxcpm.bench.accuracy:main"},
)
