"""The request scheduler on its own: queue bounds, micro-batches, cancellation, shutdown."""

from __future__ import annotations

import time

import pytest
from test_server import long_request, make_home, wait_for

from koe.runtime import compute
from koe.service import Busy, RequestCancelled, SpeechRequest, Synthesizer, Unavailable
from koe.service.synthesis.scheduler import Scheduler

pytestmark = pytest.mark.filterwarnings("ignore:speech was cut off", "ignore:segment 0 was cut off")


@pytest.fixture(scope="module")
def synth(tmp_path_factory, session_tmp):
    s = Synthesizer(make_home(tmp_path_factory.mktemp("home"), session_tmp))
    yield s
    s.close()


def short(text: str, frames: int = 4, **kw) -> SpeechRequest:
    return SpeechRequest(text=text, model="cv", speaker="ryan", options={"max_new_tokens": frames}, format="wav", **kw)


def test_waiting_job_cancelled_never_runs_and_queue_is_bounded(synth):
    sched = Scheduler(synth, queue_size=2)
    try:
        blocker = sched.submit(long_request())
        wait_for(lambda: sched.stats()["cv"].running == 1)
        a, b = sched.submit(short("first")), sched.submit(short("second"))
        with pytest.raises(Busy) as e:
            sched.submit(short("third"))
        assert e.value.retry_after >= 1
        a.cancel()  # its client went away: its slot is free for the next request
        c = sched.submit(short("third"))
        with pytest.raises(RequestCancelled):
            a.future.result(1)
        blocker.cancel()
        assert b.future.result(30).audio[:4] == b"RIFF" and c.future.result(30).audio[:4] == b"RIFF"
        wait_for(lambda: sched.stats()["cv"].completed == 2)
        assert (sched.stats()["cv"].cancelled, sched.stats()["cv"].waiting) == (2, 0)
    finally:
        sched.close()


def test_batch_stops_only_when_every_member_is_cancelled(synth):
    sched = Scheduler(synth, batch_window=0.05)
    try:
        blocker = sched.submit(long_request())
        wait_for(lambda: sched.stats()["cv"].running == 1)
        one, two = sched.submit(short("Hello there.", 30)), sched.submit(short("Good morning to you.", 30))
        blocker.cancel()
        wait_for(lambda: sched.stats()["cv"].running == 2)
        one.cancel()  # the other still wants its audio: the batch goes on
        assert two.future.result(60).metadata["batch_size"] == 2
        long_a, long_b = sched.submit(long_request("alpha beta gamma delta")), sched.submit(long_request("one more long text"))
        wait_for(lambda: sched.stats()["cv"].running == 2)
        long_a.cancel()
        long_b.cancel()
        for job in (long_a, long_b):
            with pytest.raises(RequestCancelled):
                job.future.result(10)
    finally:
        sched.close()


def test_seeded_requests_run_alone_and_stream_jobs_yield_chunks(synth):
    sched = Scheduler(synth, batch_window=0.05)
    try:
        blocker = sched.submit(long_request())
        wait_for(lambda: sched.stats()["cv"].running == 1)
        seeded = [sched.submit(short("Hi.", seed=5)), sched.submit(short("Hello.", seed=5))]
        # seeded, so the chunk count does not hang on where a freshly seeded random-weight model ends its utterance
        stream = sched.submit_stream(short("Streamed words here.", 10, seed=3), first_chunk_s=0.16, chunk_s=0.24)
        blocker.cancel()
        assert [j.future.result(60).metadata.get("batch_size", 1) for j in seeded] == [1, 1]
        chunks = list(stream)
        assert len(chunks) >= 3 and chunks[-1].final and stream.next_chunk() is None
    finally:
        sched.close()


def test_close_fails_waiting_jobs_and_refuses_new_ones(synth):
    sched = Scheduler(synth)
    blocker = sched.submit(long_request())
    wait_for(lambda: sched.stats()["cv"].running == 1)
    waiting = sched.submit(short("never"))
    sched.close()
    with pytest.raises(Unavailable):
        waiting.future.result(10)
    with pytest.raises(RequestCancelled):
        blocker.future.result(10)
    with pytest.raises(Unavailable):
        sched.submit(short("late"))


def test_generations_run_on_the_compute_thread(synth, monkeypatch):
    """Every lane's generations (and the model loads inside them) run on the process's one compute
    thread, so torch keeps one OpenMP team (koe.runtime.compute)."""
    seen = []
    speak, stream = synth.speak, synth.stream
    monkeypatch.setattr(synth, "speak", lambda plan, **kw: (seen.append(compute.on_compute_thread()), speak(plan, **kw))[1])
    monkeypatch.setattr(synth, "stream", lambda plan, *a, **kw: (seen.append(compute.on_compute_thread()), stream(plan, *a, **kw))[1])
    sched = Scheduler(synth)
    try:
        assert sched.submit(short("Hi.", seed=1)).future.result(60).audio[:4] == b"RIFF"
        assert list(sched.submit_stream(short("Hello.", 4, seed=1)))[-1].final
        assert seen == [True, True]
    finally:
        sched.close()


