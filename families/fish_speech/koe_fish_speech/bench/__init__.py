"""Fish Speech's benchmark (`koe bench --family fish_speech`): what it declares (`BENCH`).

Random weights in the released layout (`models`): "real" (the released sizes and dtype, the slow
transformer at `--layers` of its 36 layers, default 8) or "tiny"; one pair of workers per size
(koe's engine, and with `--compare upstream` upstream's server engine, `TTSInferenceEngine` on
`init_model` and `load_codec_model`, from its source in the oracle's venv and process). Each case is
one request (`cases`: a clone from a 44.1 kHz clip with its transcript, the model's own voice, and
when named a two-speaker dialogue of several batches), the same seed on both sides, at most
`--frames` frames a batch (random weights seldom stop). Seconds and seconds per second of audio,
split into the reference (clips encoded by the codec), the LM's prefill (each batch's prompt), its
steps (ms per frame) and the codec's decode. With `--compare upstream` the codes' and waveforms'
hashes say whether the bits are equal. `--precision`: what the engine offers
(`spec.capabilities().precisions`); upstream runs float32 or bfloat16 (`--upstream-precision`).
A mode's error: `python -m koe.bench.accuracy --family fish_speech --precision int8` (`koe_fish_speech.accuracy`).
"""

from koe.engines.benchmark import Flag, Side, columns, declare
from koe_fish_speech import spec
from koe_fish_speech.bench import cases, models
from koe_fish_speech.oracle import ORACLE

COLUMNS = columns(
    total_s="total s",
    rtf="s/audio s",
    reference_s="ref s",
    prefill_s="prefill s",
    steps="steps",
    ms_per_frame="ms/frame",
    codec_s="codec s",
    other_s="other s",
)

BENCH = declare(
    __name__,
    cases,
    models,
    default_size="real",
    size_help=f"the released sizes, the slow transformer at --layers of its {models.RELEASED_LAYERS} layers",
    variants=(),  # one release
    model_variants=models.VARIANTS,
    columns=COLUMNS,
    also_timed=("lm_s", "steps_s", "frames"),
    flags=(
        Flag(
            "--frames",
            "frames a batch at most, both sides (max_new_tokens; the last is dropped, as upstream does; default 100, about 4.6 s)",
            default=100,
            quick=6,
            least=2,
        ),
        Flag(
            "--layers",
            f"the real model's slow transformer layers (default {models.DEFAULT_LAYERS} of the released {models.RELEASED_LAYERS}: both sides' float32 copies fit in memory)",
            default=models.DEFAULT_LAYERS,
            least=1,
        ),
        Flag(
            "--in-turn",
            "load and run each side alone, one after the other, instead of both held at once and their runs interleaved (a machine without memory for both)",
            type=None,
            default=False,
        ),
    ),
    precisions=tuple(spec.capabilities().precisions),
    compare_precisions=("fp32", "bf16"),
    precision_note="upstream runs float32 or bfloat16 on the CPU (its init_model and load_codec_model's precision)",
    sides={"upstream": Side.upstream(ORACLE, "tests/oracle_fish_speech/bench_worker.py")},
    tools={"accuracy": "koe_fish_speech.accuracy:main"},
    about="Fish Speech S2 Pro",
)
