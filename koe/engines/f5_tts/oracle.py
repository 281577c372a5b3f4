"""F5-TTS's oracle: upstream f5-tts in `.oracle-f5`, on the Qwen oracle's torch (see
`koe.engines.oracle`); stubs for its training-only imports are in `tests/oracle_f5/stubs`."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    package="f5-tts==1.1.22",
    venv=".oracle-f5",
    python_env="KOE_ORACLE_F5_PYTHON",
    scripts="tests/oracle_f5",
    recorded=("tests/engines/f5_tts",),
    requirements=("tests/oracle_f5/requirements.txt",),
    nodeps=("tests/oracle_f5/requirements-nodeps.txt",),
)
