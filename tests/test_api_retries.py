"""A batch retried through MLflow's API leaves no runs behind (issue #27, item 2): not the
runs of the first attempt's other threads, nor a run whose creation's answer was lost."""

from __future__ import annotations

import threading
from collections import Counter

from mlflow.entities import ViewType

from sweeper.cells import Cell
from sweeper.execute import Outcome
from sweeper.progress import Progress
from sweeper.store.parent import SweepRun
from sweeper.store.record import Batching, Recorder
from sweeper.store.tracking import Tracker


def _cell(seed: int) -> Cell:
    return Cell({"cell": "sweeper.toy.toy_cell", "seed": seed, "horizon": 10})


def test_a_lost_answer_and_a_reset_mid_batch_leave_exactly_one_run_per_cell(tracking_uri):
    tracker = Tracker(tracking_uri, "retries")
    parent = SweepRun.open(tracker, "sweep", "{}")
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


def test_a_reset_at_every_step_of_the_start_is_waited_for(composer, tracking_uri, monkeypatch):
    """Before: one reset while the store was opened, or the parent run created, was exit 3."""
    import io

    from mlflow import MlflowClient

    from sweeper import store
    from sweeper.sweep import run_sweep

    def once(cls, name):
        original, failed = getattr(cls, name), []

        def flaky(*args, **kwargs):
            if not failed:
                failed.append(1)
                raise ConnectionResetError("connection reset by peer")
            return original(*args, **kwargs)

        monkeypatch.setattr(cls, name, flaky)

    once(MlflowClient, "get_experiment_by_name")  # opening the store
    once(Tracker, "sweep_parents")  # the resume check
    once(SweepRun, "open")  # the sweep's parent run
    once(store, "leftovers")  # settling what a killed driver left
    overrides = ["task=toy", "launcher.name=local", "seeds=2", "horizon=5",
                 f"tracking.uri={tracking_uri}", "experiment.name=resets"]  # fmt: skip
    out = io.StringIO()
    result = run_sweep(composer(overrides), composer, overrides, out=out)
    assert result.exit_code == 0 and result.finished == 2, out.getvalue()
    assert out.getvalue().count("the MLflow store does not answer") == 4


def test_a_store_that_hangs_never_holds_the_exit(composer, tracking_uri, monkeypatch):
    """Issue #27, item 2: a store gone mid-sweep made each clean-up call block for minutes
    (263 s to exit with tracking.patience_s=20). The clean-up is bounded (CLEANUP_S)."""
    import io
    import time

    from sweeper import store
    from sweeper.sweep import run_sweep

    def full_disk(self, rows, until=None, move_mark=True):
        raise OSError(28, "No space left on device")

    def hang(*args, **kwargs):
        time.sleep(600)

    monkeypatch.setattr(SweepRun, "append", full_disk)
    monkeypatch.setattr(SweepRun, "settle", hang)
    monkeypatch.setattr(store, "settle_own", hang)
    monkeypatch.setattr(store, "CLEANUP_S", 2.0)
    overrides = ["task=toy", "launcher.name=local", "seeds=2", "horizon=5",
                 f"tracking.uri={tracking_uri}", "experiment.name=hangs"]  # fmt: skip
    started = time.monotonic()
    result = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert result.exit_code == 3 and "No space left" in result.store_error
    assert time.monotonic() - started < 60
