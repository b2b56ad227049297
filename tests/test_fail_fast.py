"""Bad input fails within seconds, in one paragraph that names the setting and the fix,
and a sweep that never started leaves nothing RUNNING behind."""

from __future__ import annotations

import io
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from mlflow import MlflowClient

from sweeper.errors import SweepError
from sweeper.grid import expand
from sweeper.store import tracking
from sweeper.store.tracking import Tracker, resolve_uri
from sweeper.sweep import run_sweep, validate
from sweeper_tasks.bandit_tuning.environments.movielens_data import DatasetFormatError, _parse

ROOT = Path(__file__).resolve().parent.parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _cells(composer, *overrides: str):
    return expand(composer(list(overrides)), composer, list(overrides))


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["seeds=abc"], r"seeds must be a whole number, at least 1 \(seeds=N runs seeds"),
        (["seeds=0"], r"seeds must be a whole number, at least 1"),
        (["algorithm=[linucb,lints]"], r"-m algorithm=linucb,lints, or list them"),
    ],
)
def test_bad_sweep_settings_name_the_key(composer, overrides, message):
    with pytest.raises(SweepError, match=message):
        _cells(composer, *overrides)


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["space.interval=[1]"], r"an interval is two numbers \[low, high\]"),
        (["horizon=1.5"], r"horizon must be a positive whole number of rounds"),
        (["horizon=0"], r"horizon must be a positive whole number of rounds"),
    ],
)
def test_bad_cell_settings_are_refused_before_any_cell_runs(composer, overrides, message):
    with pytest.raises(SweepError, match=message):
        validate(_cells(composer, *overrides))


def _sweep(composer, tracking_uri: str, *overrides: str):
    overrides = ["task=toy", f"tracking.uri={tracking_uri}", "experiment.name=ff", *overrides]
    return run_sweep(composer(overrides), composer, overrides, out=io.StringIO())


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("launcher.max_in_flight=0", r"launcher.max_in_flight must be a whole number, at least 1"),
        ("launcher.cpus_per_cell=0", r"launcher.cpus_per_cell must be a positive number"),
        ("launcher.address=foo:bar", r"launcher.address must be a Ray cluster's host:port"),
    ],
)
def test_bad_launcher_settings_leave_nothing_behind(composer, tracking_uri, override, message):
    with pytest.raises(SweepError, match=message):
        _sweep(composer, tracking_uri, override)
    assert MlflowClient(tracking_uri).get_experiment_by_name("ff") is None


def test_a_cluster_that_does_not_answer_fails_in_seconds(composer, tracking_uri):
    port = _free_port()
    started = time.perf_counter()
    with pytest.raises(SweepError, match=rf"no Ray cluster answers at 127.0.0.1:{port}"):
        _sweep(composer, tracking_uri, f"launcher.address=127.0.0.1:{port}")
    assert time.perf_counter() - started < 15
    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("ff")
    assert not client.search_runs([experiment.experiment_id])  # no parent run, nothing RUNNING


def test_a_tracking_server_that_does_not_answer_fails_in_seconds():
    uri = f"http://127.0.0.1:{_free_port()}"
    started = time.perf_counter()
    with pytest.raises(SweepError, match=rf"no MLflow tracking server answers at {uri}"):
        Tracker(uri, "ff")
    assert time.perf_counter() - started < 10


def test_a_slow_tracking_server_gets_patience_a_silent_one_an_error(monkeypatch):
    """A server that accepts the connection but answers late (a loaded machine) is waited
    for up to SERVER_PATIENCE_S; one that never answers is then refused."""
    monkeypatch.setattr(tracking, "SERVER_TIMEOUT_S", 0.5)
    monkeypatch.setattr(tracking, "SERVER_PATIENCE_S", 2.0)
    with socket.socket() as listener:
        listener.bind(("127.0.0.1", 0))
        listener.listen(8)  # accepts (the kernel does), never answers
        uri = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.perf_counter()
        with pytest.raises(SweepError, match="it did not answer for 2 s"):
            tracking.check_store(uri)
        assert 2.0 <= time.perf_counter() - started < 6


def test_an_unwritable_store_location_is_refused(tmp_path):
    with pytest.raises(SweepError, match=r"cannot create the MLflow store /proc/mlflow.db"):
        Tracker("sqlite:////proc/mlflow.db", "ff")
    with pytest.raises(SweepError, match=r"cannot create the MLflow store"):
        Tracker(f"sqlite:///{tmp_path}/missing/dir/mlflow.db", "ff")


