"""The README's local-cluster recipe, run as written on this machine (slow: ~2-4 min here).

A real head and a worker started with ``ray start`` (token authentication on, as Ray 2.60
enables it), an MLflow server on 127.0.0.1 with a sqlite store, and ``ray job submit`` with
the runtime environment the README gives (``--working-dir .``, ``py_executable``, the
tracking URI and ``SWEEPER_DATA_DIR``). The first submission is stopped with
``ray job stop`` while it runs, the same command is submitted again, and MLflow must end with
exactly one FINISHED run per cell. The commands are the README's block, read from
README.md (``RECIPE``) with this test's ports and paths, so the README cannot drift from what
is tested. Everything started here is stopped at the end, even on failure: MLflow by its pid,
Ray with ``ray stop`` on this test's own ``--temp-dir`` (other Ray instances on the machine
are left alone).
"""

from __future__ import annotations

import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections import Counter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def recipe_commands() -> dict[str, str]:
    """The README's local-cluster block: each command line (continuations joined) by its
    leading ``# <name>:`` comment."""
    text = (ROOT / "README.md").read_text()
    block = re.search(r"<!-- local-cluster recipe -->\s*```bash\n(.*?)```", text, re.S)
    assert block, "README.md lost its local-cluster recipe block"
    commands: dict[str, str] = {}
    name = None
    for line in block.group(1).replace("\\\n", " ").splitlines():
        line = line.strip()
        if line.startswith("# ") and line.endswith(":"):
            name = line[2:-1]
        elif line and name:
            commands[name] = (commands.get(name, "") + "\n" + line).strip()
    return commands


def _shell(command: str, env: dict[str, str], cwd: Path, timeout: float = 300):
    return subprocess.run(
        ["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout
    )


def _wait(predicate, timeout: float, what: str, step: float = 1.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def test_the_readme_recipe_submits_stops_and_resubmits_on_a_two_node_cluster(tmp_path):
    commands = recipe_commands()
    temp_dir = Path(tempfile.mkdtemp(prefix="rtc", dir="/tmp"))  # short: Ray's socket paths
    head_port, dashboard_port, mlflow_port = _free_port(), _free_port(), _free_port()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
    env.update(
        PATH=f"{BIN}:{env['PATH']}",  # `ray` and `mlflow` of this venv, as `.venv/bin/...`
        HEAD="127.0.0.1",
        HEAD_PORT=str(head_port),
        DASHBOARD_PORT=str(dashboard_port),
        MLFLOW_PORT=str(mlflow_port),
        RAY_TEMP_DIR=str(temp_dir),
        MLFLOW_DIR=str(tmp_path / "mlflow"),
        RAY_AUTH_MODE="token",
        RAY_AUTH_TOKEN=secrets.token_hex(16),  # this test's own token, not ~/.ray/auth_token
        SWEEPER_DATA_DIR=str(tmp_path / "datasets"),
        VENV=str(BIN.parent),
        CHECKOUT=str(ROOT),
    )
    (tmp_path / "mlflow").mkdir()
    (tmp_path / "datasets").mkdir()
    mlflow = None
    try:
        for step in ("head", "worker"):
            done = _shell(commands[step], env, ROOT, timeout=180)
            assert done.returncode == 0, f"{step}: {done.stdout[-2000:]}{done.stderr[-3000:]}"
        mlflow = subprocess.Popen(
            ["bash", "-c", f"exec {commands['mlflow']}"],
            env=env,
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=open(tmp_path / "mlflow.log", "w"),  # noqa: SIM115
            start_new_session=True,
        )
        uri = f"http://127.0.0.1:{mlflow_port}"
        _wait(lambda: _healthy(uri), 120, "the MLflow server")
        nodes = _shell(f"{BIN}/ray status --address=127.0.0.1:{head_port}", env, ROOT)
        assert nodes.stdout.count("node_") >= 2, nodes.stdout + nodes.stderr

        submit = commands["submit"].replace("--address", "--no-wait --address", 1)
        first = _shell(submit, env, ROOT)
        assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
        job = re.search(r"raysubmit_\w+", first.stdout + first.stderr).group(0)
        jobs = f"{BIN}/ray job --address=http://127.0.0.1:{dashboard_port}"
        _wait(lambda: _finished_cells(uri) >= 2, 240, "two cells of the first submission")
        stopped = _shell(f"{jobs} stop {job}", env, ROOT, timeout=120)
        assert stopped.returncode == 0, stopped.stdout + stopped.stderr
        _wait(lambda: _status(jobs, job, env) in ("STOPPED", "FAILED"), 120, "the job to stop")
        partial = _finished_cells(uri)
        assert partial < 18, "the first submission was stopped before the end"

        second = _shell(commands["submit"], env, ROOT, timeout=900)
        logs = second.stdout + second.stderr
        assert second.returncode == 0, logs[-4000:]
        assert f"{partial} already finished" in logs or "already finished" in logs, logs[-3000:]
    finally:
        if mlflow is not None:
            os.killpg(mlflow.pid, signal.SIGTERM)
            mlflow.wait(timeout=30)
        _shell(f"{BIN}/ray stop --force", {**env, "RAY_TMPDIR": str(temp_dir)}, ROOT)
        _stop_ray(temp_dir, env)

    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("smoke")
    runs = client.search_runs([experiment.experiment_id], max_results=1000)
    cells = [r for r in runs if "cell_key" in r.data.tags]
    finished = Counter(r.data.tags["cell_key"] for r in cells if r.info.status == "FINISHED")
    assert len(finished) == 18 and set(finished.values()) == {1}, finished
    assert not [r for r in cells if r.info.status == "RUNNING"]
    assert len({r.data.tags["ray_node_id"] for r in cells}) == 2, "cells ran on both nodes"
    shutil.rmtree(temp_dir, ignore_errors=True)


def _healthy(uri: str) -> bool:
    try:
        with urllib.request.urlopen(f"{uri}/health", timeout=2) as response:
            return response.status == 200
    except OSError:
        return False


def _finished_cells(uri: str) -> int:
    from mlflow import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("smoke")
    if experiment is None:
        return 0
    runs = client.search_runs(
        [experiment.experiment_id], "attributes.status = 'FINISHED'", max_results=1000
    )
    return sum("cell_key" in r.data.tags for r in runs)


def _status(jobs: str, job: str, env: dict[str, str]) -> str:
    done = _shell(f"{jobs} status {job}", env, ROOT, timeout=60)
    found = re.search(r"status: (\w+)", done.stdout + done.stderr)
    return found.group(1) if found else ""


def _stop_ray(temp_dir: Path, env: dict[str, str]) -> None:
    """Kill the raylets, GCS and workers of this test's session (found by its temp dir)."""
    pids = subprocess.run(
        ["pgrep", "-f", str(temp_dir)], capture_output=True, text=True
    ).stdout.split()
    for pid in pids:
        try:
            os.kill(int(pid), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            pass
    json.dumps(env)  # env stays referenced for debugging on failure
