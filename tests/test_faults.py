"""Exactly once under every fault (issue #17): each defect of the issue, reproduced.

1. a kill while a new sqlite store is created, or another program creating it at the same
   time, must not leave a store every later run fails on;
2. two drivers at once: one file lock per local store (a lease per experiment on a server);
3. a run created and cut off by a second Ctrl-C is settled, whatever the table says;
5. a store error mid-sweep ends the sweep cleanly with exit status 3;
6. an interrupted ``rerun=true`` leaves no cell with two untagged FINISHED runs.

The slow tests drive real processes and signals; the toy cell's options make them short.
"""

from __future__ import annotations

import os
import resource
import signal
import socket
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException

from sweeper.process import now_ms
from sweeper.store.lock import Lease, StoreBusy, StoreLock, schema_state
from sweeper.store.tracking import Tracker
from tests.test_orchestration import _cell_runs, _overrides, _spawn, _statuses, _sweep
from tests.test_orchestration_server import tracking_server  # noqa: F401 - a fixture

API = ["tracking.direct_writes=false"]
"""Runs through MLflow's API, one call at a time (a tracking server without its database):
the faults below cut a run in the middle of its calls."""
ONE = ["tracking.batch_size=5", "tracking.batch_s=60"]
"""Every cell of a 5-cell sweep in one batch (the cut lands inside it, whatever the load)."""


def _current(runs) -> Counter:
    """FINISHED runs per cell that no newer run supersedes."""
    return Counter(
        r.data.tags["cell_key"]
        for r in runs
        if r.info.status == "FINISHED" and "superseded_by" not in r.data.tags
    )


def _env() -> dict[str, str]:
    drop = ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "HYDRA_FULL_ERROR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def _run(args: list[str], cwd: Path, **options) -> subprocess.CompletedProcess:
    """``python -m sweeper ARGS`` to its end, its output captured."""
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args],
        cwd=cwd,
        env=_env(),
        capture_output=True,
        text=True,
        timeout=300,
        **options,
    )


# --- 1. a new store exists whole or not at all -------------------------------------------


def _half_built(path: Path, runs: bool = False) -> None:
    """Leave ``path`` as a migration cut off by a kill leaves it: an ``_alembic_tmp_`` table
    and the schema revision of an earlier step."""
    with sqlite3.connect(path) as db:
        db.execute("create table _alembic_tmp_experiments (experiment_id integer)")
        db.execute("update alembic_version set version_num = 'bf29a5ff90ea'")
    state = schema_state(path)
    assert not state["whole"] and state["leftovers"] == ["_alembic_tmp_experiments"]
    assert bool(state["runs"]) == runs


def test_a_half_built_store_without_runs_is_rebuilt(tmp_path, tracking_uri, composer):
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    _half_built(path)
    with pytest.raises(MlflowException):  # what every run met before: the store is broken
        MlflowClient(tracking_uri).search_experiments()
    result, out = _sweep(
        composer, _overrides(tracking_uri, "rebuilt", "seeds=2", "launcher.name=local")
    )
    assert result.ok and result.finished == 2
    assert "the store was rebuilt whole" in out
    assert schema_state(path)["whole"]


