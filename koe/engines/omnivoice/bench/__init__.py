"""OmniVoice's benchmark (`koe bench --family omnivoice`): what it declares (`BENCH`).

One model (size tiny or real, random weights) and one pair of workers (koe, and with `--compare
upstream` omnivoice 0.2.1 in its own venv and process) for all cases (`cases.CASES`): the model's own
voice at 32 and 16 unmasking steps, and a clone at 32, each one request with the same seed on both
sides (the waveforms' hashes say whether the bits are equal). Seconds per second of audio, split
into the text front end, the backbone's steps and the tokenizer's decode. `--precision bf16` runs
koe's LM in bfloat16, `--upstream-precision bf16` upstream's (`from_pretrained(dtype=bfloat16)`).
"""

from koe.engines.benchmark import Side, columns, declare
from koe.engines.omnivoice.bench import cases, models
from koe.engines.omnivoice.oracle import ORACLE

COLUMNS = columns(
    total_s="total s",
    rtf="s/audio s",
    prompt_s="prompt s",
    text_s="text s",
    backbone_s="backbone s",
    ms_per_step="ms/step",
    decode_s="decode s",
    other_s="other s",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help="the released sizes",
    columns=COLUMNS,
    precisions=("fp32", "bf16"),
    compare_precisions=("fp32", "bf16"),
    precision_note="koe: fp32 (exact) or bf16 (the LM in bfloat16); upstream: --upstream-precision fp32 (default) or bf16 (its own bfloat16 run)",
    tools={"accuracy": "koe.engines.omnivoice.bench.accuracy:main"},
    sides={"upstream": Side.upstream(ORACLE, "scripts/bench_omnivoice_upstream_worker.py")},
    about="OmniVoice",
)
