"""Orchestration at scale: failure isolation, time limits, worker deaths, resume, reruns.

The cells are ``sweeper.toy.toy_cell`` (microseconds each, misbehaving on request), run on
the session's Ray instance; sweeps that must be killed run in a subprocess that joins that
instance by address.
"""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.store.index import read_index
from sweeper.store.parent import SweepRun
from sweeper.store.result import CLOCK_MARGIN_MS
from sweeper.store.tracking import Tracker
from sweeper.sweep import run_sweep

TOY = ["task=toy", "horizon=50"]


def _overrides(tracking_uri: str, name: str, *extra: str) -> list[str]:
    return [*TOY, f"tracking.uri={tracking_uri}", f"experiment.name={name}", *extra]


def _sweep(composer, overrides: list[str]):
    out = io.StringIO()
    result = run_sweep(composer(overrides), composer, overrides, out=out)
    return result, out.getvalue()


def _cell_runs(tracking_uri: str, name: str) -> list:
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(name)
    if experiment is None:
        return []
    runs = client.search_runs([experiment.experiment_id], max_results=5000)
    return [r for r in runs if "cell_key" in r.data.tags]


def _statuses(runs) -> Counter:
    return Counter(r.info.status for r in runs)


def _assert_one_finished_run_per_cell(runs, cells: int) -> None:
    finished = Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == cells, f"{len(finished)} cells have a FINISHED run, want {cells}"
    assert set(finished.values()) == {1}, f"duplicated FINISHED runs: {finished}"
    assert not [r for r in runs if r.info.status == "RUNNING"], "a run is left RUNNING"