@pytest.mark.e2e
def test_a_half_built_store_with_runs_is_explained_in_one_paragraph(tmp_path, tracking_uri):
    overrides = ["task=toy", "seeds=1", "launcher.name=local", f"tracking.uri={tracking_uri}"]
    assert _run(overrides, tmp_path).returncode == 0
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    _half_built(path, runs=True)
    done = _run(overrides, tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stderr
    assert "run(s) but its schema is incomplete" in done.stderr
    assert "_alembic_tmp_experiments" in done.stderr and "mlflow db upgrade" in done.stderr
    assert done.stderr.count("error:") == 1


def _kill_while_created(tmp_path: Path, command: list[str], db: Path, delay_s: float) -> None:
    """Start ``command``; once the store (or its temporary build) appears, wait ``delay_s``
    and kill -9 the process group."""
    proc = subprocess.Popen(
        command,
        cwd=tmp_path,
        env=_env(),
        start_new_session=True,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.time() + 120
        while not list(db.parent.glob(f"*{db.name}*")) and time.time() < deadline:
            assert proc.poll() is None
            time.sleep(0.02)
        time.sleep(delay_s)
    finally:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()


@pytest.mark.slow
def test_a_kill_while_the_driver_creates_a_new_store_breaks_nothing(tmp_path, ray_address):
    db = tmp_path / "m.db"
    args = [
        "task=toy",
        "seeds=3",
        f"tracking.uri=sqlite:///{db}",
        f"launcher.address={ray_address}",
    ]
    for delay in (0.5, 1.5):  # the moment, and one later in the migrations
        db.unlink(missing_ok=True)
        _kill_while_created(tmp_path, [sys.executable, "-m", "sweeper", *args], db, delay)
        assert not db.exists() or schema_state(db)["whole"]  # never half-built
        done = _run(args, tmp_path)
        assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-2000:]
        runs = _cell_runs(f"sqlite:///{db}", "adhoc")
        assert _statuses(runs) == Counter({"FINISHED": 3})
    assert not list(tmp_path.glob(".m.db.creating-*"))  # the killed builds are cleared


@pytest.mark.slow
def test_a_store_half_built_by_a_killed_mlflow_is_rebuilt(tmp_path):
    """MLflow itself (as ``mlflow ui`` or a report script would) killed while it creates a
    store: the next sweep rebuilds it instead of failing on it forever."""
    db = tmp_path / "m.db"
    create = [
        sys.executable,
        "-c",
        f"from mlflow import MlflowClient; MlflowClient('sqlite:///{db}').search_experiments()",
    ]
    for delay in (0.5, 1.0, 2.0, 0.25):
        db.unlink(missing_ok=True)
        _kill_while_created(tmp_path, create, db, delay)
        if db.exists() and not schema_state(db)["whole"]:
            break
    else:
        pytest.fail("no kill landed inside MLflow's table creation")
    args = ["task=toy", "seeds=2", "launcher.name=local", f"tracking.uri=sqlite:///{db}"]
    done = _run(args, tmp_path)
    assert done.returncode == 0, done.stdout[-1000:] + done.stderr[-2000:]
    assert "the store was rebuilt whole" in done.stdout
    assert _statuses(_cell_runs(f"sqlite:///{db}", "adhoc")) == Counter({"FINISHED": 2})


# --- 2. one driver at a time --------------------------------------------------------------


def test_the_store_lock_is_exclusive_names_its_holder_and_dies_with_it(
    tmp_path, tracking_uri, composer
):
    path = Path(tracking_uri.removeprefix("sqlite:///"))
    first = StoreLock(path, "python -m sweeper +exp=smoke")
    first.acquire()
    with pytest.raises(
        StoreBusy, match=rf"process {os.getpid()} .*running: python -m sweeper \+exp=smoke"
    ):
        StoreLock(path, "python -m sweeper +exp=smoke algorithm=linucb").acquire()
    first.release()
    again = StoreLock(path, "x")
    again.acquire()
    again.release()

    # Another process holds it; the driver refuses, then takes over once it is killed.
    holder = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys, time; from sweeper.store.lock import StoreLock; "
            f"StoreLock({str(path)!r}, 'python -m sweeper +exp=other').acquire(); "
            "print('held', flush=True); time.sleep(120)",
        ],
        stdout=subprocess.PIPE,
        text=True,
        env=_env(),
    )
    try:
        assert holder.stdout.readline().strip() == "held"
        overrides = _overrides(tracking_uri, "locked", "seeds=2", "launcher.name=local")
        with pytest.raises(
            StoreBusy, match=rf"process {holder.pid} .*\+exp=other.*kill -INT {holder.pid}"
        ):
            _sweep(composer, overrides)
        assert not _cell_runs(tracking_uri, "locked")  # nothing ran
    finally:
        holder.kill()  # SIGKILL: the OS drops its lock
        holder.wait()
    result, _ = _sweep(composer, overrides)
    assert result.ok and result.finished == 2


def test_a_lease_refuses_a_second_driver_and_expires_with_a_dead_one(tracking_uri):
    tracker = Tracker(tracking_uri, "leases")
    client, experiment = tracker.client, tracker.experiment_id
    first = Lease(client, experiment, "machine-a:100:1", "python -m sweeper +exp=smoke")
    first.acquire()
    second = Lease(client, experiment, "machine-b:200:1", "python -m sweeper +exp=smoke seeds=2")
    with pytest.raises(
        StoreBusy, match=r"machine-a:100:1 \(running: python -m sweeper \+exp=smoke\)"
    ):
        second.acquire()
    first.release()
    second.acquire()  # the first one ended: its lease is gone
    # A driver on another machine that died: its heartbeat stops; past the expiry, it is dead.
    client.set_tag(second.run_id, "sweeper.heartbeat", str(now_ms() - 120_000))
    second._stop.set()
    third = Lease(client, experiment, "machine-c:300:1", "c", expiry_s=60)
    third.acquire()
    leases = client.search_runs([experiment], "tags.role = 'lease'")
    assert [r.data.tags["sweeper.driver"] for r in leases] == ["machine-c:300:1"]
    third.release()
    assert not client.search_runs([experiment], "tags.role = 'lease'")


