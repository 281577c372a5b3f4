"""`koe serve` on one model folder in a fresh KOE_HOME, for the scripts that measure the server
(web_ttfa.py, server_batching.py): `serve(folder, precision)` -> (url, process, home)."""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))
from browser import free_port

BENCH_06 = str(Path.home() / ".cache/koe/bench/qwen3-tts-0.6b-custom_voice-seed0")  # koe bench --size 0.6b makes it


def serve(folder: str, precision: str | None, env_extra: dict[str, str] | None = None) -> tuple[str, subprocess.Popen, Path]:
    """The folder imported as "cv06" (the default model) into a temporary KOE_HOME, `koe serve` on a
    free port with `--precision` when given, waited for until /health answers."""
    home = Path(tempfile.mkdtemp(prefix="koe-served-"))
    env = {k: v for k, v in os.environ.items() if not k.startswith("KOE_")}
    env.update(KOE_HOME=str(home), HF_HUB_OFFLINE="1", **(env_extra or {}))
    koe = str(Path(sys.executable).parent / "koe")
    subprocess.run([koe, "models", "import", folder, "--name", "cv06", "--link"], env=env, check=True, capture_output=True)
    (home / "koe.toml").write_text('[models]\ndefault = "cv06"\n')
    port = free_port()
    flags = ["--precision", precision] if precision else []
    log = open(home / "serve.log", "wb")  # noqa: SIM115 - the server writes it for its whole life
    proc = subprocess.Popen([koe, "serve", "--port", str(port), *flags], env=env, stdout=log, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            if httpx.get(url + "/health", timeout=1).status_code == 200:
                break
        except httpx.TransportError:
            pass
        time.sleep(0.2)
    return url, proc, home
