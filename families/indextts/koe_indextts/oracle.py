"""IndexTTS's oracle: upstream's source at ee40fa7 (index-tts/index-tts; releases 1.5, 2 and 2.5
are its ancestors), not a PyPI package (there is none; the look-alikes are other runtimes' ports),
in `.oracle-indextts` on the Qwen oracle's torch (see `koe.engines.oracle`). Its own numpy,
transformers 4.52.1 and accelerate (upstream's pins) sit in front of the shared ones; torchaudio
2.8 keeps only its pure-Python parts (its `load` reads through soundfile); WeTextProcessing runs
upstream's text normaliser. Goldens only: upstream's install is large (pynini alone is 700 MB), so
the tests compare with the golden files its scripts write (`make goldens-indextts`), never run it.
Declared through the `koe.oracles` entry point of this package until its spec names it."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    source="index-tts@ee40fa7",
    venv=".oracle-indextts",
    python_env="KOE_ORACLE_INDEXTTS_PYTHON",
    scripts="tests/oracle_indextts",
    requirements=("tests/oracle_indextts/requirements.txt",),
    nodeps=("tests/oracle_indextts/requirements-nodeps.txt",),
    goldens_only=True,
)