@pytest.mark.slow
def test_a_driver_refuses_an_experiment_another_machine_holds_on_a_tracking_server(
    composer,
    tracking_server,  # noqa: F811
    monkeypatch,
):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    overrides = ["task=toy", "seeds=2", "launcher.name=local", "experiment.name=leased"]
    overrides.append(f"tracking.uri={tracking_server}")
    tracker = Tracker(tracking_server, "leased")
    other = Lease(tracker.client, tracker.experiment_id, "machine-b:42:1", "python -m sweeper x")
    other.acquire()
    with pytest.raises(StoreBusy, match=r"driver machine-b:42:1 \(running: python -m sweeper x\)"):
        _sweep(composer, overrides)
    assert not _cell_runs(tracking_server, "leased")  # nothing ran
    other.release()
    result, _ = _sweep(composer, overrides)
    assert result.ok and result.finished == 2
    assert not tracker.client.search_runs([tracker.experiment_id], "tags.role = 'lease'")


@pytest.mark.slow
def test_two_drivers_started_at_once_on_an_interrupted_store_compute_each_cell_once(
    tmp_path, tracking_uri, ray_address
):
    name = "together"
    args = _overrides(
        tracking_uri, name, "seeds=8", "+toy.sleep_s=0.3", f"launcher.address={ray_address}"
    )
    first = _spawn(args, tmp_path)
    try:
        from tests.test_orchestration import _wait_for_finished

        _wait_for_finished(first, tracking_uri, name, 3)
    finally:
        os.killpg(first.pid, signal.SIGKILL)
        first.wait()
    # The same sweep and a different one over some of the same cells, in the same instant.
    drivers = [_spawn(args, tmp_path), _spawn([*args, "seeds=5"], tmp_path)]
    outputs = [d.communicate(timeout=300) for d in drivers]
    codes = sorted(d.returncode for d in drivers)
    assert codes == [0, 4], outputs
    refused = outputs[[d.returncode for d in drivers].index(4)][1]
    assert "another sweeper driver is writing into the store" in refused
    assert "Traceback" not in refused
    runs = _cell_runs(tracking_uri, name)
    assert set(
        Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED").values()
    ) == {1}
    for command in (args, [*args, "seeds=5"]):
        assert _run(command, tmp_path).returncode == 0
    runs = _cell_runs(tracking_uri, name)
    finished = Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 8 and set(finished.values()) == {1}
    assert not _statuses(runs)["RUNNING"]


# --- 3. a run cut off by a second Ctrl-C --------------------------------------------------


def test_a_run_left_running_before_the_tables_mark_is_reaped(composer, tracking_uri):
    """The issue's state after a double Ctrl-C: a cell run RUNNING (params, no metrics),
    created before the table was last rewritten, its driver gone."""
    name = "cutoff"
    overrides = _overrides(tracking_uri, name, "seeds=3", "launcher.name=local")
    first, _ = _sweep(composer, overrides)
    client = MlflowClient(tracking_uri)
    until = int(client.get_run(first.parent_run_id).data.tags["table_until"])
    dead = subprocess.Popen(["true"])
    dead.wait()
    orphan = client.create_run(
        Tracker(tracking_uri, name).experiment_id,
        start_time=until - 5_000,
        tags={
            "cell_key": first.table["cell_key"].iloc[0],
            "mlflow.parentRunId": first.parent_run_id,
            "sweeper.driver": f"{socket.gethostname()}:{dead.pid}:1",
        },
    )
    second, out = _sweep(composer, overrides)
    assert second.reaped == 1 and "set to KILLED" in out
    assert client.get_run(orphan.info.run_id).info.status == "KILLED"


def _break_third_cell(monkeypatch, error: BaseException):
    """Raise ``error`` when the third cell logs its params (its run exists, RUNNING);
    return the original ``MlflowClient.log_batch``."""
    calls = {"n": 0}
    original = MlflowClient.log_batch

    def broken(self, run_id, metrics=(), params=(), tags=(), **kwargs):
        if params:
            calls["n"] += 1
            if calls["n"] == 3:
                raise error
        return original(self, run_id, metrics=metrics, params=params, tags=tags, **kwargs)

    monkeypatch.setattr(MlflowClient, "log_batch", broken)
    return original


