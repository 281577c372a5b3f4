"""koe.runtime.compute: model work on a thread that ends with it (no long-lived OpenMP team; see the module)."""

from __future__ import annotations

import threading

import pytest

from koe.runtime import compute


def test_run_calls_on_the_compute_thread_and_returns_or_raises() -> None:
    assert not compute.on_compute_thread()
    name, total = compute.run(lambda a, b=0: (threading.current_thread().name, a + b), 2, b=3)
    assert name.startswith(compute.THREAD_NAME) and name != threading.current_thread().name and total == 5
    assert compute.run(compute.on_compute_thread)
    with pytest.raises(ValueError, match="bad input"):
        compute.run(_fail)
    assert compute.run(lambda: 1) == 1  # the thread survives an error


def test_run_on_the_compute_thread_calls_directly() -> None:
    """Nested work (a generation that loads a model) must not wait for itself."""
    assert compute.run(lambda: compute.run(lambda: 7)) == 7


def test_each_call_gets_a_thread_that_ends_with_it() -> None:
    threads: list[threading.Thread] = []
    for _ in range(2):
        compute.run(lambda: threads.append(threading.current_thread()))
    assert threads[0] is not threads[1] and not any(t.is_alive() for t in threads)


def test_calls_from_several_threads_run_at_once() -> None:
    """Two models' generations may overlap (the scheduler's lanes): `run` serializes nothing."""
    both = threading.Barrier(2, timeout=30)
    done: list[int] = []
    callers = [threading.Thread(target=lambda: done.append(compute.run(both.wait) is not None)) for _ in range(2)]
    for t in callers:
        t.start()
    for t in callers:
        t.join(60)
    assert done == [True, True]


def _fail() -> None:
    raise ValueError("bad input")