def _spawn(args: list[str], cwd: Path) -> subprocess.Popen:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    return subprocess.Popen(
        [sys.executable, "-m", "sweeper", *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def _wait_for_finished(proc, tracking_uri: str, name: str, count: int, limit_s: float = 120):
    deadline = time.time() + limit_s
    while time.time() < deadline:
        assert proc.poll() is None, f"the sweep ended early: {proc.communicate()}"
        try:
            runs = _cell_runs(tracking_uri, name)
        except Exception:  # the store is being created or is locked for a moment
            runs = []
        if _statuses(runs)["FINISHED"] >= count:
            return
        time.sleep(0.2)
    raise AssertionError(f"fewer than {count} cells finished in {limit_s}s")


# --- failure isolation ----------------------------------------------------------------


def test_a_failing_and_a_diverging_cell_are_failed_runs_and_the_sweep_goes_on(
    composer, tracking_uri, ray_local
):
    overrides = _overrides(
        tracking_uri, "failing", "seeds=4", "+toy.fail_seeds=[1]", "+toy.nan_seeds=[2]"
    )
    result, out = _sweep(composer, overrides)
    assert result.finished == 2 and len(result.failed) == 2 and not result.ok
    assert result.exit_code == 1
    reasons = {f.label.rsplit("seed", 1)[1]: f.error for f in result.failed}
    assert "RuntimeError: injected failure for seed 1" in reasons["1"]
    assert "not finite" in reasons["2"]
    assert "2 cell(s) FAILED" in out and "injected failure for seed 1" in out

    runs = _cell_runs(tracking_uri, "failing")
    assert _statuses(runs) == Counter({"FINISHED": 2, "FAILED": 2})
    client = MlflowClient(tracking_uri)
    (bad,) = [r for r in runs if r.data.tags["seed"] == "1"]
    assert bad.info.status == "FAILED"
    assert "injected failure" in bad.data.tags["error"]
    traceback = Path(client.download_artifacts(bad.info.run_id, "traceback.txt")).read_text()
    assert "Traceback" in traceback and "toy_cell" in traceback
    # The table lists the failures too, so a report never silently drops them.
    table = result.table.set_index("seed")
    assert table.loc[1, "status"] == "FAILED" and "injected" in table.loc[1, "error"]
    assert table.loc[0, "status"] == "FINISHED" and table.loc[0, "final_value"] > 0

    # Rerunning retries only the failed cells (they fail again: the bug is in the cell).
    again, _ = _sweep(composer, overrides)
    assert again.skipped == 2 and len(again.failed) == 2 and again.finished == 0


def test_a_cell_over_its_time_limit_is_cancelled_and_failed(
    composer, tracking_uri, ray_local, tmp_path
):
    pids = tmp_path / "pids"
    pids.mkdir()
    overrides = _overrides(
        tracking_uri,
        "timeout",
        "seeds=2",
        "+toy.hang_seeds=[0]",
        f"+toy.pid_dir={pids}",
        "launcher.timeout_s=2",
    )
    started = time.perf_counter()
    result, _ = _sweep(composer, overrides)
    assert time.perf_counter() - started < 60
    assert result.finished == 1 and len(result.failed) == 1
    (failure,) = result.failed
    assert failure.label.endswith("seed0") and "TimeoutError" in failure.error
    assert "launcher.timeout_s" in failure.error
    (run,) = [r for r in _cell_runs(tracking_uri, "timeout") if r.data.tags["seed"] == "0"]
    assert run.info.status == "FAILED" and "TimeoutError" in run.data.tags["error"]
    # ray.cancel(force=True) killed the worker that was running the hung cell.
    pid = int((pids / "seed0.pid").read_text())
    deadline = time.time() + 20
    while time.time() < deadline and Path(f"/proc/{pid}").exists():
        time.sleep(0.2)
    assert not Path(f"/proc/{pid}").exists(), "the hung cell's worker process is still alive"


def test_a_dead_worker_is_retried_and_one_that_always_dies_fails(
    composer, tracking_uri, ray_local, tmp_path
):
    markers = tmp_path / "markers"
    markers.mkdir()
    once = _overrides(
        tracking_uri, "crash", "seeds=2", f"+toy.crash_once_dir={markers}", "launcher.max_retries=1"
    )
    result, _ = _sweep(composer, once)
    assert result.ok and result.finished == 2
    assert sorted(p.name for p in markers.iterdir()) == ["seed0.crashed", "seed1.crashed"]

    always = _overrides(
        tracking_uri, "crash", "seeds=1", "+toy.crash_seeds=[0]", "launcher.max_retries=1"
    )
    result, _ = _sweep(composer, always)
    (failure,) = result.failed
    assert "2 attempt(s)" in failure.error and "Worker" in failure.error


def test_parallel_logging_records_every_cell_and_keeps_the_table_consistent(
    composer, tracking_uri, ray_local
):
    name = "threads"
    overrides = _overrides(
        tracking_uri,
        name,
        "seeds=12",
        "+toy.fail_seeds=[3]",
        "tracking.log_threads=3",
        "tracking.batch_size=2",
    )
    result, _ = _sweep(composer, overrides)
    assert result.finished == 11 and [f.label[-5:] for f in result.failed] == ["seed3"]
    runs = _cell_runs(tracking_uri, name)
    assert _statuses(runs) == Counter({"FINISHED": 11, "FAILED": 1})
    assert set(result.table["run_id"]) == {r.info.run_id for r in runs}
    tracker = Tracker(tracking_uri, name)
    index = read_index(tracker)
    # A sweep that did not end FINISHED: only the runs that ended within the clock margin
    # of its table's mark are searched (sweeper/store/result.py), not every run.
    (parent,) = tracker.sweep_parents()
    since = int(parent.data.tags["table_until"]) - CLOCK_MARGIN_MS
    assert len(index.finished) == 11
    assert index.searched_runs == sum(r.info.end_time >= since for r in runs)


def test_runs_whose_table_part_was_never_written_are_found_by_the_next_start(
    composer, tracking_uri, monkeypatch
):
    """The runs of a batch are committed before its table part: a store that fails in
    between must not hide them (the table's mark is only moved past runs in the table)."""
    name = "mark"
    overrides = _overrides(tracking_uri, name, "seeds=4", "launcher.name=local")

    def full_disk(self, rows, until=None):
        raise OSError(28, "No space left on device")

    with monkeypatch.context() as patch:
        patch.setattr(SweepRun, "append", full_disk)
        first, out = _sweep(composer, overrides)
    assert first.store_error and "No space left" in first.store_error
    runs = _cell_runs(tracking_uri, name)
    assert _statuses(runs) == Counter({"FINISHED": 4})  # recorded, but in no table

    second, out = _sweep(composer, overrides)
    assert second.ok and second.skipped == 4 and second.finished == 0
    assert second.rebuilt_rows == 4 and "4 table row(s) rebuilt" in out
    assert set(second.table["run_id"]) == {r.info.run_id for r in runs}
    _assert_one_finished_run_per_cell(_cell_runs(tracking_uri, name), 4)


# --- resume ---------------------------------------------------------------------------


@pytest.mark.e2e
def test_a_sweep_killed_with_sigkill_resumes_without_duplicates(
    composer, tracking_uri, ray_address, tmp_path
):
    name = "killed"
    args = _overrides(
        tracking_uri,
        name,
        "seeds=10",
        "+toy.sleep_s=0.4",
        "tracking.batch_size=2",
        f"launcher.address={ray_address}",
    )
    proc = _spawn(args, tmp_path)
    try:
        _wait_for_finished(proc, tracking_uri, name, 3)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    before = _cell_runs(tracking_uri, name)
    finished_before = _statuses(before)["FINISHED"]
    assert 3 <= finished_before < 10

    result, out = _sweep(composer, args)
    assert result.ok and result.skipped == finished_before
    assert result.finished == 10 - finished_before
    runs = _cell_runs(tracking_uri, name)
    _assert_one_finished_run_per_cell(runs, 10)
    assert len(result.table) == 10 and set(result.table["status"]) == {"FINISHED"}
    assert result.table["cell_key"].is_unique
    assert {r.data.tags["mlflow.parentRunId"] for r in runs} == {result.parent_run_id}


@pytest.mark.e2e
def test_ctrl_c_cancels_what_is_in_flight_keeps_the_rest_and_says_how_to_resume(
    composer, tracking_uri, ray_address, tmp_path
):
    name = "interrupted"
    args = _overrides(
        tracking_uri, name, "seeds=10", "+toy.sleep_s=0.5", f"launcher.address={ray_address}"
    )
    proc = _spawn(args, tmp_path)
    try:
        _wait_for_finished(proc, tracking_uri, name, 2)
        proc.send_signal(signal.SIGINT)
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    assert proc.returncode == 130, stderr[-2000:]
    assert "Interrupted" in stdout and "python -m sweeper" in stdout
    assert "task=toy" in stdout  # the resume command repeats the overrides
    runs = _cell_runs(tracking_uri, name)
    finished_before = _statuses(runs)["FINISHED"]
    assert finished_before < 10 and not _statuses(runs)["RUNNING"]
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name(name)
    (parent,) = client.search_runs([experiment.experiment_id], "tags.role = 'sweep'")
    assert parent.info.status == "KILLED"

    result, _ = _sweep(composer, args)
    assert result.ok and result.skipped == finished_before
    _assert_one_finished_run_per_cell(_cell_runs(tracking_uri, name), 10)


def test_running_leftovers_are_reaped_and_missing_table_rows_rebuilt(
    composer, tracking_uri, ray_local, replace_table
):
    name = "leftovers"
    overrides = _overrides(tracking_uri, name, "seeds=6")
    first, _ = _sweep(composer, overrides)
    assert first.ok
    tracker = Tracker(tracking_uri, name)
    parent = first.parent_run_id
    # As if the driver had been killed: the last 3 cells never reached the table, and one
    # cell's run was cut off while being logged (RUNNING, its driver gone).
    table = first.table.sort_values("start_time")
    replace_table(tracker, parent, table.iloc[:3])
    tracker.client.set_tag(parent, "table_until", str(int(table["start_time"].iloc[3]) - 10_000))
    tracker.client.set_terminated(parent, "KILLED")  # a killed driver's sweep never FINISHED
    orphan = tracker.client.create_run(
        tracker.experiment_id,
        tags={
            "cell_key": table["cell_key"].iloc[0],
            "mlflow.parentRunId": parent,
            "sweeper.driver": "somewhere-else:1:1",
        },
    )

    second, out = _sweep(composer, overrides)
    assert second.ok and second.skipped == 6 and second.finished == 0
    assert second.rebuilt_rows >= 3
    # A run another host's driver left uncommitted is retracted (sweeper/store/settle.py).
    assert "1 run(s) a driver on another host left uncommitted" in out and "retracted" in out
    left = tracker.client.get_run(orphan.info.run_id).info
    assert (left.status, left.lifecycle_stage) == ("KILLED", "deleted")
    assert len(second.table) == 6 and set(second.table["status"]) == {"FINISHED"}
    rebuilt = second.table.set_index("cell_key").loc[table["cell_key"].iloc[5]]
    original = first.table.set_index("cell_key").loc[table["cell_key"].iloc[5]]
    assert rebuilt["final_value"] == pytest.approx(original["final_value"])
    assert list(rebuilt["curve_value"]) == pytest.approx(list(original["curve_value"]))
    hp = "hp_knob"  # the hyperparameter trace comes back from cell.npz
    assert list(rebuilt[hp]) == pytest.approx(list(original[hp]))


def test_the_same_sweep_running_in_another_live_process_is_refused(composer, tracking_uri):
    from sweeper.process import process_start as _process_start

    name = "twice"
    overrides = _overrides(tracking_uri, name, "seeds=1", "launcher.name=local")
    first, _ = _sweep(composer, overrides)
    other = subprocess.Popen(["sleep", "60"])
    try:
        driver = f"{socket.gethostname()}:{other.pid}:{_process_start(other.pid)}"
        client = MlflowClient(tracking_uri)
        client.set_tag(first.parent_run_id, "sweeper.driver", driver)
        client.update_run(first.parent_run_id, status="RUNNING")
        with pytest.raises(RuntimeError, match=f"already running in process {other.pid}"):
            _sweep(composer, overrides)
    finally:
        other.kill()
        other.wait()
    # Once that process is gone, the same command takes the sweep over.
    again, _ = _sweep(composer, overrides)
    assert again.ok and again.skipped == 1


def test_the_resume_index_reads_tables_and_searches_only_runs_after_the_last_flush(
    composer, tracking_uri, ray_local
):
    name = "index"
    first, _ = _sweep(composer, _overrides(tracking_uri, name, "seeds=5"))
    index = read_index(Tracker(tracking_uri, name))
    assert len(index.finished) == 5 and index.tables == 1
    assert index.searched_runs == 0, "a complete table needs no run search"
    # A bigger sweep of the same experiment reuses the 5 finished cells of the first one.
    second, _ = _sweep(composer, _overrides(tracking_uri, name, "seeds=7"))
    assert second.skipped == 5 and second.finished == 2
    assert len(second.table) == 7
    _assert_one_finished_run_per_cell(_cell_runs(tracking_uri, name), 7)


def test_rerun_recomputes_and_supersedes_the_old_runs(composer, tracking_uri, ray_local):
    name = "rerun"
    first, _ = _sweep(composer, _overrides(tracking_uri, name, "seeds=3"))
    first_ids = set(first.table["run_id"])  # the table is read from the store when asked
    second, out = _sweep(composer, _overrides(tracking_uri, name, "seeds=3", "rerun=true"))
    assert second.finished == 3 and second.skipped == 0 and "recomputing" in out
    runs = _cell_runs(tracking_uri, name)
    assert _statuses(runs) == Counter({"FINISHED": 6})
    old = {r.info.run_id: r for r in runs if r.info.run_id in first_ids}
    new_ids = set(second.table["run_id"])
    assert len(old) == 3 and not new_ids & set(old)
    assert {r.data.tags.get("superseded_by") for r in old.values()} == new_ids
    current = [r for r in runs if "superseded_by" not in r.data.tags]
    assert {r.info.run_id for r in current} == new_ids
    # A plain resume afterwards skips everything and keeps the newest runs in the table.
    third, _ = _sweep(composer, _overrides(tracking_uri, name, "seeds=3"))
    assert third.skipped == 3 and set(third.table["run_id"]) == new_ids


def test_cells_run_on_the_local_launcher_with_a_time_limit(composer, tracking_uri):
    overrides = _overrides(
        tracking_uri,
        "local",
        "seeds=2",
        "+toy.hang_seeds=[1]",
        "launcher.name=local",
        "launcher.timeout_s=1",
    )
    result, _ = _sweep(composer, overrides)
    assert result.finished == 1
    (failure,) = result.failed
    assert failure.label.endswith("seed1") and "TimeoutError" in failure.error


@pytest.mark.parametrize(
    "override, message",
    [
        ("launcher.timeout_s=0", "timeout_s must be a positive"),
        ("launcher.name=slurm", "launcher.name is one of ray, local"),
        ("launcher.max_in_flight=0", "max_in_flight must be"),
    ],
)
def test_a_bad_launcher_setting_fails_before_anything_runs(
    composer, tracking_uri, override, message
):
    from sweeper.configs import compose  # as the command line composes (composer: Hydra's context)

    overrides = _overrides(tracking_uri, "bad", "seeds=1", override)
    with pytest.raises(ValueError, match=message):
        _sweep(compose, overrides)
    assert not _cell_runs(tracking_uri, "bad")


# --- the command line -------------------------------------------------------------------


def test_the_command_exits_non_zero_and_summarises_when_a_cell_fails(tmp_path, tracking_uri):
    args = _overrides(
        tracking_uri,
        "cli",
        "seeds=3",
        "+toy.fail_seeds=[2]",
        "launcher.name=local",
    )
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", *args], capture_output=True, text=True, cwd=tmp_path
    )
    assert done.returncode == 1, done.stderr[-2000:]
    assert "3/3 done (2 ok, 1 failed)" in done.stdout
    assert "FAILED" in done.stdout and "injected failure for seed 2" in done.stdout
    assert "cells/s" in done.stdout and "2 finished, 1 failed, 0 skipped of 3 cells" in done.stdout


def test_an_unknown_experiment_lists_the_valid_ones(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", "+exp=nope", f"tracking.uri=sqlite:///{tmp_path}/m.db"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    assert done.returncode == 2
    assert "unknown exp 'nope'" in done.stderr
    listed = done.stderr.split("Valid exp names are:", 1)[1]
    for experiment in ("smoke", "main", "grid", "candidates", "ablation", "syndicated"):
        assert experiment in listed
    assert not (tmp_path / "m.db").exists()


def test_the_progress_line_counts_done_failed_running_queued_and_an_eta():
    from sweeper.progress import Progress, format_duration

    progress = Progress(total=5, out=io.StringIO())
    assert "ETA ?" in progress.line()
    for _ in range(3):
        progress.start()
    progress.finish(ok=True)
    progress.finish(ok=False)
    progress.started -= 10.0  # as if 10 s had passed: 2 cells in 10 s, 3 to go
    line = progress.line()
    assert "2/5 done (1 ok, 1 failed), 3 remaining (1 running, 2 queued)" in line
    assert "ETA 15s" in line and "0.20 cells/s" in line
    assert [format_duration(s) for s in (5, 75, 3725)] == ["5s", "1m15s", "1h02m"]


def test_a_runs_duration_in_mlflow_is_its_cells_runtime(composer, tracking_uri):
    """MLflow's Duration (end - start) is the cell's runtime, not the time its run took to
    be logged (issue #14): a cell that sleeps 0.3 s lasts 0.3 s in the UI, and its run
    ends when the driver received it."""
    before = int(time.time() * 1000)
    overrides = _overrides(tracking_uri, "duration", "seeds=2", "launcher.name=local",
                           "+toy.sleep_s=0.3", "tracking.batch_s=5")  # fmt: skip
    result, _ = _sweep(composer, overrides)
    assert result.ok
    for run in _cell_runs(tracking_uri, "duration"):
        duration = run.info.end_time - run.info.start_time
        assert duration == round(run.data.metrics["wall_s"] * 1000) and 300 <= duration < 1000
        assert before <= run.info.start_time
