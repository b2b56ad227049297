"""The conformance check (sweeper/check.py): every shipped component conforms, a broken
one is caught for what it breaks, and docs/extending.md's example passes as written."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper.check import Checker, components, main
from sweeper.configs import ConfigSearch
from sweeper_tasks.bandit_tuning.tuners.base import Tuner
from tests.data_fixtures import movielens_file  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ConfigSearch.with_dirs()
COMPONENTS = list(components(SHIPPED))


@pytest.fixture(scope="module")
def checker(movielens_file) -> Checker:  # noqa: F811  (MovieLens ratings in the data dir)
    return Checker(SHIPPED)


def test_every_group_of_every_family_is_enumerated():
    names = {name for _, name in COMPONENTS}
    for group in ("algorithm", "tuner", "dataset", "procedure", "sampler", "estimator"):
        assert {f"{group}/{o}" for o in SHIPPED.options(group)} <= names
    assert len(COMPONENTS) == sum(
        len(SHIPPED.options(g)) for g in ("algorithm", "tuner", "dataset")
    ) + sum(len(SHIPPED.options(g)) for g in ("procedure", "sampler", "estimator", "logged_data"))


@pytest.mark.parametrize(("family", "component"), COMPONENTS, ids=[c for _, c in COMPONENTS])
def test_every_shipped_component_conforms(checker, family, component):
    report = checker.check(family, component)
    assert report.problems == [], report.problems
    declared = checker.tasks[family].check.get("needs_data") or []
    if report.not_run:  # only data that cannot be fetched may keep it from running
        assert component in declared, report.not_run
    else:
        assert report.cells >= 1


# --- components that break the contract, each caught for what it breaks ---------------
class OutOfBox(Tuner):
    """Declares the space's interval, proposes 10 (outside [0.1, 5])."""

    def propose(self, t):
        return {h.name: 10.0 for h in self.space}

    def proposes(self, hyperparameter):
        return ("interval", tuple(hyperparameter.interval))


_DRAWS = np.random.default_rng()


class Moody(Tuner):
    """Draws from a generator of its own, not the seeded one it is given."""

    def propose(self, t):
        return {h.name: float(_DRAWS.uniform(0.1, 5)) for h in self.space}


class Unshippable(Tuner):
    """Keeps a lambda: a pickle round trip fails (Ray could not ship it)."""

    def __init__(self):
        self.rule = lambda t: 1.0

    def propose(self, t):
        return {h.name: self.rule(t) for h in self.space}


@pytest.mark.parametrize(
    ("name", "finding"),
    [
        ("OutOfBox", "outside the declared interval [0.1, 5.0], e.g. 10"),
        ("Moody", "not deterministic"),
        ("Unshippable", "does not survive a pickle round trip"),
    ],
)
def test_a_broken_tuner_is_caught(tmp_path, capsys, name, finding):
    conf = tmp_path / "tuner"
    conf.mkdir()
    (conf / "broken.yaml").write_text(f"_target_: tests.test_conformance.{name}\nname: broken\n")
    code = main(["tuner=broken", "--config-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert code == 1, out
    assert "FAILS   tuner/broken" in out and finding in out, out


def test_an_unknown_component_is_bad_input(capsys):
    assert main(["tuner=nope"]) == 2
    assert "no such component: tuner/nope" in capsys.readouterr().err


# --- docs/extending.md's worked example, as the page gives it --------------------------
def _examples() -> dict[str, str]:
    page = (ROOT / "docs" / "extending.md").read_text()
    found = re.findall(r"<!-- example: (\S+) -->\s*```\w+\n(.*?)```", page, re.S)
    return dict(found)


FILES = ("my_tuners.py", "my_conf/tuner/epsilon_greedy.yaml", "my_conf/exp/mine.yaml")


def write_examples(tmp_path: Path) -> dict[str, str]:
    """docs/extending.md's files written where the page puts them; its blocks by name."""
    examples = _examples()
    assert set(examples) == {*FILES, "commands", "comparison"}
    for path in FILES:
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text(examples[path])
    return examples


def run_example(command: str, cwd: Path, store: str) -> subprocess.CompletedProcess:
    """One of the page's commands (``PYTHONPATH=. python ...``) as written, in ``cwd``."""
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    env["MLFLOW_TRACKING_URI"] = store
    words = shlex.split(command)
    assert words[0] == "PYTHONPATH=." and words[1] == "python"
    done = subprocess.run(
        [sys.executable, *words[2:]], cwd=cwd, env={**env, "PYTHONPATH": str(cwd)},
        capture_output=True, text=True, timeout=900,
    )  # fmt: skip
    assert done.returncode == 0, textwrap.shorten(done.stdout + done.stderr, 3000)
    return done


@pytest.mark.e2e
def test_the_extending_page_example_checks_and_sweeps(tmp_path):
    examples = write_examples(tmp_path)
    store = f"sqlite:///{tmp_path}/mlflow.db"
    check, sweep = examples["commands"].strip().splitlines()
    for command, said in ((check, "ok      tuner/epsilon_greedy (bandit_tuning, 7 cell(s))"),
                          (sweep, "4 finished, 0 failed")):  # fmt: skip
        assert said in run_example(command, tmp_path, store).stdout


@pytest.mark.e2e
def test_the_extending_page_walks_from_the_tuner_to_the_comparison(tmp_path):
    """Its experiment against OP, TL and CDT, then the report: the paired table reads
    "ε-greedy minus each tuner", the same numbers as sweeper.load's compare()."""
    examples = write_examples(tmp_path)
    store = f"sqlite:///{tmp_path}/mlflow.db"
    sweep, report = examples["comparison"].strip().splitlines()
    swept = run_example(sweep, tmp_path, store).stdout
    assert "40 finished, 0 failed, 0 skipped of 40 cells" in swept, swept[-2000:]
    assert "mlflow ui --backend-store-uri" in swept and "viewStateShareKey=" in swept
    run_example(report, tmp_path, store)
    paired = (tmp_path / "reports" / "mine" / "tables" / "paired.md").read_text()
    assert "## Paired differences: ε-greedy minus each tuner" in paired, paired[:500]
    tidy = pd.read_csv(tmp_path / "reports" / "mine" / "tables" / "paired.csv")
    assert sorted(tidy["tuner"]) == ["cdt", "cdt", "op", "op", "tl", "tl"]
    assert set(tidy["baseline_label"]) == {"ε-greedy"} and (tidy["n_pairs"] == 5).all()
    import sweeper

    compared = sweeper.load("mine", tracking_uri=store, config_dir=tmp_path / "my_conf").compare()
    np.testing.assert_allclose(
        compared.sort_values(["algorithm", "tuner"])["difference"].to_numpy(),
        tidy.sort_values(["algorithm", "tuner"])["difference"].to_numpy(), rtol=1e-12,
    )  # fmt: skip
    assert set(compared["sign"]) == {"baseline - tuner"}
