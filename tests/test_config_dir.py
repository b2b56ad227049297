"""An option of your own (only in a ``--config-dir``) sweeps like a shipped one: in an
experiment's grid, in ``-m``, through ``hydra.searchpath``, and in the report."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pandas as pd
import pytest
from mlflow import MlflowClient

LOCAL = ["launcher.name=local", "horizon=60"]
FIXED2 = """\
# A user's own tuner option: Fixed at 2.0 (not in the shipped conf/tuner/).
_target_: sweeper_tasks.bandit_tuning.tuners.fixed.Fixed
name: fixed2
value: 2.0
values: {}
"""
MINE = """\
# @package _global_
experiment: {name: mine, description: a user's own tuner beside a shipped one}
seeds: 2
sweep:
  grid: {algorithm: [linucb], tuner: [fixed2, theory], dataset: [simulation]}
baseline: theory
"""


@pytest.fixture
def my_conf(tmp_path: Path) -> Path:
    conf = tmp_path / "my_conf"
    (conf / "tuner").mkdir(parents=True)
    (conf / "exp").mkdir()
    (conf / "tuner" / "fixed2.yaml").write_text(FIXED2)
    (conf / "exp" / "mine.yaml").write_text(MINE)
    return conf


def _run(module: str, *args: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.pop("HYDRA_FULL_ERROR", None)
    return subprocess.run(
        [sys.executable, "-m", module, *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _tuners(store: str, experiment: str) -> list[str]:
    client = MlflowClient(store)
    (found,) = [e for e in client.search_experiments() if e.name == experiment]
    runs = client.search_runs([found.experiment_id], "attributes.status = 'FINISHED'")
    return sorted(r.data.tags["tuner"] for r in runs if "cell_key" in r.data.tags)


@pytest.mark.e2e
def test_an_option_of_your_own_sweeps_in_a_grid_and_is_reported(my_conf, tmp_path):
    store = f"sqlite:///{tmp_path}/mlflow.db"
    done = _run(
        "sweeper", "--config-dir", str(my_conf), "+exp=mine", f"tracking.uri={store}", *LOCAL,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "4 finished, 0 failed" in done.stdout, done.stdout[-2000:]
    assert _tuners(store, "mine") == ["fixed2", "fixed2", "theory", "theory"]

    out = tmp_path / "report"
    args = ["mine", "--tracking-uri", store, "--out", str(out), "--config-dir", str(my_conf)]
    done = _run("sweeper.report", *args, cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    cells = pd.read_csv(out / "cells.csv")
    assert sorted(set(cells["tuner"])) == ["fixed2", "theory"]
    # The experiment file's baseline (theory) was read from my_conf.
    paired = (out / "tables" / "paired.md").read_text()
    assert "## Paired differences: each tuner minus Theory" in paired
    assert "| fixed2 | Theory |" in paired


@pytest.mark.e2e
@pytest.mark.parametrize("how", ["--config-dir", "hydra.searchpath"])
def test_an_option_of_your_own_sweeps_in_a_multirun(my_conf, tmp_path, how):
    store = f"sqlite:///{tmp_path}/mlflow.db"
    where = (
        ["--config-dir", str(my_conf)]
        if how == "--config-dir"
        else [f"hydra.searchpath=[file://{my_conf}]"]
    )
    done = _run(
        "sweeper", "-m", *where, "tuner=fixed2,theory", "algorithm=linucb", "seed=0",
        f"tracking.uri={store}", *LOCAL, cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "2 job(s) as one sweep" in done.stdout and "2 finished" in done.stdout, done.stdout
    assert _tuners(store, "adhoc") == ["fixed2", "theory"]


def test_without_its_directory_the_option_is_unknown_and_the_fix_is_named(tmp_path):
    store = f"sqlite:///{tmp_path}/mlflow.db"
    exp = tmp_path / "only_exp" / "exp"
    exp.mkdir(parents=True)
    (exp / "mine.yaml").write_text(MINE)  # the experiment, without the tuner it names
    done = _run(
        "sweeper", "--config-dir", str(exp.parent), "+exp=mine", f"tracking.uri={store}", *LOCAL,
        cwd=tmp_path,
    )  # fmt: skip
    assert done.returncode == 2, done.stdout + done.stderr
    message = textwrap.shorten(done.stderr, 10_000)
    assert "unknown tuner 'fixed2'" in message and str(exp.parent) in message, message
    assert "Traceback" not in done.stderr
