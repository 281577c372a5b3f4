"""Many requests at once through `koe serve`'s micro-batching: aggregate frames per second and each
request's real-time factor, for 1, 4 and 8 concurrent clients, against one request alone.

    python scripts/server_batching.py [MODEL_FOLDER] [--precision int8|int4|bf16] [--clients 1 4 8] [--rounds 2] [--stream] [--stagger S]

MODEL_FOLDER: a CustomVoice folder (default: koe bench's real-size 0.6B random-weight model in
~/.cache/koe/bench, made by `koe bench --size 0.6b`). The requests are one-shot WAVs with the same
voice and different texts and no seed, so the server may batch them; each says how much audio it
made (`x-koe-duration`), which at 12.5 frames per second gives the frames. A request's RTF is its
wall time over its audio (< 1: faster than real time). With `--stream` the requests are streamed
16-bit PCM (`stream_format: audio`): each stream's time to its first audio bytes (`ttfa_s`) and
its RTF after them (wall time from the first audio to the last over the audio after the first
chunk), as a listener feels it. `--stagger S` starts client i S * i seconds after the first
(listeners who arrive one after another rather than at once). Prints JSON.
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
parser.add_argument("--stream", action="store_true", help="streamed requests (PCM as it is made) instead of one-shot WAVs")
parser.add_argument("--stagger", type=float, default=0.0, help="seconds between the clients' starts")
args = parser.parse_args()

url, proc, home = serve(args.folder, args.precision)
client = httpx.Client(timeout=600, limits=httpx.Limits(max_connections=64))  # one, shared by the clients' threads (making one costs ~20 ms)


def one(text: str, out: list) -> None:
    body = {"model": "cv06", "voice": "ryan", "input": text, "response_format": "wav", "max_new_tokens": args.frames}
    t0 = time.perf_counter()
    r = client.post(url + "/v1/audio/speech", json=body)
    wall = time.perf_counter() - t0
    r.raise_for_status()
    out.append({"wall_s": wall, "audio_s": float(r.headers["x-koe-duration"])})


def streamed(text: str, out: list) -> None:
    body = {"model": "cv06", "voice": "ryan", "input": text, "response_format": "pcm", "stream_format": "audio", "max_new_tokens": args.frames}
    t0 = time.perf_counter()
    first = last = None
    n = at_first = 0
    with client.stream("POST", url + "/v1/audio/speech", json=body) as r:
        r.raise_for_status()
        for chunk in r.iter_bytes():
            last = time.perf_counter()
            if first is None and chunk:
                first, at_first = last - t0, len(chunk)
            n += len(chunk)
    audio = n / 2 / 24000
    after = (n - at_first) / 2 / 24000
    out.append({"wall_s": last - t0, "audio_s": audio, "ttfa_s": first, "rtf_after_first": (last - t0 - first) / after if after else None})


def burst(n: int) -> dict:
    out: list = []
    threads = [threading.Thread(target=streamed if args.stream else one, args=(TEXTS[i % len(TEXTS)], out)) for i in range(n)]
    t0 = time.perf_counter()
    for i, t in enumerate(threads):
        if args.stagger:
            time.sleep(max(0.0, t0 + i * args.stagger - time.perf_counter()))
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    frames = sum(o["audio_s"] for o in out) * FRAME_RATE
    result = {"clients": n, "wall_s": wall, "frames_per_s": frames / wall, "rtf": [o["wall_s"] / o["audio_s"] for o in out]}
    if args.stream:
        result["ttfa_s"] = [o["ttfa_s"] for o in out]
        result["rtf_after_first"] = [o["rtf_after_first"] for o in out]
    return result


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
        **(
            {
                "ttfa_median": round(statistics.median(x for r in rs for x in r["ttfa_s"]), 3),
                "ttfa_worst": round(max(max(r["ttfa_s"]) for r in rs), 3),
                "rtf_after_first_median": round(statistics.median(x for r in rs for x in r["rtf_after_first"]), 2),
                "rtf_after_first_worst": round(max(max(r["rtf_after_first"]) for r in rs), 2),
            }
            if args.stream
            else {}
        ),
    }
    for n, rs in runs.items()
}
print(
    json.dumps(
        {
            "precision": args.precision or "fp32",
            "frames": args.frames,
            "stream": args.stream,
            "stagger_s": args.stagger,
            "largest_batch": largest,
            "summary": summary,
            "runs": runs,
        },
        indent=1,
    )
)
