"""CosyVoice's benchmark (`koe bench --family cosyvoice`): what it declares (`BENCH`).

Random weights in the released layout, "real" (the released sizes) or "tiny", one folder per
variant (v2: CosyVoice2-0.5B, v3: Fun-CosyVoice3-0.5B-2512; the cases pick it), and one pair of
workers per variant (koe, and with `--compare upstream` upstream's `AutoModel` from its source in
its own venv and process). Each case is one zero-shot request with the same seed on both sides,
offline (v2, v3) or streamed (v2_stream, v3_stream: the time to the first audio too). Seconds and
seconds per second of audio, split into the front end (text, CAM++, S3 tokenizer, prompt mel), the
LM (its prompt's prefill, its tokens, ms per token after), the flow and the vocoder. With `--compare upstream` both flows get
upstream's CAM++ vector (koe's own is still computed and timed), so the waveforms' hashes say
whether the bits are equal (not for v2_stream: upstream's two threads race on one generator).
`--precision` runs koe's LM in an opt-in precision (bf16, int8, int4; `accuracy` measures its error).
"""

from koe.engines.benchmark import Side, columns, declare
from koe.engines.cosyvoice.bench import cases, models
from koe.engines.cosyvoice.oracle import ORACLE
from koe.runtime.precision import PRECISIONS

COLUMNS = columns(
    total_s="total s",
    rtf="s/audio s",
    ttfa_s="TTFA s",
    front_s="front s",
    campplus_s="CAM++ s",
    tokenizer_s="S3 tok s",
    mel_s="mel s",
    lm_s="LM s",
    prefill_s="prefill s",
    tokens="tokens",
    ms_per_token="ms/token",
    flow_s="flow s",
    vocoder_s="vocoder s",
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
    also_timed=("text_s",),
    precisions=PRECISIONS,
    compare_precisions=("fp32",),
    precision_note="koe: fp32 (exact) or the LM in bf16, int8 or int4; upstream runs float32 on the CPU (its fp16 is CUDA autocast)",
    tools={"accuracy": "koe.engines.cosyvoice.bench.accuracy:main"},
    sides={"upstream": Side.upstream(ORACLE, "scripts/bench_cosyvoice_upstream_worker.py")},
    about="CosyVoice 2 and 3",
)
