"""Secrets stay where they belong (issue #41, item 5): every form of credential is redacted
wherever the driver records or writes it, a multirun's temporary config is private and gone
even after ``kill -9``, and an embedded Ray listens on 127.0.0.1 only. The tracking servers'
authentication and the recipes' pid files are tests/test_servers_locked.py (slow)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from sweeper.uri import redact

SECRET = "S3cr3t-Pw"


@pytest.mark.parametrize(
    "text",
    [
        f"postgresql+psycopg://postgres:{SECRET}@127.0.0.1:5432/mlflow",
        f"postgresql+psycopg://postgres@127.0.0.1:5432/mlflow?password={SECRET}",
        f"postgresql://u@h/db?sslmode=require&password={SECRET}&connect_timeout=3",
        f"postgresql://u@h/db?sslpassword={SECRET}",
        f"http://127.0.0.1:5000/?token={SECRET}",
        f"redis://:{SECRET}@h:6379",
        f"PGPASSWORD={SECRET} python -m sweeper +exp=smoke",
        f"MLFLOW_TRACKING_PASSWORD={SECRET} RAY_AUTH_TOKEN={SECRET} sweeper",
        f"tracking:\n  uri: http://h:5000\n  password: {SECRET}\n",
        f"auth_token: '{SECRET}'",
    ],
)
def test_every_form_of_credential_is_redacted(text):
    assert SECRET not in redact(text)
    assert "***" in redact(text)


def test_redaction_keeps_what_is_no_secret():
    text = "seeds: 5\ntoken_budget: 3\ncell_key: abc\nuri: postgresql://u@h:5432/db?sslmode=require"
    assert redact(text) == text


def _cell_runs(store: Path) -> int:
    try:
        with sqlite3.connect(store) as db:
            query = "select count(*) from tags where key = 'cell_key'"
            return db.execute(query).fetchone()[0]
    except sqlite3.Error:  # not created yet
        return 0


@pytest.mark.e2e
def test_a_killed_multirun_leaves_no_copy_of_its_config(tmp_path):
    """A ``-m`` sweep whose ``tracking.database`` holds a password (``?password=``, as the
    attack gave it), killed with SIGKILL mid-sweep: Hydra's multirun.yaml (the whole command
    line) is not left in $TMPDIR, and neither the parent run's config.yaml nor any tag (the
    sweep's command) holds the password."""
    tmp, work = tmp_path / "tmp", tmp_path / "work"
    tmp.mkdir(), work.mkdir()
    store = tmp_path / "mlflow.db"
    args = ["-m", "task=toy", "horizon=5", "seed=0,1,2,3,4,5,6,7", "+toy.sleep_s=2",
            "launcher.name=local", "tracking.batch_size=1", f"tracking.uri=sqlite:///{store}",
            f"tracking.database='sqlite:///{store}?password={SECRET}'"]  # fmt: skip
    env = {**os.environ, "TMPDIR": str(tmp)}
    driver = subprocess.Popen(
        [sys.executable, "-m", "sweeper", *args], cwd=work, env=env, start_new_session=True,
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 300
        while _cell_runs(store) < 1 and driver.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        assert driver.poll() is None, "the multirun ended before it could be killed"
        assert _cell_runs(store) >= 1, "no cell was recorded within 300 s"
    finally:
        os.killpg(driver.pid, signal.SIGKILL)
        driver.wait()
    left = [p for p in tmp.rglob("*") if p.is_file()]
    assert not left, f"kill -9 left {left} in $TMPDIR"
    found = [p for p in tmp_path.rglob("*") if p.is_file() and SECRET.encode() in p.read_bytes()]
    assert not found, f"the password is in {found}"
    with sqlite3.connect(store) as db:
        values = [v for (v,) in db.execute("select value from tags")]
    assert values and not [v for v in values if SECRET in v], "a tag holds the password"
    configs = list(tmp_path.rglob("config.yaml"))
    assert configs and all(SECRET not in p.read_text() for p in configs), configs


LISTENING = """
import json, psutil
from sweeper.launch import init_ray
init_ray({"num_cpus": 1})
import ray
ray.get(ray.remote(lambda: 0).remote())  # a worker started too
me = psutil.Process()
found = []
for process in [me, *me.children(recursive=True)]:
    try:
        connections = process.net_connections(kind="inet")
    except psutil.Error:
        continue
    found += [(process.name(), c.laddr.ip, c.laddr.port) for c in connections
              if c.status == psutil.CONN_LISTEN]
print(json.dumps(found))
ray.shutdown()
"""


def test_an_embedded_ray_listens_on_loopback_only(tmp_path):
    """A sweep with no cluster asked for starts Ray on this machine: its GCS, raylet, agents
    and workers listen on 127.0.0.1, never on every interface."""
    with tempfile.TemporaryDirectory(prefix="ray", dir="/tmp") as short:  # a socket's path
        env = {**os.environ, "RAY_TMPDIR": short}  # is at most 107 bytes: not under tmp_path
        done = subprocess.run(
            [sys.executable, "-c", LISTENING], capture_output=True, text=True, timeout=300,
            env=env, cwd=tmp_path,
        )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    listening = json.loads(done.stdout.strip().splitlines()[-1])
    names = {name for name, _, _ in listening}
    assert {"gcs_server", "raylet"} <= names, listening
    exposed = [x for x in listening if x[1] not in ("127.0.0.1", "::ffff:127.0.0.1", "::1")]
    assert not exposed, f"listening beyond loopback: {exposed}"
