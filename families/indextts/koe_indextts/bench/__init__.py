"""IndexTTS's benchmark (`koe bench --family indextts`): what it declares (`BENCH`).

Random weights in the released layouts, "real" (the released sizes) or "tiny", one folder per
release (1.5: cases en and zh; 2: en2 and zh2; 2.5: en25 and zh25, run when asked for; the cases
pick it) and one pair of workers per release (koe's engine, and with `--compare upstream` upstream's
`IndexTTS(...).infer(...)`, `IndexTTS2(...).infer(...)` or 2.5's `infer_v2_5.IndexTTS2(...).infer(...)`
from its source in the oracle's venv and process). Each case is one
clone request, the same seed on both sides, making at most `--codes` mel codes a segment (random
weights seldom end a search: the cap is the length). Seconds and seconds per second of audio, split
into the text front end, the reference (1.5: the clip's log-mel, the conditioning latents, the
vocoder's speaker embedding; 2: the clips' w2v-BERT features, semantic codes, mel, CAM++ style,
prompt condition, conditioning latents and emotion vector, with w2v-BERT, the codec, the mel and
CAM++ also shown apart; 2.5: w2v-BERT, the mel and CAM++ apart), the GPT's code search (ms per code),
the latent pass (1.5, 2), s2mel (2: the length regulator and flow matching; 2.5: the codec's decode
too) and the vocoder. With `--compare upstream` the codes' and waveforms'
hashes say whether the bits are equal.
"""

from koe.engines.benchmark import Flag, Side, columns, declare
from koe_indextts.bench import cases, models
from koe_indextts.oracle import ORACLE

COLUMNS = columns(
    total_s="total s",
    rtf="s/audio s",
    text_s="text s",
    reference_s="ref s",
    w2v_s="w2v s",
    codec_s="codec s",
    mel_s="mel s",
    campplus_s="CAM++ s",
    search_s="GPT s",
    codes="codes",
    ms_per_code="ms/code",
    latent_s="latent s",
    s2mel_s="s2mel s",
    vocoder_s="vocoder s",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help="the released sizes",
    variants=(),  # the cases pick the release (`cases.VARIANTS`), not --variant
    model_variants=models.VARIANTS,
    columns=COLUMNS,
    also_timed=("other_s",),
    flags=(
        Flag(
            "--codes",
            "mel codes per request at most, both sides (max_mel_tokens; default 150, about 6.4 s with 1.5 and 3 s with 2)",
            default=150,
            quick=8,
            least=1,
        ),
    ),
    sides={"upstream": Side.upstream(ORACLE, "tests/oracle_indextts/bench_worker.py")},
    about="IndexTTS 1.5, 2 and 2.5",
)
