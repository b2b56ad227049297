"""Every experiment of the papers as a config (conf/exp/): its grid, and a reduced run.

The default suite checks each experiment's full-size grid (cell counts, axes, which tuner
goes with which algorithm) without running it; the slow-marked test runs every experiment
at reduced size on Ray (``make test-experiments``).
"""

from __future__ import annotations

import io
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from omegaconf import OmegaConf

from sweeper.configs import ConfigSearch
from sweeper.grid import expand, group_options
from sweeper.paths import CONF_DIR
from sweeper.sweep import run_sweep
from tests.data_fixtures import movielens_file, r6a_line, write_r6a  # noqa: F401  (fixture)

FULL_SIZE = {
    "smoke": 18,
    "main": 1120,
    "yahoo": 400,
    "grid": 1050,
    "candidates": 1120,
    "ablation": 1120,
    "lipschitz": 200,
    "lipschitz_released": 120,
    "syndicated": 300,
    "ncab": 110,
    "ncab_sensitivity": 200,
    "cross_tuners": 670,
    "opl_hpo": 1000,
    "opl_hpo_sensitivity": 250,
    "opl_hpo_ablation": 100,
    "opl_bounds": 450,
    "opl_hpo_obd": 20,
    "lipschitz_check": 590,
    "candidate_size": 780,
    "skyline": 700,
}
C1 = [0.1, 1.0, 2.0, 3.0, 4.0, 5.0]
C2 = [0.1, 0.25, 0.5, 0.75, 1.0, 1.5, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5.0]
ONE_HYPERPARAMETER = {"linucb", "lints", "ucb_glm", "glm_tsl", "laplace_ts"}
TWO_HYPERPARAMETERS = {"gloc", "sgd_ts"}


def unknown_options(spec) -> list[str]:
    """Option names of config groups (algorithm, tuner, procedure, ...) that an experiment's
    grid uses but that have no config."""
    grid = OmegaConf.to_container(spec.sweep.grid, resolve=True)
    configs = ConfigSearch.with_dirs()
    missing = []
    for block in grid if isinstance(grid, list) else [grid]:
        for group in (k for k in block if configs.is_group(k)):
            for value in block[group]:
                try:
                    configs.check_option(group, value)
                except ValueError:
                    missing.append(f"{group}/{value}")
    return sorted(set(missing))


_EXPANDED: dict[tuple[str, ...], list] = {}


def _cells(composer, name: str, *extra: str):
    unknown = unknown_options(OmegaConf.load(CONF_DIR / "exp" / f"{name}.yaml"))
    if unknown:  # a typo or a config not written: the experiment cannot run, so it fails
        pytest.fail(f"experiment '{name}' names options with no config: {unknown}")
    overrides = [f"+exp={name}", *extra]
    if tuple(overrides) not in _EXPANDED:  # expanded once per session
        _EXPANDED[tuple(overrides)] = expand(composer(overrides), composer, overrides)
    return _EXPANDED[tuple(overrides)]


def test_a_misspelled_option_in_a_grid_is_reported():
    spec = OmegaConf.create(
        {
            "sweep": {
                "grid": [{"tuner": ["cdtt", "op"]}, {"algorithm": ["linucb"], "dataset": ["x"]}]
            }
        }
    )
    assert unknown_options(spec) == ["dataset/x", "tuner/cdtt"]
    for name in FULL_SIZE:
        assert unknown_options(OmegaConf.load(CONF_DIR / "exp" / f"{name}.yaml")) == [], name


def test_every_experiment_named_in_the_design_exists_with_a_description():
    assert set(group_options("exp")) >= set(FULL_SIZE)
    for name in FULL_SIZE:
        spec = OmegaConf.load(CONF_DIR / "exp" / f"{name}.yaml")
        assert spec.experiment.name == name
        description = spec.experiment.description
        assert description and "\n" not in description.strip()


@pytest.mark.parametrize("name", sorted(FULL_SIZE))
def test_full_size_cell_counts(composer, name):
    cells = _cells(composer, name)
    assert len(cells) == FULL_SIZE[name]
    assert len({c.key for c in cells}) == len(cells)


def test_main_pairs_tl_with_one_hyperparameter_and_syndicated_with_two(composer):
    cells = _cells(composer, "main")
    combos = Counter((c.tags["algorithm"], c.tags["tuner"], c.tags["dataset"]) for c in cells)
    assert set(combos.values()) == {20}
    for algorithm in ONE_HYPERPARAMETER | TWO_HYPERPARAMETERS:
        tuners = {t for a, t, _ in combos if a == algorithm}
        third = "tl" if algorithm in ONE_HYPERPARAMETER else "syndicated"
        assert tuners == {"theory", "op", third, "cdt"}, algorithm
    assert {d for _, _, d in combos} == {"simulation", "movielens"}
    for cell in cells:
        assert cell.config["horizon"] == 14000
        assert cell.config["space"] == {"interval": [0.1, 5.0], "candidates": C1}


def test_candidates_compares_c1_with_c2_for_op_and_tl_or_syndicated(composer):
    cells = _cells(composer, "candidates")
    sets = Counter(tuple(c.config["space"]["candidates"]) for c in cells)
    assert sets == {tuple(C1): 560, tuple(C2): 560}
    assert {c.tags["tuner"] for c in cells} == {"op", "tl", "syndicated"}
    assert all(c.tags["tuner"] != "tl" or c.tags["algorithm"] in ONE_HYPERPARAMETER for c in cells)


