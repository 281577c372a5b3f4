"""Many requests at once through `koe serve`'s micro-batching: aggregate frames per second and each
request's real-time factor, for 1, 4 and 8 concurrent clients, against one request alone.

    python scripts/server_batching.py [MODEL_FOLDER] [--precision int8|int4|bf16] [--clients 1 4 8] [--rounds 2]

MODEL_FOLDER: a CustomVoice folder (default: koe bench's real-size 0.6B random-weight model in
~/.cache/koe/bench, made by `koe bench --size 0.6b`). The requests are one-shot WAVs with the same
voice and different texts and no seed, so the server may batch them; each says how much audio it
made (`x-koe-duration`), which at 12.5 frames per second gives the frames. A request's RTF is its
wall time over its audio (< 1: faster than real time). Prints JSON.
"""

import argparse
import json
import statistics
import threading
import time

import httpx
from served_model import BENCH_06, serve

FRAME_RATE = 12.5
TEXTS = [
    "The morning train was late again, so we walked along the river instead.",
    "Please remember to water the plants on the balcony before you leave.",
    "A quiet library is the best place to think about difficult problems.",
    "The recipe needs two eggs, a cup of flour and a pinch of salt.",
    "Our meeting has moved to Thursday afternoon at three o'clock.",
    "The children built a small boat out of wood and painted it blue.",
    "Snow fell all night and covered the whole valley in white.",
    "He tuned the old piano carefully before the evening concert began.",
]

parser = argparse.ArgumentParser()
parser.add_argument("folder", nargs="?", default=BENCH_06)
parser.add_argument("--precision", help="koe serve --precision (an opt-in mode); default: exact")
parser.add_argument("--clients", type=int, nargs="+", default=[1, 4, 8])
parser.add_argument("--rounds", type=int, default=2)
parser.add_argument("--frames", type=int, default=40, help="max_new_tokens of each request")
args = parser.parse_args()

url, proc, home = serve(args.folder, args.precision)


def one(text: str, out: list) -> None:
    body = {"model": "cv06", "voice": "ryan", "input": text, "response_format": "wav", "max_new_tokens": args.frames}
    t0 = time.perf_counter()
    r = httpx.post(url + "/v1/audio/speech", json=body, timeout=600)
    wall = time.perf_counter() - t0
    r.raise_for_status()
    out.append({"wall_s": wall, "audio_s": float(r.headers["x-koe-duration"])})


def burst(n: int) -> dict:
    out: list = []
    threads = [threading.Thread(target=one, args=(TEXTS[i % len(TEXTS)], out)) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    frames = sum(o["audio_s"] for o in out) * FRAME_RATE
    return {"clients": n, "wall_s": wall, "frames_per_s": frames / wall, "rtf": [o["wall_s"] / o["audio_s"] for o in out]}


try:
    burst(1)  # warm-up
    runs = {n: [] for n in args.clients}
    for _ in range(args.rounds):
        for n in args.clients:
            runs[n].append(burst(n))
    largest = httpx.get(url + "/health", timeout=5).json()["queues"]["cv06"]["largest_batch"]
finally:
    proc.terminate()
    proc.wait(30)
single = statistics.median(r["frames_per_s"] for r in runs[args.clients[0]])
summary = {
    n: {
        "frames_per_s": round(statistics.median(r["frames_per_s"] for r in rs), 2),
        "vs_first": round(statistics.median(r["frames_per_s"] for r in rs) / single, 2),
        "rtf_worst": round(max(max(r["rtf"]) for r in rs), 2),
        "rtf_median": round(statistics.median(x for r in rs for x in r["rtf"]), 2),
    }
    for n, rs in runs.items()
}
print(json.dumps({"precision": args.precision or "fp32", "frames": args.frames, "largest_batch": largest, "summary": summary, "runs": runs}, indent=1))
