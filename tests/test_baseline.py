"""One baseline for the report, the seed budget and the Python API (issue #39, item 2).

The experiment sets it (``baseline:``), the command line overrides it (``baseline=...``);
a baseline the grid lacks is refused before anything runs, naming the grid's options; the
docs' seed-budget example decides on ``smoke`` because smoke's baseline (Theory) is in its
grid.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

ROOT = Path(__file__).resolve().parents[1]


def _sweeper(*args: str, cwd: Path, module: str = "sweeper") -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.pop("HYDRA_FULL_ERROR", None)
    command = [sys.executable, "-m", module, *args]
    return subprocess.run(command, cwd=cwd, env=env, capture_output=True, text=True, timeout=600)


def _paired(store: str, tmp_path: Path) -> pd.DataFrame:
    """smoke's report from ``store``: its paired table."""
    out = tmp_path / "report"
    report = _sweeper("smoke", "--tracking-uri", store, "--out", str(out), cwd=tmp_path,
                      module="sweeper.report")  # fmt: skip
    assert report.returncode == 0, report.stderr[-2000:]
    return pd.read_csv(out / "tables" / "paired.csv")


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["+exp=smoke", "baseline=cdt"], "baseline=cdt is not a tuner of this sweep: its grid "
                                         "has theory, fixed, tl"),
        (["-m", "algorithm=linucb", "tuner=theory,tl", "seeds={until: decided, min: 2, max: 4}"],
         "pairs every tuner with the baseline, and this sweep sets none: add "
         "baseline=<one of theory, tl>"),
        (["+exp=main", "baseline=C1"], "baseline=C1 is not a tuner of this sweep"),
    ],
)  # fmt: skip
def test_a_baseline_the_grid_lacks_is_refused_before_anything_runs(tmp_path, args, said):
    store = tmp_path / "mlflow.db"
    done = _sweeper(*args, f"tracking.uri=sqlite:///{store}", "--dry-run", cwd=tmp_path)
    assert done.returncode == 2, done.stdout[-2000:] + done.stderr[-2000:]
    assert said in " ".join(done.stderr.split())
    assert "Traceback" not in done.stderr and not store.exists()


@pytest.mark.e2e
def test_the_docs_seed_budget_example_decides_on_smoke(tmp_path):
    """docs/seeds.md's first command, as written, against smoke's baseline (Theory): every
    comparison is decided at the budget's minimum, 10 seeds of 6 settings (60 of 240 cells),
    and the report pairs against the same baseline."""
    text = (ROOT / "docs" / "seeds.md").read_text()
    command = re.search(r"^python -m sweeper \+exp=smoke .*$", text, re.M).group(0)
    args = shlex.split(command)[3:]
    store = f"sqlite:///{tmp_path}/mlflow.db"
    done = _sweeper(*args, f"tracking.uri={store}", cwd=tmp_path)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "4 better" in done.stdout and "undecided" not in done.stdout, done.stdout[-3000:]
    assert re.search(r"^60 finished, 0 failed, 0 skipped of 240 cells", done.stdout, re.M)
    paired = _paired(store, tmp_path)
    assert set(paired["baseline_label"]) == {"Theory"}
    assert (paired["n_pairs"] == 10).all()


@pytest.mark.e2e
def test_the_command_line_baseline_reaches_the_report(tmp_path):
    store = f"sqlite:///{tmp_path}/mlflow.db"
    args = ["+exp=smoke", "seeds=2", "horizon=200", "algorithm=linucb", "baseline=tl"]
    done = _sweeper(*args, f"tracking.uri={store}", "launcher.name=local", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    paired = _paired(store, tmp_path)
    assert set(paired["baseline_label"]) == {"TL"}
    assert sorted(paired["Tuner"]) == ["Fixed", "Theory"]


@pytest.mark.e2e
def test_an_experiment_narrowed_on_the_command_line_runs_without_a_comparison(tmp_path):
    store = f"sqlite:///{tmp_path}/mlflow.db"
    args = ["+exp=smoke", "seeds=1", "horizon=100", "tuner=tl", "algorithm=linucb"]
    done = _sweeper(*args, f"tracking.uri={store}", "launcher.name=local", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    assert "the experiment's baseline theory is not among the tuner options this command " \
           "line keeps" in " ".join(done.stdout.split())  # fmt: skip
