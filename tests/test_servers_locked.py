"""The tracking servers of ``make tracking-server``, cluster.yaml and cluster-local.yaml are
locked to their owner (issue #41, item 5): MLflow's basic authentication with credentials
made into 0600 files, the driver using them; a recipe started again finds its own pid file
(another user's server is no reason not to start); PostgreSQL keeps fsync on. Real servers,
started and stopped here by their process id (slow: about a minute each, ``make
test-cluster``)."""

from __future__ import annotations

import base64
import os
import re
import signal
import sqlite3
import stat
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest
import yaml

from sweeper.server_auth import read_credentials
from sweeper.servers import free_port, postgres

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
START_S = 400  # mlflow server with its auth app, on a loaded 2-core machine
SEARCH = "/api/2.0/mlflow/experiments/search?max_results=5"


def _server(command: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    return subprocess.Popen(
        command, stdout=log.open("w"), stderr=subprocess.STDOUT, env=env,
        start_new_session=True,
    )  # fmt: skip


def _uri_of(log: Path, process: subprocess.Popen) -> str:
    """The URI a ``python -m sweeper.servers`` prints once its server answers."""
    deadline = time.monotonic() + START_S
    while time.monotonic() < deadline:
        found = re.search(r"MLFLOW_TRACKING_URI=(\S+)", log.read_text())
        if found:
            return found[1]
        assert process.poll() is None, log.read_text()
        time.sleep(1)
    raise AssertionError(f"no server within {START_S} s: {log.read_text()}")


def _stop(process: subprocess.Popen) -> None:
    """SIGTERM to the process group this test started, SIGKILL if it is still there."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        try:
            os.killpg(process.pid, sig)
            process.wait(timeout=30)
            return
        except ProcessLookupError:
            return
        except subprocess.TimeoutExpired:
            continue


def _status(uri: str, user: str | None = None, password: str | None = None) -> int:
    request = urllib.request.Request(uri + SEARCH)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as err:
        return err.code


def _private(path: Path, mode: int = 0o600) -> bool:
    return stat.S_IMODE(path.stat().st_mode) == mode


def test_the_tracking_server_asks_for_a_password_and_the_driver_has_it(tmp_path):
    home, directory = tmp_path / "home", tmp_path / "mlflow"
    home.mkdir()
    env = {**os.environ, "HOME": str(home)}  # this test's ~/.mlflow, never the machine's
    command = [sys.executable, "-m", "sweeper.servers", "--dir", str(directory), "--workers",
               "1", "--port", str(free_port())]  # fmt: skip
    server = _server(command, tmp_path / "server.log", env)
    try:
        uri = _uri_of(tmp_path / "server.log", server)
        assert _status(uri) == 401, "a request without a user and password was answered"
        user, password = read_credentials(directory / "credentials")
        assert _status(uri, user, "guess") == 401
        assert _status(uri, user, password) == 200
        assert _private(directory / "credentials") and _private(directory / "auth", 0o700)
        assert all(_private(p) for p in (directory / "auth").iterdir())
        assert _private(home / ".mlflow" / "credentials")
        assert read_credentials(home / ".mlflow" / "credentials") == (user, password)

        again = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
        assert again.returncode == 0 and "already runs" in again.stdout, again
        assert f"process {server.pid}" in again.stdout, again.stdout

        sweep = [sys.executable, "-m", "sweeper", "task=toy", "horizon=5", "seeds=2",
                 "launcher.name=local", f"tracking.uri={uri}"]  # fmt: skip
        done = subprocess.run(sweep, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=600)  # fmt: skip
        assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
        with sqlite3.connect(directory / "mlflow.db") as db:
            query = "select count(*) from runs r join tags t on t.run_uuid = r.run_uuid "
            query += "where t.key = 'cell_key' and r.status = 'FINISHED'"
            assert db.execute(query).fetchone()[0] == 2
        assert _private(directory / "mlflow.db"), "the server's store is readable by others"
    finally:
        _stop(server)


def _recipe_server(name: str) -> str:
    """The command a cluster recipe starts its tracking server with."""
    config = yaml.safe_load((ROOT / name).read_text())
    (command,) = [c for c in config["head_start_ray_commands"] if "mlflow" in c]
    return command


def test_a_recipe_starts_its_own_server_beside_another_users(tmp_path):
    """cluster-local.yaml's server command, run on this machine while another tracking
    server (another user's, say) runs: it starts its own; run again, it starts nothing."""
    env = {**os.environ, "HOME": str(tmp_path / "home")}
    elsewhere = [sys.executable, "-m", "sweeper.servers", "--dir", str(tmp_path / "other"),
                 "--workers", "1", "--port", str(free_port())]  # fmt: skip
    other = _server(elsewhere, tmp_path / "other.log", env)
    ours = None
    try:
        _uri_of(tmp_path / "other.log", other)
        port = free_port()
        command = _recipe_server("cluster-local.yaml")
        command = command.replace("/opt/sweeper/venv/bin/python", sys.executable)
        command = command.replace("/opt/sweeper", str(tmp_path / "opt"))
        command = command.replace("--port 5000", f"--port {port} --workers 1")
        command = command.replace("nohup ", "exec ").replace(" &)", ")")
        ours = subprocess.Popen(["bash", "-c", command], env=env, start_new_session=True)
        log = tmp_path / "opt" / "mlflow" / "server.log"
        deadline = time.monotonic() + START_S
        while not (log.exists() and "MLFLOW_TRACKING_URI" in log.read_text()):
            assert ours.poll() is None, log.read_text() if log.exists() else "no log"
            assert time.monotonic() < deadline, "the recipe's server did not start"
            time.sleep(1)
        assert f"127.0.0.1:{port}" in log.read_text()
        again = subprocess.run(["bash", "-c", command], env=env, timeout=120)
        assert again.returncode == 0 and "already runs" in log.read_text()
    finally:
        for process in (ours, other):
            if process is not None:
                _stop(process)


def test_postgresql_keeps_fsync_on():
    """The recipes' production store: a committed batch survives a power cut."""
    import sqlalchemy as sa

    with (
        tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg,  # reachable by postgres
        postgres(Path(pg)) as uri,
    ):
        engine = sa.create_engine(uri)
        with engine.connect() as connection:
            settings = {k: connection.execute(sa.text(f"show {k}")).scalar()
                        for k in ("fsync", "synchronous_commit", "full_page_writes")}  # fmt: skip
        engine.dispose()
    assert settings == {"fsync": "on", "synchronous_commit": "on", "full_page_writes": "on"}