def test_the_uri_given_wins_over_the_environment(monkeypatch):
    monkeypatch.setenv("MLFLOW_TRACKING_URI", "sqlite:///from-env.db")
    assert resolve_uri("sqlite:///given.db") == "sqlite:///given.db"
    assert resolve_uri(None) == "sqlite:///from-env.db"
    monkeypatch.delenv("MLFLOW_TRACKING_URI")
    assert resolve_uri(None) == "sqlite:///mlflow.db"


def test_a_garbage_ratings_file_is_described_not_printed(tmp_path):
    garbage = np.random.default_rng(0).integers(0, 256, 5000, dtype=np.uint8).tobytes()
    with pytest.raises(DatasetFormatError) as info:
        _parse(garbage, tmp_path / "u.data")
    assert "binary data, not text" in str(info.value)
    assert len(str(info.value)) < 600


def _cli(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_the_command_line_says_it_once_without_a_traceback(tmp_path):
    done = _cli("seeds=abc", f"tracking.uri=sqlite:///{tmp_path}/m.db", cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.count("seeds must be a whole number") == 1
    assert "Traceback" not in done.stderr and "Error executing job" not in done.stderr


@pytest.mark.e2e
def test_cells_bigger_than_every_node_are_refused(tmp_path):
    done = _cli(
        "task=toy",
        "launcher.cpus_per_cell=4",
        "launcher.num_cpus=2",
        f"tracking.uri=sqlite:///{tmp_path}/m.db",
        cwd=tmp_path,
    )
    assert done.returncode == 2, done.stdout + done.stderr
    assert "launcher.cpus_per_cell=4 but the largest node has 2 CPUs" in done.stderr
    runs = MlflowClient(f"sqlite:///{tmp_path}/m.db").search_runs(
        [MlflowClient(f"sqlite:///{tmp_path}/m.db").get_experiment_by_name("adhoc").experiment_id]
    )
    assert not runs  # no parent run left RUNNING


@pytest.mark.slow
def test_ctrl_c_while_ray_starts_exits_130_with_the_resume_command(tmp_path):
    uri = f"sqlite:///{tmp_path}/m.db"
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    proc = subprocess.Popen(
        [sys.executable, "-u", "-m", "sweeper", "task=toy", f"tracking.uri={uri}"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    line = ""
    while "results go to" not in line:
        line = proc.stdout.readline()
        assert line or proc.poll() is None, proc.stderr.read()
    time.sleep(1.5)  # Ray is starting
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=90)
    assert proc.returncode == 130, out + err
    assert f"-m sweeper task=toy tracking.uri={uri}" in out  # as typed, -u and all
    assert "Traceback" not in err
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("adhoc")
    assert not client.search_runs([experiment.experiment_id])  # nothing left RUNNING


def test_an_error_inside_the_sweep_never_leaves_its_parent_running(
    composer, tracking_uri, monkeypatch
):
    def broken(cells, launcher, declared=None):
        raise OSError("No space left on device")
        yield  # pragma: no cover

    monkeypatch.setattr("sweeper.sweep.launch", broken)
    with pytest.raises(OSError, match="No space left"):
        _sweep(composer, tracking_uri, "launcher.name=local")
    client = MlflowClient(tracking_uri)
    (parent,) = client.search_runs([client.get_experiment_by_name("ff").experiment_id])
    assert parent.data.tags["role"] == "sweep" and parent.info.status == "FAILED"


def test_a_lost_cell_says_whether_it_ever_started():
    from ray.exceptions import NodeDiedError

    from sweeper.cells import Cell
    from sweeper.launch import _receive, _Slot

    def lost(error):
        raise error
        yield  # pragma: no cover

    cell = Cell({"cell": "sweeper.toy.toy_cell", "seed": 0})
    queued, started = lost(NodeDiedError("the raylet died")), lost(NodeDiedError("the raylet died"))
    in_flight = {queued: _Slot([cell]), started: _Slot([cell], started=time.time())}
    (never,) = _receive(queued, in_flight, max_retries=2)
    (tried,) = _receive(started, in_flight, max_retries=2)
    assert "NodeDiedError (the cell never started): the raylet died" in never.outcome.error
    assert "(after up to 3 attempt(s)): the raylet died" in tried.outcome.error
    assert not in_flight
    # an error that is not Ray's is a fault of the driver's own code: it is raised, not
    # recorded as the cell's failure
    ours = lost(KeyError("node_ip"))
    in_flight[ours] = _Slot([cell])
    with pytest.raises(KeyError, match="node_ip"):
        list(_receive(ours, in_flight, max_retries=2))
