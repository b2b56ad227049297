"""A batch retried through MLflow's API leaves no runs behind (issue #27, item 2): not the
runs of the first attempt's other threads, nor a run whose creation's answer was lost."""

from __future__ import annotations

import threading
from collections import Counter

from mlflow.entities import ViewType

from sweeper.cells import Cell
from sweeper.execute import Outcome
from sweeper.progress import Progress
from sweeper.record import Batching, Recorder
from sweeper.tracking import Tracker


def _cell(seed: int) -> Cell:
    return Cell({"cell": "sweeper.toy.toy_cell", "seed": seed, "horizon": 10})


def test_a_lost_answer_and_a_reset_mid_batch_leave_exactly_one_run_per_cell(tracking_uri):
    tracker = Tracker(tracking_uri, "retries")
    parent = tracker.parent_run("sweep", "{}")
    batching = Batching(database=None, batch_size=8, log_threads=3, patience_s=30)
    recorder = Recorder(tracker, parent, batching, Progress(8))
    create, calls, lock = tracker.client.create_run, [], threading.Lock()

    def flaky(*args, **kwargs):
        with lock:
            calls.append(1)
            n = len(calls)
        if n == 2:  # the server created the run, its answer was lost
            create(*args, **kwargs)
            raise ConnectionResetError("connection reset by peer")
        if n == 4:
            raise ConnectionResetError("connection reset by peer")
        return create(*args, **kwargs)

    tracker.client.create_run = flaky
    for seed in range(8):
        outcome = Outcome("FINISHED", result={"summary": {"v": float(seed)}}, wall_s=0.01)
        recorder.add(_cell(seed), outcome, [])
    recorder.flush()
    logged = recorder.drain()
    recorder.close()
    assert len(logged) == 8
    runs = tracker.runs("tags.cell_key != ''")
    assert Counter(r.info.status for r in runs) == Counter({"FINISHED": 8})
    assert len({r.data.tags["cell_key"] for r in runs}) == 8
    every = tracker.client.search_runs(
        [tracker.experiment_id], "tags.cell_key != ''", run_view_type=ViewType.ALL
    )
    assert not [r for r in every if r.info.status == "RUNNING"]
    assert {row["run_id"] for _, _, row in logged} == {r.info.run_id for r in runs}
