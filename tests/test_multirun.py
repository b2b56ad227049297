"""Hydra multirun (``-m``) is one sweep: the jobs become a grid (sweeper/multirun.py).

The unit tests compare the cells of the grid a multirun makes with the union of the cells
its jobs make one by one (what Hydra's basic launcher would run as separate sweeps); the
end-to-end test runs ``python -m sweeper -m ...`` and counts parent runs and cell runs.
"""

from __future__ import annotations

import itertools
import os
import subprocess
import sys
from collections import Counter

import pytest
from mlflow import MlflowClient

from sweeper.grid import expand
from sweeper.multirun import sweeps_of, with_grid


def _product(**axes: list[str]) -> list[list[str]]:
    """Jobs as Hydra's basic sweeper lists them: one override list per combination."""
    keys = list(axes)
    return [
        [f"{k}={v}" for k, v in zip(keys, values, strict=True)]
        for values in itertools.product(*(axes[k] for k in keys))
    ]


def _cells_of_sweep(sweep, composer):
    cfg = with_grid(composer(sweep.overrides), sweep.grid)
    return {c.key: c for c in expand(cfg, composer, sweep.overrides)}


def _cells_one_by_one(jobs, composer):
    return {c.key: c for job in jobs for c in expand(composer(job), composer, job)}


def test_an_ad_hoc_product_is_one_sweep_with_the_cells_of_its_jobs(composer):
    jobs = _product(
        algorithm=["linucb", "lints"], tuner=["theory", "op"], seed=["0", "1"], horizon=["50"]
    )
    (sweep,) = sweeps_of(jobs, composer)
    assert sweep.overrides == ["horizon=50"] and sweep.jobs == list(range(8))
    cells = _cells_of_sweep(sweep, composer)
    assert len(cells) == 8
    assert cells.keys() == _cells_one_by_one(jobs, composer).keys()
    assert {c.config["seed"] for c in cells.values()} == {0, 1}
    assert {c.config["horizon"] for c in cells.values()} == {50}


def test_an_experiment_with_a_varying_value_is_its_grid_at_each_value(composer):
    jobs = _product(**{"+exp": ["smoke"], "horizon": ["40", "80"], "seeds": ["2"]})
    (sweep,) = sweeps_of(jobs, composer)
    assert sweep.overrides == ["+exp=smoke", "seeds=2"]
    cells = _cells_of_sweep(sweep, composer)
    smoke = expand(composer(["+exp=smoke", "seeds=2"]), composer, ["+exp=smoke", "seeds=2"])
    assert len(cells) == 2 * len(smoke) == 24
    assert Counter(c.config["horizon"] for c in cells.values()) == {40: 12, 80: 12}
    assert cells.keys() == _cells_one_by_one(jobs, composer).keys()


def test_a_varying_group_pins_the_experiments_axis(composer):
    jobs = _product(**{"+exp": ["smoke"], "tuner": ["theory", "tl"], "seeds": ["1"]})
    (sweep,) = sweeps_of(jobs, composer)
    cells = _cells_of_sweep(sweep, composer)
    assert {c.config["tuner"]["name"] for c in cells.values()} >= {"theory"}
    assert len(cells) == 4  # 2 algorithms x the 2 tuners pinned, not smoke's 3 tuners
    assert cells.keys() == _cells_one_by_one(jobs, composer).keys()


def test_a_varying_experiment_is_one_sweep_per_experiment(composer):
    jobs = _product(**{"+exp": ["smoke", "grid"], "seeds": ["1"]})
    sweeps = sweeps_of(jobs, composer)
    assert [s.overrides for s in sweeps] == [["+exp=smoke", "seeds=1"], ["+exp=grid", "seeds=1"]]
    assert [s.jobs for s in sweeps] == [[0], [1]]


def test_deleting_a_key_in_a_multirun_is_refused_with_the_fix(composer):
    with pytest.raises(ValueError, match="deletes a key in a multirun"):
        sweeps_of([["~horizon", "seed=0"], ["~horizon", "seed=1"]], composer)


@pytest.mark.e2e
def test_minus_m_runs_one_sweep_and_resumes_it(tmp_path, tracking_uri):
    """8 jobs, one parent run, 8 FINISHED cells; the same command again runs nothing."""
    command = [
        sys.executable,
        "-m",
        "sweeper",
        "-m",
        "task=toy",
        "horizon=20",
        "seed=0,1",
        "+toy.sleep_s=0,0.001",
        "+toy.offset=0,1",
        "launcher.name=local",
        f"tracking.uri={tracking_uri}",
    ]
    env = {k: v for k, v in os.environ.items() if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI")}
    first = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert first.returncode == 0, first.stdout[-2000:] + first.stderr[-3000:]
    assert first.stdout.count("results go to") == 1, first.stdout
    assert "8 job(s) as one sweep" in first.stdout

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("adhoc")
    runs = client.search_runs([experiment.experiment_id])
    parents = [r for r in runs if r.data.tags.get("role") == "sweep"]
    cells = [r for r in runs if "cell_key" in r.data.tags]
    assert len(parents) == 1
    assert Counter(r.info.status for r in cells) == {"FINISHED": 8}
    assert len({r.data.tags["cell_key"] for r in cells}) == 8

    again = subprocess.run(command, capture_output=True, text=True, cwd=tmp_path, env=env)
    assert again.returncode == 0, again.stdout[-2000:] + again.stderr[-3000:]
    assert "8 already finished, 0 to run" in again.stdout, again.stdout
    cells = [r for r in client.search_runs([experiment.experiment_id]) if "cell_key" in r.data.tags]
    assert len(cells) == 8
