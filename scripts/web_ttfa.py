"""Time to first audio and real-time factor as the web page shows them, beside the API's own stream
read by a Python client, interleaved, on one `koe serve`.

    python scripts/web_ttfa.py [MODEL_FOLDER] [--runs N] [--precision int8|int4|bf16]

MODEL_FOLDER: a CustomVoice folder (default: koe bench's real-size 0.6B random-weight model in
~/.cache/koe/bench, made by `koe bench --size 0.6b`). Needs the dev extra (Playwright) and Chromium.
"""

import argparse
import json
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))
from browser import CHROMIUM_FLAGS, find_chromium  # noqa: E402 (tests/ on sys.path first)
from playwright.sync_api import sync_playwright  # noqa: E402
from served_model import BENCH_06, serve  # noqa: E402

parser = argparse.ArgumentParser()
parser.add_argument("folder", nargs="?", default=BENCH_06)
parser.add_argument("--runs", type=int, default=3)
parser.add_argument("--precision", help="koe serve --precision (an opt-in mode); default: exact")
args = parser.parse_args()
url, proc, home = serve(args.folder, args.precision, {"OMP_NUM_THREADS": "2"})
TEXT = "Hello there. This is a test of the web page, streaming speech as it is made."
body = {
    "model": "cv06",
    "voice": "ryan",
    "input": TEXT,
    "response_format": "wav",
    "seed": 1,
    "max_new_tokens": 40,
    "stream_format": "audio",
}


client = httpx.Client(timeout=300)  # made once, as a client does (making one costs ~20 ms: its TLS context)


def api_run():
    t0 = time.perf_counter()
    first = None
    n = at_first = 0
    with client.stream("POST", url + "/v1/audio/speech", json=body) as r:
        times = []
        for chunk in r.iter_raw():
            now = time.perf_counter()
            if first is None and n + len(chunk) > 100:
                first = now - t0
                at_first = n + len(chunk)
            n += len(chunk)
            times.append(now)
    audio = (n - 80) / 2 / 24000
    rtf = (times[-1] - t0 - first) / ((n - at_first) / 2 / 24000)  # wall time after the first audio over the audio after it
    return first, (times[-1] - t0), audio, rtf


results = {"api": [], "page": []}
with sync_playwright() as p:
    b = p.chromium.launch(executable_path=find_chromium(), args=list(CHROMIUM_FLAGS))
    pg = b.new_page()
    pg.goto(url + "/")
    pg.wait_for_selector("body[data-ready=true]", timeout=120000)
    api_run()  # warm-up
    for _ in range(args.runs):
        first, wall, audio, rtf = api_run()
        results["api"].append(f"first audio bytes after {first:.2f} s · {audio:.2f} s of audio in {wall:.1f} s · RTF after the first {rtf:.2f}")
        pg.fill("#speak-input", TEXT)
        pg.select_option("#speak-voice", "ryan")
        pg.locator("#speak-options-box").evaluate("(d) => { d.open = true; }")
        pg.fill("#speak-opt-max_new_tokens", "40")
        pg.fill("#speak-seed", "1")
        pg.click("#speak-go")
        pg.wait_for_function("() => document.querySelector('#speak-cancel').disabled", timeout=300000)
        results["page"].append(pg.text_content("#speak-metrics"))
    b.close()
proc.terminate()
proc.wait(30)
print(json.dumps(results, indent=1))