def test_a_run_cut_off_while_it_is_logged_is_settled_by_its_own_driver(
    composer, tracking_uri, monkeypatch
):
    """A second Ctrl-C lands between a cell run's creation and its metrics. Through the API
    a batch's runs are committed together (issue #41): the two written whole and the one cut
    off are never committed, and the driver sets them KILLED itself."""
    original = _break_third_cell(monkeypatch, KeyboardInterrupt())
    overrides = _overrides(tracking_uri, "twice", "seeds=5", "launcher.name=local", *API, *ONE)
    result, _ = _sweep(composer, overrides)
    assert result.interrupted and result.exit_code == 130
    runs = _cell_runs(tracking_uri, "twice")
    assert _statuses(runs) == Counter({"KILLED": 3})
    monkeypatch.setattr(MlflowClient, "log_batch", original)
    again, _ = _sweep(composer, overrides)
    assert again.ok and again.skipped == 0 and again.finished == 5
    runs = _cell_runs(tracking_uri, "twice")
    assert set(_current(runs).values()) == {1} and len(_current(runs)) == 5
    assert set(again.table["run_id"]) == {
        r.info.run_id for r in runs if r.info.status == "FINISHED"
    }


@pytest.mark.slow
def test_a_double_ctrl_c_leaves_nothing_running(tmp_path, tracking_uri, ray_address):
    name = "double"
    args = _overrides(
        tracking_uri,
        name,
        "seeds=12",
        "+toy.sleep_s=0.2",
        "tracking.batch_size=2",
        f"launcher.address={ray_address}",
    )
    from tests.test_orchestration import _wait_for_finished

    for attempt in range(3):
        proc = _spawn(args, tmp_path)
        try:
            _wait_for_finished(proc, tracking_uri, name, 3 + 3 * attempt)
            os.killpg(proc.pid, signal.SIGINT)
            time.sleep(0.02)
            os.killpg(proc.pid, signal.SIGINT)
            proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGKILL)
        # The driver settled what it left, or the next start does: never RUNNING for good.
        assert _run([*args, "launcher.name=local", "seeds=1"], tmp_path).returncode == 0
        assert not _statuses(_cell_runs(tracking_uri, name))["RUNNING"]


# --- 5. a store error mid-sweep -----------------------------------------------------------


def test_a_store_error_mid_sweep_stops_cleanly_with_exit_status_3(
    composer, tracking_uri, monkeypatch
):
    full = MlflowException("(sqlite3.OperationalError) database or disk is full")
    original = _break_third_cell(monkeypatch, full)
    overrides = _overrides(tracking_uri, "full", "seeds=5", "launcher.name=local", *API, *ONE)
    result, out = _sweep(composer, overrides)
    assert result.exit_code == 3 and not result.ok
    assert "database or disk is full" in result.store_error
    assert "The MLflow store failed" in out and "database or disk is full" in out
    assert "python -m sweeper task=toy" in out  # the resume command
    assert "0 finished" in out  # the batch was never committed
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("full")
    (parent,) = client.search_runs([experiment.experiment_id], "tags.role = 'sweep'")
    assert parent.info.status == "FAILED"
    runs = _cell_runs(tracking_uri, "full")
    assert _statuses(runs) == Counter({"KILLED": 3})
    monkeypatch.setattr(MlflowClient, "log_batch", original)
    again, _ = _sweep(composer, overrides)
    assert again.ok and again.skipped == 0 and again.finished == 5


@pytest.mark.slow
def test_a_disk_that_fills_up_mid_sweep_ends_the_command_with_status_3(tmp_path):
    """A real full disk: the driver's files may not grow past a limit (RLIMIT_FSIZE)."""
    db = tmp_path / "m.db"
    args = [
        "task=toy",
        "horizon=400",
        "seeds=40",
        "launcher.name=local",
        "tracking.batch_size=4",  # batches commit one after another until the disk is full
        f"tracking.uri=sqlite:///{db}",
    ]
    assert _run([*args, "seeds=1"], tmp_path).returncode == 0
    limit = db.stat().st_size + 400_000

    def small_disk():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (limit, limit))

    done = _run(args, tmp_path, preexec_fn=small_disk)
    assert done.returncode == 3, done.stdout[-2000:] + done.stderr[-2000:]
    assert "The MLflow store failed" in done.stdout
    assert "Traceback" not in done.stderr
    assert "python -m sweeper task=toy" in done.stdout
    finished = _statuses(_cell_runs(f"sqlite:///{db}", "adhoc"))["FINISHED"]
    assert 1 < finished < 40
    again = _run(args, tmp_path)
    assert again.returncode == 0, again.stdout[-2000:]
    runs = _cell_runs(f"sqlite:///{db}", "adhoc")
    finished = Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 40 and set(finished.values()) == {1}
    assert not _statuses(runs)["RUNNING"]


