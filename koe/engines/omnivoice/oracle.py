"""OmniVoice's oracle: upstream omnivoice in `.oracle-omnivoice`, on the Qwen oracle's torch (see
`koe.engines.oracle`). Its transformers (>= 5.3, for the HiggsAudio-v2 tokenizer), tokenizers and
huggingface_hub are its own, installed in front of the shared 4.x ones; torchaudio keeps only its
pure-Python parts (upstream calls `functional.resample`)."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    package="omnivoice==0.2.1",
    venv=".oracle-omnivoice",
    python_env="KOE_ORACLE_OMNIVOICE_PYTHON",
    scripts="tests/oracle_omnivoice",
    recorded=tuple(
        f"tests/engines/omnivoice/test_omnivoice_{name}.py"
        for name in ("parity", "clone_parity", "design_parity", "long_parity", "train_step", "finetune_parity")
    ),
    # test_omnivoice_bf16.py runs upstream live: bfloat16 products take other paths on other CPUs
    requirements=("tests/oracle_omnivoice/requirements.txt",),
    nodeps=("tests/oracle_omnivoice/requirements-nodeps.txt",),
)
