"""Qwen3-TTS's oracle: upstream qwen-tts in `.oracle`, the one that installs torch for the others
(see `koe.engines.oracle`). torchaudio is stubbed (`tests/oracle/stubs`): qwen-tts imports it only
for its 25 Hz tokenizer, which the 12 Hz models never use."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    package="qwen-tts==0.1.1",
    venv=".oracle",
    python_env="KOE_ORACLE_PYTHON",
    scripts="tests/oracle",
    requirements=("tests/oracle/requirements.txt",),
    shares_torch=False,
)
