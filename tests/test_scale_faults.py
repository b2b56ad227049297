"""Faults at scale (issue #15): the tracking server, or the PostgreSQL database behind it,
restarted in the middle of a 2,000-cell sweep. The sweep waits for the store (saying so),
goes on when it is back, and ends with exactly one FINISHED run per cell. Slow: PostgreSQL
and the server start in about half a minute here, the sweep takes about another."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from collections import Counter
from contextlib import contextmanager
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.servers import (
    finished_runs,
    free_port,
    mlflow_restart,
    pg_restart,
    pg_start,
    pg_stop,
    start_mlflow_server,
    stop,
    without_password,
)

pytestmark = pytest.mark.slow
CELLS = 2000
ROOT = Path(__file__).resolve().parent.parent


def _sweep_with_a_restart(tmp: Path, restart, *extra: str):
    """Start the toy sweep; once 300 cells are in, ``restart()``; return its output, the
    tracking URI and the database."""
    database = pg_start(tmp / "pg", free_port())
    port = free_port()
    server, uri = start_mlflow_server(database, tmp / "artifacts", port=port)
    servers = {"server": server}
    command = [sys.executable, "-m", "sweeper", "task=toy", "horizon=2000", f"seeds={CELLS}",
               f"tracking.uri={uri}", f"tracking.database={database}",
               f"tracking.artifacts_destination={tmp / 'artifacts'}", "tracking.patience_s=120",
               "experiment.name=restart", f"hydra.run.dir={tmp}/hydra", *extra]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    sweep = subprocess.Popen(command, cwd=tmp, env=env, stdout=subprocess.PIPE,
                             stderr=subprocess.STDOUT, text=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while finished_runs(database) < 300 and sweep.poll() is None:
            assert time.monotonic() < deadline, "the sweep recorded no cells"
            time.sleep(0.2)
        restart_at = finished_runs(database)
        restart(servers, database, port, tmp)
        output, _ = sweep.communicate(timeout=600)
        assert sweep.returncode == 0, output[-3000:]
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("restart")
        runs = client.search_runs([experiment.experiment_id], max_results=5000)
    finally:
        if sweep.poll() is None:
            sweep.kill()
        stop(servers["server"])
        pg_stop(tmp / "pg")
    assert 300 <= restart_at < CELLS, "the restart did not land in the middle of the sweep"
    return output, runs


def _restart_server(servers, database, port, tmp) -> None:
    servers["server"] = mlflow_restart(servers["server"], database, tmp / "artifacts", port)


def _restart_postgres(servers, database, port, tmp) -> None:
    pg_restart(tmp / "pg", database)


def _assert_each_cell_once(runs) -> None:
    cells = [r for r in runs if "cell_key" in r.data.tags]
    finished = Counter(r.data.tags["cell_key"] for r in cells if r.info.status == "FINISHED")
    assert len(finished) == CELLS and set(finished.values()) == {1}
    assert not [r for r in runs if r.info.status == "RUNNING" and "cell_key" in r.data.tags]
    (parent,) = [r for r in runs if r.data.tags.get("role") == "sweep"]
    assert parent.info.status == "FINISHED"


@pytest.mark.parametrize(
    "restart", [_restart_server, _restart_postgres], ids=["server", "postgresql"]
)
def test_a_store_restarted_mid_sweep_is_waited_for_and_each_cell_is_recorded_once(restart):
    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as tmp:
        Path(tmp).chmod(0o755)  # PostgreSQL's user must reach its directory inside
        output, runs = _sweep_with_a_restart(Path(tmp), restart)
    assert "the MLflow store does not answer" in output and "retrying in" in output
    _assert_each_cell_once(runs)


# --- issue #27, item 1: one driver per experiment on every store, with fencing ----------


def _spawn(tmp: Path, tag: str, *args: str, host: str | None = None) -> subprocess.Popen:
    """``python -m sweeper`` on the toy family (output in ``tmp/tag.out``); ``host``: under
    another host name (a UTS namespace, as root), so it counts as a driver on another host."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    command = [sys.executable, "-m", "sweeper", "task=toy", "horizon=20", "launcher.name=local",
               f"hydra.run.dir={tmp}/hydra-{tag}", *args]  # fmt: skip
    if host is not None:
        command = ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *command]
    log = open(tmp / f"{tag}.out", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(command, cwd=tmp, env=env, stdout=log, stderr=subprocess.STDOUT)


def _finished_per_cell(uri: str, name: str) -> tuple[Counter, list]:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    runs = client.search_runs([experiment.experiment_id], max_results=10_000)
    finished = Counter(
        r.data.tags["cell_key"]
        for r in runs
        if "cell_key" in r.data.tags and r.info.status == "FINISHED"
    )
    running = [r for r in runs if r.info.status == "RUNNING" and r.data.tags.get("role") != "lease"]
    return finished, running


@contextmanager
def _pg():
    """A PostgreSQL cluster for the ``with`` block: (its directory, its database URI)."""
    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as tmp:
        tmp = Path(tmp)
        tmp.chmod(0o755)
        database = pg_start(tmp / "pg", free_port())
        try:
            yield tmp, database
        finally:
            pg_stop(tmp / "pg")


@contextmanager
def _pg_and_server():
    """A PostgreSQL cluster and an mlflow server on it: (directory, database, server URI)."""
    with _pg() as (tmp, database):
        server, uri = start_mlflow_server(database, tmp / "artifacts", workers=2)
        try:
            yield tmp, database, uri
        finally:
            stop(server)


def test_two_drivers_on_a_postgresql_tracking_uri_never_compute_a_cell_twice():
    """Before: neither took a lock; both exited 0 with hundreds of cells run twice."""
    with _pg() as (tmp, database):
        MlflowClient(database).create_experiment("twin", artifact_location=str(tmp / "art"))
        args = [f"tracking.uri={database}", "experiment.name=twin", "+toy.sleep_s=0.01"]
        procs = [_spawn(tmp, "a", *args, "seeds=300"), _spawn(tmp, "b", *args, "seeds=200")]
        codes = [p.wait(timeout=600) for p in procs]
        outputs = [(tmp / f"{t}.out").read_text() for t in "ab"]
        assert sorted(codes) in ([0, 4], [0, 0]), outputs
        if 4 in codes:
            assert "another sweeper driver is writing" in outputs[codes.index(4)]
        resume = _spawn(tmp, "c", *args, "seeds=300")
        assert resume.wait(timeout=600) == 0, (tmp / "c.out").read_text()[-2000:]
        finished, running = _finished_per_cell(database, "twin")
    assert len(finished) == 300 and set(finished.values()) == {1}
    assert not running


def test_a_paused_driver_that_lost_its_lease_stops_without_writing():
    """A driver on another host, paused past its lease's expiry (SIGSTOP), loses the
    experiment to a second driver; woken, it writes nothing more and stops (exit 4). Before:
    it went on writing, and thousands of cells ended with two FINISHED runs."""
    from sweeper.store.lock import LEASE_EXPIRY_S

    with _pg_and_server() as (tmp, database, uri):
        try:
            args = [f"tracking.uri={uri}", f"tracking.database={database}",
                    f"tracking.artifacts_destination={tmp / 'artifacts'}",
                    "experiment.name=paused", "seeds=400", "+toy.sleep_s=0.02",
                    "tracking.batch_size=10"]  # fmt: skip
            first = _spawn(tmp, "first", *args, host="elsewhere")
            deadline = time.monotonic() + 300
            while finished_runs(database) < 40:
                assert first.poll() is None and time.monotonic() < deadline
                time.sleep(0.2)
            first.send_signal(signal.SIGSTOP)
            time.sleep(LEASE_EXPIRY_S + 5)
            second = _spawn(tmp, "second", *args)
            time.sleep(15)  # it has taken the experiment over (or waits on the paused batch)
            first.send_signal(signal.SIGCONT)
            code_first = first.wait(timeout=600)
            code_second = second.wait(timeout=600)
            out_first = (tmp / "first.out").read_text()
            assert code_second == 0, (tmp / "second.out").read_text()[-3000:]
            assert code_first == 4, out_first[-3000:]
            assert "lost the experiment to another driver" in out_first
            assert not list((tmp / "artifacts").rglob(".cells.*.partial"))
            finished, running = _finished_per_cell(uri, "paused")
        finally:
            if first.poll() is None:
                first.send_signal(signal.SIGCONT)
                first.kill()
    assert len(finished) == 400 and set(finished.values()) == {1}
    assert not running


def test_a_database_password_is_recorded_nowhere():
    """Issue #27, item 4: before, a password in tracking.database went into the parent's
    config.yaml, the lease's sweeper.command tag, the printed resume command and Hydra's
    files. (The database's own password, which it asks for.)"""
    from mlflow.entities import ViewType

    with _pg_and_server() as (tmp, database, uri):
        with_password, (_, secret) = database, without_password(database)
        assert secret
        proc = _spawn(tmp, "run", f"tracking.uri={uri}", f"tracking.database={with_password}",
                      f"tracking.artifacts_destination={tmp / 'artifacts'}",
                      "experiment.name=secret", "seeds=3")  # fmt: skip
        assert proc.wait(timeout=300) == 0, (tmp / "run.out").read_text()[-2000:]
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name("secret")
        runs = client.search_runs([experiment.experiment_id], run_view_type=ViewType.ALL)
        recorded = [str(r.data.tags) + str(r.data.params) for r in runs]
        files = [p for p in tmp.rglob("*") if p.is_file() and "pg" not in p.parts]
        texts = [p.read_bytes().decode(errors="replace") for p in files]
    assert any(r.data.tags.get("role") == "lease" for r in runs)  # the lease's tags are read
    assert not [text for text in recorded if secret in text]
    assert any(p.name == "config.yaml" for p in files)
    assert not [p for p, text in zip(files, texts, strict=True) if secret in text]
