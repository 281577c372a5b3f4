"""IndexTTS's benchmark (`koe bench --family indextts`): what it declares (`BENCH`).

Release 1.5 on random weights in the released layout, "real" (the released sizes) or "tiny", one
model and one pair of workers (koe's `IndexTTSEngine`, and with `--compare upstream` upstream's
`IndexTTS(...).infer(...)` from its source in the oracle's venv and process) for all cases. Each
case is one clone request, the same seed on both sides, making at most `--codes` mel codes (random
weights seldom end a search: the cap is the length). Seconds and seconds per second of audio,
split into the text front end, the reference (the clip's log-mel, the conditioning latents, the
vocoder's speaker embedding), the GPT's code search (ms per code), the latent pass and the vocoder.
With `--compare upstream` the codes' and waveforms' hashes say whether the bits are equal.
"""

from koe.engines.benchmark import Flag, Side, columns, declare
from koe_indextts.bench import cases, models
from koe_indextts.oracle import ORACLE

COLUMNS = columns(
    total_s="total s",
    rtf="s/audio s",
    text_s="text s",
    reference_s="ref s",
    search_s="GPT s",
    codes="codes",
    ms_per_code="ms/code",
    latent_s="latent s",
    vocoder_s="vocoder s",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help="the released sizes",
    columns=COLUMNS,
    also_timed=("other_s",),
    flags=(Flag("--codes", "mel codes per request at most, both sides (max_mel_tokens; default 150, about 6.4 s)", default=150, quick=8, least=1),),
    sides={"upstream": Side.upstream(ORACLE, "tests/oracle_indextts/bench_worker.py")},
    about="IndexTTS 1.5",
)
