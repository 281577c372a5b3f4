"""Model work in a long-lived process (`koe serve`): each piece on a thread of its own that ends with it.

Why: torch's CPU ops and koe's C kernels run their parallel loops on OpenMP (GNU libgomp). Each
thread that starts a parallel loop gets its own team of worker threads, kept until that thread
ends, and libgomp counts every such worker. While it manages more threads than the process may
use CPUs, it stops letting idle workers spin between loops: each of the hundreds of loops a frame
makes then waits for the kernel to wake the other threads. A server whose long-lived threads each
ran some model work (the load on one, generations on another, one per model) stays in that state.
Measured on the project's 2-core VM (int8 0.6B, a 40-frame stream): the engine streamed at
0.90-0.98x real time on the thread that loaded it, 1.40-1.52x on a second long-lived thread, and
as fast as on one thread (2.6-3.2 s a stream) when the load and each stream ran on a fresh thread
that ended after it (docs/PERFORMANCE.md). So `run` does that: the team exists only while its
work runs, two models' generations can still run at once (then the process does use more threads
than CPUs, and OpenMP is right not to spin), and no thread keeps a team between requests.

`run(fn, *args)` calls `fn` on a new thread, waits, and returns its result (or raises its error);
called from such a thread (nested work: a generation that loads a model), it just calls `fn`.
Keep torch work off the process's other long-lived threads (the main thread included).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

THREAD_NAME = "koe-compute"


def on_compute_thread() -> bool:
    return threading.current_thread().name.startswith(THREAD_NAME)


def run(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """`fn(*args, **kwargs)` on a fresh thread that ends when it returns; blocks until then."""
    if on_compute_thread():
        return fn(*args, **kwargs)
    outcome: list = []

    def work() -> None:
        try:
            outcome.append((True, fn(*args, **kwargs)))
        except BaseException as e:  # noqa: BLE001 - handed to the caller, who raises it
            outcome.append((False, e))

    thread = threading.Thread(target=work, name=f"{THREAD_NAME}-{getattr(fn, '__name__', 'work')}", daemon=True)
    thread.start()
    thread.join()
    ok, value = outcome[0]
    if not ok:
        raise value
    return value
