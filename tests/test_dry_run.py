"""``--dry-run``: the grid by axis, what the store holds FINISHED and the time left; no Ray,
no parent run, nothing written (a store that does not exist is not created)."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.dryrun import COSTS
from sweeper.progress import format_duration
from sweeper.sweep import run_sweep

SMALL = ["+exp=smoke", "horizon=120"]


def _cli(*args: str, cwd: Path, **extra: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.update(extra)
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


def test_a_dry_run_of_a_new_store_creates_nothing(tmp_path):
    store = tmp_path / "mlflow.db"
    done = _cli(*SMALL, f"tracking.uri=sqlite:///{store}", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "18 cells: seed 3 x algorithm 2 x tuner 3" in done.stdout, done.stdout
    assert "0 already FINISHED" in done.stdout and "18 to run" in done.stdout
    assert "priced by the bench's measured cells of smoke" in done.stdout, done.stdout
    assert "horizon=120 change the cells it timed" in done.stdout  # said, not hidden
    assert "data: no data file to read" in done.stdout
    assert not store.exists() and sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.e2e
def test_a_dry_run_counts_what_is_done_and_prices_the_rest(composer, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    overrides = [*SMALL, "algorithm=linucb", "launcher.name=local", f"tracking.uri={uri}"]
    assert run_sweep(composer(overrides), composer, overrides, out=io.StringIO()).finished == 9
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("smoke").experiment_id
    before = len(client.search_runs([experiment]))

    done = _cli(*SMALL, f"tracking.uri={uri}", "launcher.num_cpus=3", "--dry-run", cwd=tmp_path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "9 already FINISHED" in done.stdout and "9 to run" in done.stdout, done.stdout
    # LinTS has no finished run of its own: its cells are priced by the median of all.
    estimate = re.search(
        r"time left: about (\S+) on 3 CPUs \(priced by the store's durations: (\d+) of 9 cells",
        done.stdout,
    )
    assert estimate and estimate[2] == "0", done.stdout
    assert len(client.search_runs([experiment])) == before, "a dry run wrote runs"

    with_linucb = _cli(*SMALL, "algorithm=linucb", "seeds=4", f"tracking.uri={uri}", "--dry-run",
                       cwd=tmp_path)  # fmt: skip
    assert "9 already FINISHED" in with_linucb.stdout and "3 to run" in with_linucb.stdout
    assert "store's durations: 3 of 3 cells by finished runs of their kind" in with_linucb.stdout


# --- a dry run reads no data and needs no network (issue 39, item 5) -------------------

OFFLINE = {"http_proxy": "http://127.0.0.1:9", "https_proxy": "http://127.0.0.1:9"}
"""A proxy nothing listens on: any download fails at once."""


def test_a_dry_run_of_main_in_a_fresh_clone_reads_no_data_and_prices_by_the_bench(tmp_path):
    """Offline, with no MovieLens ratings: exit 0, the data said MISSING (and what the
    sweep will do about it), nothing downloaded, and the time the bench's shipped cell
    costs give (docs/running.md quotes it)."""
    data = tmp_path / "data"
    data.mkdir()
    store = tmp_path / "mlflow.db"
    done = _cli("+exp=main", f"tracking.uri=sqlite:///{store}", "launcher.num_cpus=2",
                "--dry-run", cwd=tmp_path, SWEEPER_DATA_DIR=str(data), **OFFLINE)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"data: MovieLens 100K ratings: MISSING at {data}; downloaded from" in done.stdout
    assert not list(data.iterdir()) and not store.exists()
    costs = json.loads(COSTS.read_text())
    seconds = 1120 * costs["experiments"]["main"]["mean_s"] / 2 + 1120 * costs["overhead_s"]
    assert f"time left: about {format_duration(seconds)} on 2 CPUs (priced by the bench's " \
        "measured cells of main" in done.stdout, done.stdout  # fmt: skip
    assert 8 * 60 <= seconds <= 10 * 60  # docs/running.md: ~9 min


@pytest.mark.e2e
def test_data_that_is_there_is_said_present_and_not_read(tmp_path):
    """A ratings file that is not ratings at all: a sweep would refuse it before any cell
    runs; the dry run only says it is there."""
    data = tmp_path / "data"
    data.mkdir()
    (data / "ml-100k.inter").write_text("not ratings\n")
    done = _cli("+exp=main", "algorithm=linucb", "seeds=2", f"tracking.uri=sqlite:///{tmp_path}/m.db",
                "--dry-run", cwd=tmp_path, SWEEPER_DATA_DIR=str(data), **OFFLINE)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"data: MovieLens 100K ratings: present at {data / 'ml-100k.inter'}" in done.stdout
    refused = _cli("+exp=main", "algorithm=linucb", "seeds=2", "dataset=movielens",
                   f"tracking.uri=sqlite:///{tmp_path}/m.db", cwd=tmp_path,
                   SWEEPER_DATA_DIR=str(data), **OFFLINE)  # fmt: skip
    assert refused.returncode == 2 and "ml-100k.inter" in refused.stderr, refused.stderr
