"""VoxCPM's oracle: upstream voxcpm in `.oracle-voxcpm`, on the Qwen oracle's torch (see
`koe.engines.oracle`); torchcodec (what torchaudio.load calls) is a soundfile-backed stub in
`tests/oracle_voxcpm/stubs`. Its fine-tuning oracle runs upstream's training script, which only
the source distribution has (`sdist=True`)."""

from koe.engines.oracle import UpstreamOracle

ORACLE = UpstreamOracle(
    package="voxcpm==2.0.3",
    venv=".oracle-voxcpm",
    python_env="KOE_ORACLE_VOXCPM_PYTHON",
    scripts="tests/oracle_voxcpm",
    recorded=tuple(f"tests/engines/voxcpm/test_voxcpm_{name}.py" for name in ("parity", "audio", "text", "vae", "finetune_parity")),
    # test_voxcpm_loading.py runs upstream live: its bfloat16 case's products take other paths on other CPUs
    requirements=("tests/oracle_voxcpm/requirements.txt",),
    nodeps=("tests/oracle_voxcpm/requirements-nodeps.txt",),
    sdist=True,  # scripts/train_voxcpm_finetune.py, upstream's fine-tuning loop, is in the sdist only
)
