"""Every bad input of issue #27 (item 3) is one paragraph naming the setting and its fix,
raised before anything runs: no parent run, nothing RUNNING, no lock file beside a store
that did not exist."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.errors import SweepError
from sweeper.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent


def _sweep(composer, *overrides: str, out=None):
    overrides = ["task=toy", "launcher.name=local", *overrides]
    return run_sweep(composer(overrides), composer, overrides, out=out or io.StringIO())


def _runs(uri: str) -> list:
    client = MlflowClient(uri)
    ids = [e.experiment_id for e in client.search_experiments()]
    return client.search_runs(ids, max_results=1000) if ids else []


BAD = [
    (["cell=nope.nope"], r"cell=nope.nope: no cell function there"),
    (["tracking.uri=ftp://x"], r"tracking.uri=ftp://x: 'ftp' is not a kind of MLflow store"),
    (["tracking.uri=mlflow.db"], r"tracking.uri=sqlite:///mlflow.db \(three slashes"),
    (["tracking.uri=file:///tmp/mlruns"], r"MLflow's file store, which sweeper does not"),
    (["tracking.uri=sqlite://"], r"names no sqlite file"),
    (["experiment.name="], r"experiment.name is empty"),
    (["experiment.name=null"], r"experiment.name is null"),
    ([f"experiment.name={'x' * 300}"], r"experiment.name is 300 characters long"),
    (["experiment.name=../../escaped"], r"is a path out of the artifact store"),
    (["launcher.timeout_s=abc"], r"launcher.timeout_s must be a positive number .* got 'abc'"),
    (["launcher.num_cpus=0"], r"launcher.num_cpus must be a whole number, at least 1"),
    (["launcher.num_cpus=abc"], r"launcher.num_cpus must be a whole number, at least 1"),
    (["horizon=-1"], r"horizon must be a positive whole number of steps, got -1"),
    (["horizon=abc"], r"horizon must be a positive whole number of steps, got 'abc'"),
    (["seeds=10000000"], r"seeds=10000000 alone makes 10,000,000 cells, more than sweep.max_"),
    (
        ["seeds=10", "sweep.grid={horizon:[5,6,7]}", "sweep.max_cells=20"],
        r"this sweep has 30 cells, more than sweep.max_cells=20",
    ),
    (["rerun=maybe"], r"rerun must be a boolean .* rerun=true or rerun=false"),
    (["tracking.direct_writes=sometimes"], r"tracking.direct_writes must be a boolean"),
    (["tracking.database=sqlite:///other.db"], r"not the tracking store's own database"),
    (["tracking.database=http://x:5000"], r"tracking.database=http://x:5000 is not a SQL"),
]


@pytest.mark.parametrize(("overrides", "message"), BAD, ids=[" ".join(o)[:40] for o, _ in BAD])
def test_bad_input_is_one_paragraph_before_anything_runs(
    composer, tmp_path, monkeypatch, overrides, message
):
    monkeypatch.chdir(tmp_path)
    store = f"sqlite:///{tmp_path}/store.db"
    uri = [] if any(o.startswith("tracking.uri=") for o in overrides) else [f"tracking.uri={store}"]
    with pytest.raises(SweepError, match=message) as raised:
        _sweep(composer, *uri, *overrides)
    assert "\n" not in str(raised.value)
    assert not list(tmp_path.iterdir()), "a refused sweep left files behind"


def test_a_bad_input_on_an_existing_store_leaves_nothing_running(composer, tracking_uri):
    with pytest.raises(SweepError, match="experiment.name is 300 characters long"):
        _sweep(composer, f"tracking.uri={tracking_uri}", f"experiment.name={'y' * 300}")
    assert not [r for r in _runs(tracking_uri) if r.info.status == "RUNNING"]


def test_rerun_no_is_false_and_rerun_yes_recomputes(composer, tracking_uri):
    args = [f"tracking.uri={tracking_uri}", "seeds=2", "horizon=5", "experiment.name=bools"]
    assert _sweep(composer, *args).finished == 2
    again = _sweep(composer, *args, "rerun=no")
    assert (again.skipped, again.finished) == (2, 0)
    assert _sweep(composer, *args, "rerun=yes").finished == 2


@pytest.mark.skipif(os.geteuid() != 0, reason="mounting a small tmpfs needs root (docs/faults.md)")
def test_a_full_disk_is_refused_before_a_lock_file_exists(composer, tmp_path):
    disk = tmp_path / "full"  # a real full disk, never a mocked one
    disk.mkdir()
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(disk)],
        capture_output=True,
        text=True,
    )
    assert mounted.returncode == 0, f"as root, mounting a tmpfs failed: {mounted.stderr}"
    try:
        with pytest.raises(SweepError, match=r"kB free, less than the 8 MB .* free disk space"):
            _sweep(composer, f"tracking.uri=sqlite:///{disk}/mlflow.db", "experiment.name=d")
        assert not list(disk.iterdir())
    finally:
        subprocess.run(["umount", str(disk)], check=True)


def test_the_command_line_exits_2_without_a_traceback(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", "task=toy", "cell=nope.nope",
         f"tracking.uri=sqlite:///{tmp_path}/m.db", f"hydra.run.dir={tmp_path}/h"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2, done.stderr[-2000:]
    assert "Traceback" not in done.stdout + done.stderr
    assert "cell=nope.nope: no cell function there" in done.stdout + done.stderr


def test_a_password_in_a_uri_is_never_printed_nor_left_in_hydras_files(tmp_path):
    """Issue #27, item 4: a tracking.database password in the refusal, in Hydra's copies
    of the config and in the resume command."""
    from sweeper.command import sweep_command

    secret = "s3cret-pw"
    database = f"tracking.database=postgresql+psycopg://bob:{secret}@127.0.0.1:1/x"
    assert secret not in sweep_command([database, "seeds=2"]).shell()
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    done = subprocess.run(
        [sys.executable, "-m", "sweeper", "task=toy", database,
         f"tracking.uri=sqlite:///{tmp_path}/m.db", f"hydra.run.dir={tmp_path}/h"],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2 and "bob:***@127.0.0.1" in done.stdout + done.stderr
    assert secret not in done.stdout + done.stderr
    written = [p.read_text() for p in tmp_path.rglob("*.yaml")]  # Hydra's, when it writes
    assert not [text for text in written if secret in text]
