"""What a user meets first on the command line: a misspelled name is bad input (exit status
2, one paragraph naming the closest valid names), the app is called sweeper, a run leaves
no Hydra directories behind, and the README lists every experiment."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper.configs import ConfigSearch

ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str, cwd: Path, **extra_env: str) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env.pop("HYDRA_FULL_ERROR", None)
    env.update(extra_env)
    return subprocess.run(
        [sys.executable, "-m", "sweeper", *args], cwd=cwd, env=env, capture_output=True,
        text=True, timeout=120,
    )  # fmt: skip


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["algoritm=linucb"], "unknown group or setting 'algoritm'; did you mean 'algorithm'?"),
        (["tuner=cdtt"], "unknown tuner 'cdtt'; did you mean 'cdt'?"),
        (["+exp=nope"], "unknown exp 'nope'. Valid exp names are: ablation,"),
        (["+exp=smok"], "unknown exp 'smok'; did you mean 'smoke' (a grid of 18 cells)?"),
        (["-m", "tuner=cdt,opp"], "unknown tuner 'opp'; did you mean 'op'"),
        (["dataset.n_armz=3"], "unknown group or setting 'dataset.n_armz'; did you mean 'n_arms'"),
    ],
    ids=lambda v: v if isinstance(v, str) and "=" in v else None,
)
def test_a_misspelled_name_is_bad_input_with_the_closest_names(tmp_path, args, said):
    done = _cli(*args, f"tracking.uri=sqlite:///{tmp_path}/m.db", cwd=tmp_path)
    assert done.returncode == 2, done.stdout + done.stderr
    assert said in done.stderr, done.stderr
    assert "Traceback" not in done.stderr and "+algoritm" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr  # one paragraph
    assert not (tmp_path / "m.db").exists(), "bad input opened the store"


@pytest.mark.e2e
def test_no_hydra_directories_are_left_behind(tmp_path):
    work, store, tmp = tmp_path / "work", tmp_path / "store", tmp_path / "tmp"
    for directory in (work, store, tmp):
        directory.mkdir()
    uri = f"tracking.uri=sqlite:///{store}/m.db"
    for args in (["task=toy", "horizon=5"], ["-m", "task=toy", "horizon=5", "seed=0,1"]):
        done = _cli(*args, "launcher.name=local", uri, cwd=work, TMPDIR=str(tmp))
        assert done.returncode == 0, done.stdout + done.stderr
    assert sorted(p.name for p in work.iterdir()) == []  # no outputs/, multirun/, .hydra
    assert not list(tmp.glob("sweeper-multirun-*")), "the multirun's temporary directory stayed"


def test_the_app_is_called_sweeper_and_lists_its_groups(tmp_path):
    done = _cli("--help", cwd=tmp_path)
    assert done.returncode == 0
    assert done.stdout.startswith("sweeper is powered by Hydra")
    assert "__main__" not in done.stdout
    assert "tuner: ad2me, bayes_opt, cdt" in done.stdout


def test_the_readme_lists_every_experiment():
    readme = (ROOT / "README.md").read_text()
    table = readme[readme.index("| experiment | reproduces |") :].split("\n\n", 1)[0]
    listed = re.findall(r"^\| `(\w+)` \|", table, re.M)
    assert sorted(listed) == ConfigSearch.with_dirs().options("exp")
