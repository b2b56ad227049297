"""The recorder writes one batch in a thread while the driver goes on (sweeper/store/record.py)."""

from __future__ import annotations

import io
import threading
import time

import pytest
from mlflow import MlflowClient

from sweeper.cells import Cell
from sweeper.execute import Outcome
from sweeper.progress import Progress
from sweeper.store.bulk import BulkWriter
from sweeper.store.parent import SweepRun
from sweeper.store.record import Batching, Recorder, open_writer, patiently
from sweeper.store.tracking import StoreFailed, Tracker


def _cell(seed: int) -> Cell:
    return Cell({"cell": "sweeper.toy.cell", "seed": seed, "horizon": 10})


def _outcome(seed: int) -> Outcome:
    return Outcome("FINISHED", result={"summary": {"total": float(seed)}}, wall_s=0.01)


@pytest.fixture
def recording(tracking_uri):
    """A tracker, its sweep's parent run and a recorder writing straight into sqlite (its
    progress lines into a buffer of its own: pytest closes the stdout of a fixture's setup)."""
    tracker = Tracker(tracking_uri, "record")
    parent = SweepRun.open(tracker, "sweep", "{}")
    batching = Batching(database=tracking_uri, batch_size=2, patience_s=5)
    progress = Progress(6, io.StringIO())
    recorder = Recorder(tracker, parent, batching, progress, open_writer(batching, tracker))
    yield tracker, parent, recorder
    recorder.close()


def test_flush_hands_a_batch_over_and_the_next_flush_returns_it(recording, monkeypatch):
    tracker, parent, recorder = recording
    release, writing, threads = threading.Event(), threading.Event(), []
    original = BulkWriter.write

    def slow(self, records):
        threads.append(threading.current_thread().name)
        writing.set()
        assert release.wait(10)
        return original(self, records)

    monkeypatch.setattr(BulkWriter, "write", slow)
    for seed in (0, 1):
        recorder.add(_cell(seed), _outcome(seed), [])
    assert recorder.flush() == []  # handed over: the driver does not wait for the write
    assert writing.wait(10)
    recorder.add(_cell(2), _outcome(2), [])  # received while the first batch is written
    second_received = recorder.batch[0][3]
    release.set()
    first = recorder.flush()  # waits for the first batch, hands over the second
    assert [cell.config["seed"] for cell, _, _ in first] == [0, 1]
    rest = recorder.drain()
    assert [cell.config["seed"] for cell, _, _ in rest] == [2]
    assert {t.split("/")[0] for t in threads} == {"sweeper-record_0"}  # off the driver's thread
    runs = MlflowClient(tracker.uri).search_runs([tracker.experiment_id], "tags.seed != ''")
    assert sorted(r.data.tags["seed"] for r in runs) == ["0", "1", "2"]
    # The mark only covers what the table holds: the first batch's mark is its closing
    # time, before the third cell was received; the last is past every cell.
    until = int(tracker.client.get_run(parent.run_id).data.tags["table_until"])
    assert until >= second_received
    table = parent.table.read()
    assert sorted(table["seed"]) == [0, 1, 2]


def test_a_mark_never_passes_a_cell_of_a_later_batch(recording, monkeypatch):
    tracker, parent, recorder = recording
    marks = []
    original = SweepRun.append

    def spy(self, rows, until=None):
        marks.append(until)
        return original(self, rows, until)

    monkeypatch.setattr(SweepRun, "append", spy)
    received = []
    for seed in range(6):
        recorder.add(_cell(seed), _outcome(seed), [])
        received.append(recorder.batch[-1][3])
        time.sleep(0.003)
        if recorder.due():
            recorder.flush()
    recorder.drain()
    assert len(marks) == 3
    for batch, mark in enumerate(marks):
        assert all(r <= mark for r in received[: 2 * batch + 2])
        assert all(r >= mark for r in received[2 * batch + 2 :])


def test_a_failed_batch_is_raised_by_the_next_flush_the_open_one_kept(recording, monkeypatch):
    _, _, recorder = recording

    def full(self, records):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(BulkWriter, "write", full)
    for seed in (0, 1):
        recorder.add(_cell(seed), _outcome(seed), [])
    recorder.flush()
    recorder.add(_cell(2), _outcome(2), [])
    with pytest.raises(StoreFailed, match="No space left on device"):
        recorder.flush()
    assert [cell.config["seed"] for cell, _, _, _ in recorder.batch] == [2]
    assert recorder.close() == []  # nothing of the failed batch was written


def test_close_ends_a_wait_for_a_store_that_is_away(recording, monkeypatch):
    """A second Ctrl-C while the writer waits for the store: close() cuts the wait short."""
    _, _, recorder = recording
    recorder.batching.patience_s = 600

    def away(self, records):
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(BulkWriter, "write", away)
    recorder.add(_cell(0), _outcome(0), [])
    recorder.flush()
    time.sleep(0.3)  # the writer is waiting out its first backoff
    assert "retrying in 1 s" in recorder.progress.out.getvalue()
    started = time.monotonic()
    assert recorder.close() == []
    assert time.monotonic() - started < 2


class _Said:
    def __init__(self) -> None:
        self.lines: list[str] = []

    def message(self, text: str) -> None:
        self.lines.append(text)


def test_a_store_away_is_waited_for_within_the_patience_then_the_sweep_stops():
    """Backoffs of 1 s then 2 s: with a patience of 2.9 s the second would end past it, so
    the wait stops after the first, and says what it waited."""
    said, calls = _Said(), []

    def away():
        calls.append(time.monotonic())
        raise ConnectionRefusedError(111, "Connection refused")

    with pytest.raises(StoreFailed) as failed:
        patiently("writing", away, 2.9, said)
    assert str(failed.value) == (
        "writing: ConnectionRefusedError: [Errno 111] Connection refused "
        "(waited 1 s: tracking.patience_s)"
    )
    assert len(calls) == 2 and 0.9 < calls[1] - calls[0] < 1.5
    assert said.lines == [
        "the MLflow store does not answer ([Errno 111] Connection refused); retrying in 1 s "
        "(waited 0 s of tracking.patience_s=3)"
    ]


def test_a_store_back_after_a_wait_answers_and_a_full_disk_is_not_waited_for():
    said, calls = _Said(), []

    def back():
        calls.append(1)
        if len(calls) == 1:
            raise ConnectionResetError(104, "Connection reset by peer")
        return "answer"

    assert patiently("reading", back, 30, said) == "answer" and len(said.lines) == 1

    def full():
        raise OSError(28, "No space left on device")

    with pytest.raises(StoreFailed) as failed:
        patiently("writing", full, 30, said)
    assert str(failed.value) == "writing: OSError: [Errno 28] No space left on device"
    assert len(said.lines) == 1


def test_a_ctrl_c_ends_a_wait_for_the_store():
    class Stop:
        requested = False

    stop, said = Stop(), _Said()

    def away():
        stop.requested = True  # pressed while the store is away
        raise ConnectionRefusedError(111, "Connection refused")

    started = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        patiently("writing", away, 600, said, stop)
    assert time.monotonic() - started < 0.5 and len(said.lines) == 1
