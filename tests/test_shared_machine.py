"""docs/clusters.md's shared-machine recipe, run as written beside another Ray that this test
starts (issue #37, item 5; slow: a few minutes here, ``make test-cluster``).

The other Ray holds ports of its own; the recipe's preflight, given one of them, names it
(exit status 2) before anything starts; with free ports the recipe's head starts on its own
ports and ``--temp-dir``, a sweep submitted to it finishes, and the recipe's teardown stops
this head's processes and leaves the other Ray running. The commands are the page's block
(``RECIPE``), with this test's ports and paths.
"""

from __future__ import annotations

import os
import re
import secrets
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from sweeper.raynode import DEFAULTS, free_port_any, processes_of, stop, taken
from tests.test_cluster_submit import recipe_commands

pytestmark = pytest.mark.slow
ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent
RECIPE_PORTS = ("6390", "8275", "52375", "9011")
TOY = "task=toy seeds=3 horizon=5"


def _shell(script: str, env: dict[str, str], timeout: float = 600):
    return subprocess.run(["bash", "-c", script], env=env, cwd=ROOT, capture_output=True,
                          text=True, timeout=timeout)  # fmt: skip


def test_the_shared_machine_recipe_runs_beside_another_ray(tmp_path):
    commands = recipe_commands("shared-machine")
    other_dir = Path(tempfile.mkdtemp(prefix="rto", dir="/tmp"))  # short: Ray's socket paths
    ours_dir = Path(tempfile.mkdtemp(prefix="rts", dir="/tmp"))
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
    env["RAY_AUTH_TOKEN"] = secrets.token_hex(16)  # this test's own token
    # The other Ray on Ray's default ports (one already held, by a Ray embedded in another
    # user's process say, moves to a free one: that Ray's own agent would fail on it).
    other = {name: free_port_any() if taken(port) else port for name, port in DEFAULTS.items()}
    other_start = f"RAY_AUTH_MODE=token {BIN}/ray start --head --num-cpus=1 --temp-dir={other_dir} "
    other_start += " ".join(f"--{name}={port}" for name, port in other.items())
    settings = commands["settings"].replace("/tmp/ray-$USER-sweeper", str(ours_dir))

    def ported(command: str, ports: dict[str, int]) -> str:
        for default, port in ports.items():
            command = re.sub(rf"(?<=[:=\s]){default}\b", str(port), command)
        return command

    try:
        started = _shell(other_start, env, timeout=300)
        assert started.returncode == 0, started.stdout[-2000:] + started.stderr[-2000:]

        # A recipe whose agent port is the other Ray's: the preflight names it, nothing starts.
        clash = {"52375": other["dashboard-agent-listen-port"]}
        check = _shell(f"{ported(settings, clash)}\n{commands['preflight']}", env, timeout=120)
        assert check.returncode == 2, check.stdout + check.stderr
        named = (
            f"port {other['dashboard-agent-listen-port']} (--dashboard-agent-listen-port) is taken"
        )
        assert named in check.stderr, check.stderr
        assert len(check.stderr.strip().splitlines()) == 1, check.stderr  # one paragraph
        assert not processes_of(ours_dir)

        # The recipe as written, its own four ports beside the other Ray's defaults.
        ports = {default: int(default) for default in RECIPE_PORTS}
        ours = ported(settings, ports)
        check = _shell(f"{ours}\n{commands['preflight']}", env, timeout=120)
        assert check.returncode == 0, check.stdout + check.stderr
        head = _shell(f"{ours}\n{commands['head']} --num-cpus=1", env, timeout=300)
        assert head.returncode == 0, head.stdout[-2000:] + head.stderr[-3000:]

        store = tmp_path / "mlflow.db"
        submit = ported(commands["submit"], ports).replace("+exp=smoke", TOY)
        submit = submit.replace("sqlite:///$PWD/mlflow.db", f"sqlite:///{store}")
        done = _shell(f"{ours}\n{submit}", env, timeout=900)
        assert done.returncode == 0, (done.stdout + done.stderr)[-4000:]
        with sqlite3.connect(store) as db:
            query = "select count(*) from runs r join tags t on t.run_uuid = r.run_uuid "
            query += "where t.key = 'cell_key' and r.status = 'FINISHED'"
            assert db.execute(query).fetchone()[0] == 3

        mine, theirs = processes_of(ours_dir), processes_of(other_dir)
        assert mine and theirs
        down = _shell(f"{ours}\n{commands['teardown']}", env, timeout=120)
        assert down.returncode == 0, down.stdout + down.stderr
        assert not processes_of(ours_dir), "the teardown left processes of this head"
        assert set(theirs) <= set(processes_of(other_dir)), "the teardown stopped the other Ray"
        status = f"RAY_AUTH_MODE=token {BIN}/ray status --address=127.0.0.1:{other['port']}"
        status = _shell(status, env, 120)
        assert status.returncode == 0, status.stdout + status.stderr
    finally:
        for directory in (ours_dir, other_dir):
            stop(directory)
            assert not processes_of(directory), f"Ray processes of {directory} survived"