def test_a_burst_arriving_over_several_windows_is_one_batch(synth):
    """Requests that keep arriving (each within a window of the last) join the batch, up to
    BURST_WINDOWS windows after the first; one that comes later waits for the next batch."""
    window = 0.3
    sched = Scheduler(synth, batch_window=window)
    try:
        jobs = []
        for i, text in enumerate(["One.", "Two words.", "Three words here.", "And a fourth."]):
            if i:
                time.sleep(window / 2)  # the last joins 1.5 windows after the first: past a fixed window
            jobs.append(sched.submit(short(text, 4)))
        assert [j.future.result(60).metadata["batch_size"] for j in jobs] == [4, 4, 4, 4]
    finally:
        sched.close()


def _wav_stream_ok(chunks) -> bool:
    data = b"".join(c.data for c in chunks)
    return chunks[-1].final and data[:4] == b"RIFF" and all(not c.final for c in chunks[:-1])


def test_streams_arriving_together_share_one_batched_generation(synth):
    """Streams without a seed that wait together run as one batch, each with its own chunks (and
    chunk sizes); a seeded stream runs alone; a stream cancelled in the batch ends cancelled."""
    sched = Scheduler(synth, batch_window=0.05)
    try:
        blocker = sched.submit(long_request())
        wait_for(lambda: sched.stats()["cv"].running == 1)
        sizes = [(0.16, 0.24), (0.08, 0.16), (None, None)]
        frames = 60  # long enough that the batch is still running when `gone` leaves after its first chunk
        streams = [
            sched.submit_stream(short(t, frames), first_chunk_s=f, chunk_s=c) for t, (f, c) in zip(["First stream.", "The second stream.", "Third."], sizes)
        ]
        gone = sched.submit_stream(short("Its client leaves.", frames))
        seeded = sched.submit_stream(short("A seeded stream.", 6, seed=4))
        blocker.cancel()
        gone.next_chunk(60)
        gone.cancel()
        assert sched.stats()["cv"].running == 4
        outs = [list(s) for s in streams]
        for chunks, (first, _) in zip(outs, sizes):
            assert _wav_stream_ok(chunks) and chunks[-1].metadata["batch_size"] == 4
            if first is not None:
                assert len(chunks[0].samples) == round(first * 12.5) * 1920  # its own first chunk size
        with pytest.raises(RequestCancelled):
            list(gone)
        alone = list(seeded)
        assert _wav_stream_ok(alone) and "batch_size" not in alone[-1].metadata
        stats = sched.stats()["cv"]
        assert stats.largest_batch == 4 and stats.cancelled >= 2  # the blocker and the stream that left
    finally:
        sched.close()


def test_a_stream_batch_that_fails_before_any_chunk_streams_each_alone(synth, monkeypatch):
    def poisoned(*args, **kwargs):
        raise RuntimeError("one text the tokenizer cannot take")

    monkeypatch.setattr(synth, "stream_batch", poisoned)
    sched = Scheduler(synth, batch_window=0.05)
    try:
        blocker = sched.submit(long_request())
        wait_for(lambda: sched.stats()["cv"].running == 1)
        streams = [sched.submit_stream(short(t, 6)) for t in ("One stream.", "Another stream.")]
        blocker.cancel()
        assert all(_wav_stream_ok(list(s)) for s in streams)
        assert sched.stats()["cv"].largest_batch == 2
    finally:
        sched.close()


@pytest.fixture(scope="module")
def synth_int8(tmp_path_factory, session_tmp):
    """The tiny model in int8 on koe's kernels: its stream batches take rows while they run."""
    from fixtures_models import model_folder

    from koe.service import KoeHome, load_settings

    home = KoeHome(load_settings(tmp_path_factory.mktemp("home8"), flags={"models": {"default": "cv", "precision": "int8"}}, environ={}))
    home.models.import_model(model_folder(session_tmp, "custom_voice"), "cv", link=True)
    s = Synthesizer(home)
    yield s
    s.close()


def test_a_stream_that_arrives_while_a_batch_runs_joins_it(synth_int8):
    """int8: a stream that comes while a stream batch runs joins it at the next frame (its first
    audio comes long before the batch ends); a one-shot request waiting at the head of the queue
    stops further joins, so it waits for no more than that batch."""
    sched = Scheduler(synth_int8, batch_window=0.0)
    try:
        first = sched.submit_stream(short("The first stream runs for a while.", 80), first_chunk_s=0.08, chunk_s=0.08)
        first.next_chunk(60)
        late = sched.submit_stream(short("A late one.", 80), first_chunk_s=0.08, chunk_s=0.08)
        assert late.next_chunk(60) is not None  # it joined: the first stream (79 frames) is still running
        assert sched.stats()["cv"].running == 2 and not first.future.done()
        one_shot = sched.submit(short("One shot.", 4))
        after = sched.submit_stream(short("Behind the one-shot request.", 6))
        first_chunks, late_chunks = list(first), list(late)
        assert first_chunks[-1].final and late_chunks[-1].final and late_chunks[-1].metadata["batch_size"] == 2
        assert one_shot.future.result(60).audio[:4] == b"RIFF"
        assert list(after)[-1].final
        wait_for(lambda: sched.stats()["cv"].batches == 3)  # the batch of two, then the one-shot, then the last stream
        assert sched.stats()["cv"].largest_batch == 2
    finally:
        sched.close()
