"""Qwen3-TTS's oracle: upstream qwen-tts in `.oracle`, the one that installs torch for the others
(see `koe.engines.oracle`). torchaudio is stubbed (`tests/oracle/stubs`): qwen-tts imports it only
for its 25 Hz tokenizer, which the 12 Hz models never use."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    package="qwen-tts==0.1.1",
    venv=".oracle",
    python_env="KOE_ORACLE_PYTHON",
    scripts="tests/oracle",
    # live, not recorded: the fine-tuning tests (their runs write checkpoints koe's side reads) and the
    # codec's (at the released size its products take other paths on other CPUs)
    recorded=(
        *(f"tests/engines/qwen3_tts/test_qwen3_tts_{name}.py" for name in ("parity", "clone_parity", "bf16_files_parity", "speaker_encoder")),
        "tests/test_audio.py",
        "tests/test_text_tokenizer.py",
    ),
    requirements=("tests/oracle/requirements.txt",),
    shares_torch=False,
)
