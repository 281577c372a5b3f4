"""CosyVoice's oracle: upstream's source at ace7c47 (FunAudioLLM/CosyVoice, with Matcha-TTS in
`third_party/`), not a PyPI package (the `cosyvoice*` packages there are stubs or modified forks),
in `.oracle-cosyvoice` on the Qwen oracle's torch (see `koe.engines.oracle`). Its own numpy 1.26,
transformers 4.51.3 and onnxruntime 1.18 sit in front of the shared ones; openai-whisper is an sdist
that needs an older setuptools, so the no-deps packages are built in the venv; torchaudio keeps only
its pure-Python parts, and `torchaudio.load` goes through a soundfile-backed torchcodec stand-in in
`tests/oracle_cosyvoice/stubs`."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    source="CosyVoice@ace7c47",
    source_paths=(".", "third_party/Matcha-TTS"),
    venv=".oracle-cosyvoice",
    python_env="KOE_ORACLE_COSYVOICE_PYTHON",
    scripts="tests/oracle_cosyvoice",
    recorded=("tests/engines/cosyvoice",),
    requirements=("tests/oracle_cosyvoice/requirements.txt",),
    nodeps=("tests/oracle_cosyvoice/requirements-nodeps.txt",),
    build_isolation=False,
)
