"""The toy family (tests/plugins/koe_sine) installed for real, for the tests that drive koe with it.

`sine_site` (session): the package installed with pip into a folder of its own (`pip install
--no-deps --no-build-isolation --target SITE`, from a copy, so no build files land in the tree).
Everything that uses it runs in a subprocess with SITE on PYTHONPATH (`sine_env`): this process's
registry never sees the family, so the rest of the suite runs as if it were not installed.
`sine_model` (session): a random-weight sine model folder, written by the package's own fixture
writer through `koe.engines.registry.write_fixture`. `start_sine_serve(...)`: a real `koe serve`
(tests/browser.py's `start_koe_serve`) over a KOE_HOME holding that model as `sine`, the default,
and the library voice `hum`, cloned from a 180 Hz clip.

PYTEST_DONT_REWRITE: the test modules import helpers from here before pytest loads it as their plugin
(as tests/browser.py); its asserts carry their own messages.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import soundfile as sf

PLUGIN = Path(__file__).resolve().parent / "plugins" / "koe_sine"
HUM_HZ = 180.0  # the pitch of the clip the voice `hum` is cloned from


def sine_env(site: Path, home: Path, **extra: str) -> dict[str, str]:
    """This process's environment (every KOE_* variable unset) with the package on PYTHONPATH and KOE_HOME `home`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KOE_", "PYTEST_XDIST_"))}  # a nested pytest is no xdist worker
    env.update(
        PYTHONPATH=os.pathsep.join([str(site), *filter(None, [env.get("PYTHONPATH")])]),
        KOE_HOME=str(home),
        OMP_NUM_THREADS="1",
        PYTHONWARNINGS="ignore",
        COLUMNS="200",
        **extra,
    )
    return env


def run(site: Path, home: Path, *args, timeout: float = 180, check: bool = True) -> subprocess.CompletedProcess:
    """`python ARGS...` in a subprocess with the package installed (`sine_env`), in the repository's root; text output."""
    r = subprocess.run(
        [sys.executable, *map(str, args)], env=sine_env(site, home), check=False, capture_output=True, text=True, timeout=timeout, cwd=PLUGIN.parents[2]
    )
    if check:
        assert r.returncode == 0, f"{args}: exit {r.returncode}\n{r.stdout}\n{r.stderr}"
    return r


def koe(site: Path, home: Path, *args, **kw) -> subprocess.CompletedProcess:
    """The `koe` command (`python -m koe.cli.main ARGS...`) with the package installed."""
    return run(site, home, "-m", "koe.cli.main", *args, **kw)


def write_hum(path: Path, seconds: float = 3.0, rate: int = 24000) -> Path:
    """A clip of a steady `HUM_HZ` tone: what a sine voice is cloned from."""
    t = np.arange(int(seconds * rate)) / rate
    sf.write(path, (0.4 * np.sin(2 * np.pi * HUM_HZ * t)).astype(np.float32), rate)
    return path


def peak_hz(samples: np.ndarray, rate: int) -> float:
    """The strongest frequency of `samples` (zero-padded to 1 Hz bins)."""
    spectrum = np.abs(np.fft.rfft(samples, n=rate))
    return float(np.argmax(spectrum[20:]) + 20)


@pytest.fixture(scope="session")
def sine_site(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("koe-sine")
    source, site = root / "src", root / "site"
    shutil.copytree(PLUGIN, source, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    r = subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-input", "--target", str(site), str(source)],
        check=False,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.returncode == 0, r.stdout + r.stderr
    return site


@pytest.fixture(scope="session")
def sine_model(sine_site, tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("sine-model") / "sine"
    run(sine_site, folder.parent / "home", "-c", f"from koe.engines import registry; registry.write_fixture({str(folder)!r}, 'sine')")
    return folder


def start_sine_serve(site: Path, model: Path, root: Path, **settings):
    """`koe serve` (the real command) over a fresh KOE_HOME under `root` with the model `sine` (the default) and the voice `hum`."""
    from browser import start_koe_serve

    home = root / "home"
    home.mkdir(parents=True)
    koe(site, home, "models", "import", model, "--name", "sine", "--link")
    koe(site, home, "voices", "add", "hum", "--ref", write_hum(root / "hum.wav"))
    return start_koe_serve(home, root, models=(), default="sine", env={"PYTHONPATH": sine_env(site, home)["PYTHONPATH"]}, **settings)