def _break_second_batch(monkeypatch, error: BaseException):
    """The second batch written straight into the database raises ``error`` (before its
    transaction commits)."""
    from sweeper.store.bulk import BulkWriter

    original, calls = BulkWriter._rows, []

    def broken(self, records):
        calls.append(len(records))
        if len(calls) == 2:
            raise error
        return original(self, records)

    monkeypatch.setattr(BulkWriter, "_rows", broken)


def test_a_batch_cut_off_by_a_store_error_or_a_second_ctrl_c_leaves_none_of_its_runs(
    composer, tracking_uri, monkeypatch
):
    """A batch is one transaction: a store error (or a second Ctrl-C) while it is written
    leaves all of its runs or none, and never a RUNNING one."""
    overrides = _overrides(tracking_uri, "batch_cut", "seeds=5", "launcher.name=local",
                           "tracking.batch_size=2")  # fmt: skip
    full = MlflowException("(sqlite3.OperationalError) database or disk is full")
    with monkeypatch.context() as patch:
        _break_second_batch(patch, full)
        result, out = _sweep(composer, overrides)
    assert result.exit_code == 3 and "database or disk is full" in out
    assert _statuses(_cell_runs(tracking_uri, "batch_cut")) == Counter({"FINISHED": 2})
    with monkeypatch.context() as patch:
        _break_second_batch(patch, KeyboardInterrupt())
        result, _ = _sweep(composer, [*overrides, "seeds=7"])
    assert result.interrupted and result.exit_code == 130
    assert _statuses(_cell_runs(tracking_uri, "batch_cut")) == Counter({"FINISHED": 4})
    again, _ = _sweep(composer, [*overrides, "seeds=7"])
    assert again.ok and again.skipped == 4 and again.finished == 3
    runs = _cell_runs(tracking_uri, "batch_cut")
    assert set(_current(runs).values()) == {1} and len(_current(runs)) == 7


# --- 6. an interrupted rerun=true ---------------------------------------------------------


def test_an_interrupted_rerun_leaves_one_current_run_per_cell(composer, tracking_uri, monkeypatch):
    name = "rerun_cut"
    overrides = _overrides(tracking_uri, name, "seeds=3", "launcher.name=local", *API)
    first, _ = _sweep(composer, overrides)
    original = MlflowClient.set_tag

    def cut(self, run_id, key, value, *args, **kwargs):
        if key == "superseded_by":  # killed after the new run FINISHED, before the tag
            raise KeyboardInterrupt
        return original(self, run_id, key, value, *args, **kwargs)

    monkeypatch.setattr(MlflowClient, "set_tag", cut)
    interrupted, _ = _sweep(composer, [*overrides, "rerun=true"])
    assert interrupted.interrupted
    runs = _cell_runs(tracking_uri, name)
    assert max(_current(runs).values()) == 2  # the defect: two current runs of a cell
    monkeypatch.setattr(MlflowClient, "set_tag", original)

    resumed, out = _sweep(composer, overrides)
    assert "re-tagged superseded_by" in out and resumed.skipped == 3
    runs = _cell_runs(tracking_uri, name)
    current = _current(runs)
    assert len(current) == 3 and set(current.values()) == {1}
    newest = {
        r.info.run_id
        for r in runs
        if r.info.status == "FINISHED" and "superseded_by" not in r.data.tags
    }
    assert set(resumed.table["run_id"]) == newest  # the table holds the newest runs
    again, _ = _sweep(composer, [*overrides, "rerun=true"])
    runs = _cell_runs(tracking_uri, name)
    current = _current(runs)
    assert len(current) == 3 and set(current.values()) == {1}
    assert set(again.table["run_id"]) == set(
        r.info.run_id
        for r in runs
        if r.info.status == "FINISHED" and "superseded_by" not in r.data.tags
    )
