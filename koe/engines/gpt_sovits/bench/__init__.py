"""GPT-SoVITS's benchmark (`koe bench --family gpt_sovits`): what it declares (`BENCH`).

Random weights in the released layout and dtype, "real" (the released sizes) or "tiny", one folder
per variant (GPT-SoVITS-v2, GPT-SoVITS-v4; the cases pick it), and one pair of workers per variant (koe, and
with `--compare upstream` upstream's `TTS(TTS_Config(...)).run` from its source at 48b1a01 in its
own venv and process). Each case is one zero-shot request with the same seed on both sides, on a
reference neither side has seen. Seconds and seconds per second of audio, split into the reference
(HuBERT's codes, the spectrogram, the transcript's features), the AR decode (ms per semantic
token) and SoVITS (v4: the CFM and its vocoder); the waveforms' hashes say whether the bits are equal.
`--precision` runs koe's GPT blocks in an opt-in precision (int8, int4; `accuracy` measures its error).
"""

from koe.engines.benchmark import Side, columns, declare
from koe.engines.gpt_sovits.bench import cases, models
from koe.engines.gpt_sovits.oracle import ORACLE

COLUMNS = columns(
    total_s="total s",
    rtf="s/audio s",
    reference_s="ref s",
    ar_s="AR s",
    tokens="tokens",
    ms_per_token="ms/token",
    sovits_s="SoVITS s",
    other_s="other s",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help="the released sizes",
    variants=(),  # the cases pick the variant (`cases.CASES`), not --variant
    model_variants=models.VARIANTS,
    columns=COLUMNS,
    precisions=("fp32", "int8", "int4"),
    compare_precisions=("fp32",),
    precision_note="koe's float32 is upstream's bits; int8 / int4 quantize koe's GPT blocks (opt-in: `accuracy` measures the error); upstream's CPU path is float32 (is_half off)",
    tools={"accuracy": "koe.engines.gpt_sovits.bench.accuracy:main"},
    sides={"upstream": Side.upstream(ORACLE, "scripts/bench_gpt_sovits_upstream_worker.py")},
    about="GPT-SoVITS v2 and v4",
)
