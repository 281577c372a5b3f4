"""Fish Speech's oracle: upstream's source at 3dd1f85 (fishaudio/fish-speech, S2 Pro's code; the
`fish-speech` 0.1.0 on PyPI is the older S1 code), in `.oracle-fish_speech` on the Qwen oracle's
torch (see `koe.engines.oracle`). Its own transformers (upstream's bound, 4.57.3), hydra and
omegaconf (the codec is built from upstream's packaged YAML), descript's codec packages (the layers
upstream's codec subclasses), torchaudio 2.8 with only its pure-Python parts (load through soundfile,
resample, MelScale). Goldens only: a model of S2's layout takes minutes to build and run upstream, so
the tests compare with the golden files its scripts write (`make goldens-fish_speech`), never run
it. Declared through the `koe.oracles` entry point of this package."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    source="fish-speech@3dd1f85",
    venv=".oracle-fish_speech",
    python_env="KOE_ORACLE_FISH_SPEECH_PYTHON",
    scripts="tests/oracle_fish_speech",
    requirements=("tests/oracle_fish_speech/requirements.txt",),
    nodeps=("tests/oracle_fish_speech/requirements-nodeps.txt",),
    goldens_only=True,
)
