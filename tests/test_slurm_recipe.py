"""The Slurm batch script ``sweeper-slurm`` writes (sweeper/slurm.py, sweeper/slurm_ray.py),
checked without a Slurm: its directives, its shell syntax, the overrides as the driver
receives them, the free ports it gives Ray, and the refusals. tests/test_slurm.py runs it
on a real Slurm (slow)."""

from __future__ import annotations

import re
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from sweeper import raynode, slurm, slurm_ray

TRICKY = ["+exp=smoke", "sweep.grid.dataset=[simulation,movielens]", "experiment.description='a b'"]


def _write(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess, Path]:
    out = tmp_path / "sweep.sbatch"
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.slurm", "--out", str(out), *args],
        capture_output=True,
        text=True,
        cwd=tmp_path,
    )
    return done, out


def test_the_script_asks_for_the_allocation_and_the_stop_signal(tmp_path):
    done, script = _write(
        tmp_path, "--tracking-uri", "http://login1:5000", "--nodes", "3", "--cpus-per-node",
        "8", "--time", "2:00:00", "--partition", "cpu", "--sbatch=--mem=16G", "--", *TRICKY,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    assert f"sbatch {script}" in done.stdout
    text = script.read_text()
    directives = re.findall(r"^#SBATCH (\S+)$", text, re.M)
    assert directives == [
        "--job-name=sweeper-smoke", "--nodes=3", "--ntasks-per-node=1", "--cpus-per-task=8",
        "--time=2:00:00", f"--output={tmp_path}/sweeper-smoke-%j.out", "--signal=B:TERM@120",
        "--partition=cpu", "--mem=16G",
    ]  # fmt: skip
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0
    assert "export MLFLOW_TRACKING_URI=http://login1:5000" in text
    assert f"PY={sys.executable}" in text and "export RAY_AUTH_MODE=token" in text
    assert "ray stop" not in text  # it would stop every Ray of the user on the node


def test_the_driver_receives_the_overrides_as_typed(tmp_path):
    done, script = _write(
        tmp_path, "--tracking-uri", "http://h:5000", "--database", "postgresql://u@h/m",
        "--", *TRICKY,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    (line,) = [x for x in script.read_text().splitlines() if x.startswith("OVERRIDES=(")]
    echoed = subprocess.run(
        ["bash", "-c", f'{line}\nprintf "%s\\n" "${{OVERRIDES[@]}}"'],
        capture_output=True,
        text=True,
    ).stdout.splitlines()
    assert echoed == [*TRICKY, "tracking.database=postgresql://u@h/m"]


def test_whole_nodes_unless_cpus_are_given(tmp_path):
    done, script = _write(tmp_path, "--tracking-uri", "http://h:5000", "--", "+exp=smoke")
    assert done.returncode == 0, done.stderr
    assert "#SBATCH --exclusive" in script.read_text()


def test_without_a_tracking_server_it_says_how_to_start_one(tmp_path):
    done, script = _write(tmp_path, "--", "+exp=smoke")
    assert done.returncode == 1 and not script.exists()
    assert "--tracking-uri" in done.stderr and "make tracking-server" in done.stderr


def test_a_sqlite_store_on_nfs_is_warned_when_the_script_is_written(tmp_path, monkeypatch, capsys):
    table = tmp_path / "mountinfo"
    table.write_text(f"41 1 0:45 / {tmp_path}/home rw - nfs4 fs:/export/home rw\n")
    monkeypatch.setattr("sweeper.nfs.MOUNTINFO", table)  # the kernel's table, simulated
    monkeypatch.chdir(tmp_path)
    uri = f"sqlite:///{tmp_path}/home/mlflow.db"
    assert slurm.main(["--tracking-uri", uri, "--out", "s.sbatch", "--", "+exp=smoke"]) == 0
    assert "sqlite file on a network file system (nfs4" in capsys.readouterr().err


def test_every_ray_port_is_its_own_and_free():
    head = slurm_ray.start_flags(head=True)
    ports = [int(flag.split("=")[1]) for flag in head if flag.split("=")[1].isdigit()]
    assert len(ports) == len(set(ports)) == len(slurm_ray.HEAD_PORTS + slurm_ray.NODE_PORTS)
    assert head[0].startswith("--port=") and "--include-dashboard=false" in head
    for port in ports:
        with socket.socket() as sock:
            sock.bind(("", port))  # free when chosen (taken since only by a race)
    assert not any(flag.startswith("--port=") for flag in slurm_ray.start_flags(head=False))


def test_waiting_for_a_head_that_never_answers_gives_up_in_time(capsys):
    port = slurm_ray.free_port_any()
    started = time.monotonic()
    assert slurm_ray.wait_for_nodes(f"127.0.0.1:{port}", 1, timeout_s=1.5) == 1
    assert time.monotonic() - started < 10
    assert f"no Ray head answers at 127.0.0.1:{port}" in capsys.readouterr().out


def test_ray_ports_are_chosen_where_no_outgoing_connection_can_take_them():
    # CI once lost a head: its GCS port, chosen free in the kernel's ephemeral range, was
    # taken by a connection opened in the second before `ray start` bound it
    low, high = map(int, raynode.EPHEMERAL.read_text().split())
    ports = [int(flag.split("=")[1]) for flag in slurm_ray.start_flags(head=True) if "port" in flag]
    assert all(raynode.WORKER_PORTS["max-worker-port"] < port < low for port in ports), ports
    with socket.create_server(("127.0.0.1", 0)) as server:  # the premise: a client's port
        with socket.create_connection(server.getsockname()) as outgoing:
            assert low <= outgoing.getsockname()[1] <= high


@pytest.mark.parametrize("reaped", [True, False], ids=["reaped", "zombie"])
def test_a_head_step_that_ends_before_answering_is_said_at_once(capsys, reaped):
    step = subprocess.Popen([sys.executable, "-c", "pass"])
    if reaped:
        step.wait()
    else:
        while Path(f"/proc/{step.pid}/stat").read_text().rpartition(")")[2].split()[0] != "Z":
            time.sleep(0.05)  # exited, not yet reaped: what the batch shell's srun is
    port = slurm_ray.free_port_any()
    started = time.monotonic()
    status = slurm_ray.wait_for_nodes(f"127.0.0.1:{port}", 1, timeout_s=60, step=step.pid)
    assert status == slurm_ray.HEAD_EXITED == 3
    assert time.monotonic() - started < 10
    assert "the Ray head exited before it answered" in capsys.readouterr().out
    step.wait()


def test_a_running_head_step_is_waited_for(capsys):
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"]) as step:
        port = slurm_ray.free_port_any()
        status = slurm_ray.wait_for_nodes(f"127.0.0.1:{port}", 1, timeout_s=1.5, step=step.pid)
        step.kill()
    assert status == slurm_ray.NOT_JOINED
    assert "no Ray head answers" in capsys.readouterr().out


def test_a_node_slurm_does_not_say_is_resolved_by_name(monkeypatch, tmp_path):
    (tmp_path / "slurm.conf").write_text("ClusterName=none\n")  # scontrol fails at once
    monkeypatch.setenv("SLURM_CONF", str(tmp_path / "slurm.conf"))
    assert slurm_ray.node_address("localhost") == socket.gethostbyname("localhost")


def test_the_data_directory_is_the_one_given_else_the_checkouts(tmp_path, monkeypatch):
    monkeypatch.delenv("SWEEPER_DATA_DIR", raising=False)
    recipe = slurm.Recipe(["+exp=smoke"], "http://h:5000", workdir=str(tmp_path))
    assert slurm._data_line(recipe).startswith("# no data directory given")
    (tmp_path / ".cache" / "datasets").mkdir(parents=True)
    assert slurm._data_line(recipe) == f"export SWEEPER_DATA_DIR={tmp_path}/.cache/datasets"
    recipe.data_dir = str(tmp_path / "data dir")
    assert slurm._data_line(recipe) == f"export SWEEPER_DATA_DIR='{tmp_path}/data dir'"