def test_ablation_varies_t1_and_the_restart_multiplier_of_cdt(composer):
    cells = _cells(composer, "ablation")
    assert {c.tags["tuner"] for c in cells} == {"cdt"}
    settings = Counter(
        (c.config["tuner"]["warmup_multiplier"], c.config["tuner"]["restart_multiplier"])
        for c in cells
    )
    assert settings == {(0.0, 3.0): 280, (1.0, 3.0): 280, (0.0, 1.0): 280, (0.0, 2.0): 280}


def test_grid_searches_the_exploration_rate_with_fixed(composer):
    cells = _cells(composer, "grid")
    values = sorted({c.config["tuner"]["value"] for c in cells})
    assert values[:3] == [0.1, 0.5, 1.0] and values[-1] == 10.0 and len(values) == 21
    assert {c.config["dataset"]["n_arms"] for c in cells} == {60, 120}
    assert {c.config["dataset"]["n_features"] for c in cells} == {10}
    assert {c.config["horizon"] for c in cells} == {8000}
    gloc = [c for c in cells if c.tags["algorithm"] == "gloc"]
    assert gloc and all(c.config["algorithm"]["tuned"] == ["exploration_rate"] for c in gloc)


def test_syndicated_tunes_lambda_only_with_tl_combined_and_syndicated(composer):
    cells = _cells(composer, "syndicated")
    for cell in cells:
        tuned = cell.config["algorithm"]["tuned"]
        both = cell.tags["tuner"] in ("tl_combined", "syndicated")
        assert tuned == (["exploration_rate", "regularisation"] if both else ["exploration_rate"])
        candidates = cell.config["algorithm"]["hyperparameters"]
        assert candidates["exploration_rate"]["candidates"] == [0.0, 0.01, 0.1, 1.0, 10.0]
        assert candidates["regularisation"]["candidates"] == [0.01, 0.1, 1.0]


def test_lipschitz_runs_the_tuners_alone(composer):
    cells = _cells(composer, "lipschitz")
    assert {c.tags["algorithm"] for c in cells} == {"none"}
    assert {c.function for c in cells} == {"sweeper_tasks.bandit_tuning.lipschitz_cell.run_cell"}
    assert {c.config["dataset"]["family"] for c in cells} == {"triangle", "sine"}
    (cdt,) = {c.config["tuner"]["restart_multiplier"] for c in cells if c.tags["tuner"] == "cdt"}
    assert cdt == 10.0


def test_overrides_shrink_any_experiment(composer):
    cells = _cells(composer, "main", "seeds=2", "horizon=1000", "algorithm=linucb")
    assert len(cells) == 4 * 2 * 2
    assert {c.config["horizon"] for c in cells} == {1000}


REDUCED = {
    "smoke": ["seeds=1", "horizon=300"],
    "main": ["seeds=1", "horizon=300"],
    "yahoo": ["seeds=1", "horizon=50"],
    "grid": ["seeds=1", "horizon=300", "dataset.n_arms=60"],
    "candidates": ["seeds=1", "horizon=300"],
    "ablation": ["seeds=1", "horizon=300"],
    "lipschitz": ["seeds=1", "horizon=3000"],
    "lipschitz_released": ["seeds=1", "horizon=3000", "dataset.change_points=[762,1591,2493]"],
    "syndicated": ["seeds=1", "horizon=300"],
    "ncab": ["seeds=1", "horizon=300"],
    "ncab_sensitivity": ["seeds=1", "horizon=300"],
    "cross_tuners": ["seeds=1", "horizon=300"],
    "opl_hpo": ["seeds=1", "n_trials=3", "logged_data.n_train=200", "logged_data.n_val=200"],
    "opl_hpo_sensitivity": ["seeds=1", "n_trials=3"],
    "opl_hpo_ablation": ["seeds=1", "n_trials=3"],
    "opl_bounds": ["seeds=1"],
    "lipschitz_check": ["seeds=1", "horizon=600", "check.rate=4.5"],
    "candidate_size": ["seeds=1", "horizon=300"],
    "skyline": ["seeds=1", "horizon=300"],
}


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(REDUCED))
def test_every_experiment_runs_at_reduced_size(
    composer,
    tracking_uri,
    ray_local,
    movielens_file,  # noqa: F811
    tmp_path,
    name,
):
    unknown = unknown_options(OmegaConf.load(CONF_DIR / "exp" / f"{name}.yaml"))
    assert not unknown, f"experiment '{name}' names options with no config: {unknown}"
    overrides = [f"+exp={name}", *REDUCED[name], f"tracking.uri={tracking_uri}"]
    if name == "yahoo":  # R6A is licensed: a small log in its format stands in for it
        log = _synthetic_r6a(tmp_path / "R6", steps=60)
        overrides += [f"dataset.path={log}", f"dataset.cache_dir={tmp_path / 'cache'}"]
    result = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert result.ok, result.failed[:3]
    assert result.finished == result.cells > 0
    assert set(result.table["status"]) == {"FINISHED"}


def _synthetic_r6a(directory: Path, steps: int) -> Path:
    """``steps`` five-minute steps of made-up visits in the R6A format (May 1, 2009)."""
    rng = np.random.default_rng(0)
    start = 1241136000
    articles = {a: (1.0, *rng.uniform(0.0, 1.0, 5).round(6)) for a in range(101, 109)}
    lines = []
    for step in range(steps):
        ids = sorted(int(a) for a in rng.choice(list(articles), size=5, replace=False))
        pool = {a: articles[a] for a in ids}
        for visit in range(6):
            shown, click = int(rng.choice(ids)), int(rng.random() < 0.3)
            lines.append(r6a_line(start + 300 * step + 10 * visit, shown, click, pool))
    write_r6a(directory / "ydata-fp-td-clicks-v1_0.20090501.gz", lines)
    return directory
