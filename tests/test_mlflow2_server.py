"""A sweep into a tracking server of MLflow's previous major line, 2.22 (issue #37, item 1):
a lab's server is often a release behind the client. The server runs from its own virtual
environment (``.venv-mlflow2``, built by ``make test-range``) on a sqlite store this test
owns; the sweep runs with this package's MLflow through the server's API.

Through the API the sweep finishes every cell, a rerun resumes with none to run, the report
builds, and the printed UI link names the server's experiment. Direct writes
(``tracking.database`` set to the server's database, an MLflow 2.22 schema) are refused in
one paragraph, exit status 2, naming the API path, and leave the database's bytes as they
were. Slow: a minute or two.
"""

from __future__ import annotations

import hashlib
import os
import re
import signal
import sqlite3
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from tests.test_version_range import SMOKE, _cell_runs, _smoke_cells

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
MLFLOW2 = ROOT / ".venv-mlflow2" / "bin"


def _free_port() -> int:
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def server(tmp_path):
    """(its URL, its sqlite database) of an MLflow 2.22 server on 127.0.0.1."""
    if not (MLFLOW2 / "mlflow").exists():
        pytest.fail("no .venv-mlflow2 (MLflow 2.22's server): `make test-range` builds it")
    version = subprocess.run(
        [str(MLFLOW2 / "python"), "-c", "import mlflow; print(mlflow.__version__)"],
        capture_output=True, text=True, check=True,
    ).stdout.strip()  # fmt: skip
    assert version.startswith("2.22."), version
    database, port = tmp_path / "server.db", _free_port()
    command = [
        str(MLFLOW2 / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port),
        "--workers", "1", "--backend-store-uri", f"sqlite:///{database}",
        "--artifacts-destination", str(tmp_path / "artifacts"),
    ]  # fmt: skip
    log = open(tmp_path / "server.log", "w")
    process = subprocess.Popen(command, stdout=log, stderr=log, start_new_session=True)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            try:
                with urllib.request.urlopen(f"{url}/health", timeout=5) as answer:
                    if answer.status == 200:
                        break
            except OSError:
                pass
            assert process.poll() is None, (tmp_path / "server.log").read_text()[-3000:]
            assert time.monotonic() < deadline, "MLflow 2.22's server did not answer in 120 s"
            time.sleep(1)
        yield url, database
    finally:
        os.killpg(process.pid, signal.SIGTERM)
        try:
            process.wait(30)
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
        log.close()


def _run(args: list[str], cwd: Path, timeout_s: float = 900) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MLFLOW_", "RAY_"))}
    return subprocess.run(
        [sys.executable, *args], capture_output=True, text=True, cwd=cwd, env=env,
        timeout=timeout_s,
    )  # fmt: skip


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_a_sweep_through_the_api_of_an_mlflow_2_server_resumes_and_reports(server, tmp_path):
    url, database = server
    sweep = ["-m", "sweeper", "+exp=smoke", f"tracking.uri={url}"]
    first = _run(sweep, tmp_path)
    assert first.returncode == 0, (first.stdout + first.stderr)[-5000:]
    runs, cells = _cell_runs(database), _smoke_cells()
    assert len(runs) == cells and set(runs.values()) == {"FINISHED"}, runs

    link = re.search(rf"open ({re.escape(url)}/#/experiments/(\d+)/runs\S*)", first.stdout)
    assert link, first.stdout[-3000:]
    with sqlite3.connect(database) as db:
        (name,) = db.execute(
            "select name from experiments where experiment_id = ?", (int(link.group(2)),)
        ).fetchone()
    assert name == "smoke", f"the printed link {link.group(1)} opens experiment {name!r}"

    again = _run(sweep, tmp_path)
    assert again.returncode == 0, (again.stdout + again.stderr)[-5000:]
    assert f"0 finished, 0 failed, {cells} skipped" in again.stdout, again.stdout[-3000:]
    assert _cell_runs(database) == runs

    out = tmp_path / "report"
    report = _run(["-m", "sweeper.report", "smoke", "--tracking-uri", url, "--out", str(out)],
                  tmp_path, 600)  # fmt: skip
    assert report.returncode == 0, (report.stdout + report.stderr)[-5000:]
    assert (out / "index.html").is_file()
    text = "\n".join(p.read_text() for p in sorted(out.glob("*.md"))).lower()
    assert all(a.lower() in text for a in ("linucb", "lints")), text[:2000]

    before = _digest(database)
    direct = _run(
        [*sweep, f"tracking.database=sqlite:///{database}", f"seeds={SMOKE['seeds'] + 1}"], tmp_path
    )
    assert direct.returncode == 2, (direct.stdout + direct.stderr)[-5000:]
    message = direct.stderr.strip()
    assert "Traceback" not in message and message.count("\n") == 0, message
    assert "2.22" in message or "schema" in message, message
    assert "tracking.database" in message and "API" in message, message
    assert _digest(database) == before, "the refused direct writes changed the database"
