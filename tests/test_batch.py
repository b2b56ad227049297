"""Seeds in one array program (issue #40): a batch of cells that differ only in their seed
gives each cell the numbers it has alone, to the last digit.

Every algorithm x tuner x dataset (and every other setting) of `main` (here) and of
`ablation` and `candidates` (slow-marked: ``make test-batch``) runs at a small horizon on
three seeds, once as one batch
(``run_cell.batch``) and once seed by seed (``run_cell``): the arms pulled each round, every
curve value, the hyperparameter trace, the tuner's state trace, the params and the summary
(the runtime aside) must be equal, not close. bench/bench_batch.py checks the same at the
papers' horizon, and the published `main` cells are reproduced by a batched rerun
(bench/results/batch.md).
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

import numpy as np
import pytest

from sweeper.cells import canonical_json
from sweeper.grid import expand
from sweeper_tasks.bandit_tuning import cell as bandit_cell
from sweeper_tasks.bandit_tuning.batching import BATCHED, ONE_AT_A_TIME, PER_SEED
from sweeper_tasks.bandit_tuning.cell import run_cell, run_cells
from sweeper_tasks.bandit_tuning.environments.base import BlockEnvironment
from sweeper_tasks.bandit_tuning.environments.batch import BlockBatch
from sweeper_tasks.bandit_tuning.environments.simulation import Simulation
from sweeper_tasks.bandit_tuning.seeding import environment_rng
from sweeper_tasks.bandit_tuning.tuners.cdt import CDT
from tests.data_fixtures import movielens_file  # noqa: F401  (fixture)

SEEDS = 3
# Long enough for each path that only shows late: CDT's restart (T2 = 3 T^(3/4) = 363 at
# p = 1, 3 T^(4/5) = 499 at p = 2), SGD-TS's epochs (tau = 200 or 250 rounds of warm-up,
# then epochs of tau), the GLM corrections and Hessian refreshes.
HORIZON = 600


class ArmSpy:
    """Records the arms each environment is asked to pay, seed by seed and round by round."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.alone: list[int] = []
        self.batch: list[np.ndarray] = []
        reward, batch_reward = BlockEnvironment.reward, BlockBatch.reward

        def alone(environment, arm):
            self.alone.append(int(arm))
            return reward(environment, arm)

        def together(environment, arms):
            self.batch.append(np.array(arms))
            return batch_reward(environment, arms)

        monkeypatch.setattr(BlockEnvironment, "reward", alone)
        monkeypatch.setattr(BlockBatch, "reward", together)


def groups(composer, experiment: str) -> list[list[dict[str, Any]]]:
    """The experiment's cells at ``HORIZON`` and ``SEEDS`` seeds, grouped by everything but
    the seed (what the launcher sends as one batch)."""
    overrides = [f"+exp={experiment}", f"horizon={HORIZON}", f"seeds={SEEDS}"]
    grid = expand(composer(overrides), composer, overrides)
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for i in range(len(grid)):
        config = grid[i].config
        grouped[canonical_json({k: v for k, v in config.items() if k != "seed"})].append(config)
    return list(grouped.values())


def differences(alone: dict[str, Any], batched: dict[str, Any]) -> list[str]:
    """What differs between two results of one cell (the runtime aside), exactly."""
    found = []
    summary = {k: v for k, v in alone["summary"].items() if k != "runtime_s"}
    if summary != {k: v for k, v in batched["summary"].items() if k != "runtime_s"}:
        found.append(f"summary {summary} vs {batched['summary']}")
    if alone["params"] != batched["params"]:
        found.append("params")
    for part in ("curves", "trace"):
        if alone[part].keys() != batched[part].keys():
            found.append(f"{part} keys {sorted(alone[part])} vs {sorted(batched[part])}")
            continue
        for name, value in alone[part].items():
            if name == "names":
                same = value == batched[part][name]
            else:
                same = np.array_equal(value, batched[part][name], equal_nan=True)
            if not same:
                found.append(f"{part}.{name}")
    return found


@pytest.mark.parametrize(
    "experiment",
    [
        pytest.param("main", marks=pytest.mark.e2e),
        pytest.param("ablation", marks=pytest.mark.slow),
        pytest.param("candidates", marks=pytest.mark.slow),
    ],
)
def test_a_batch_of_seeds_gives_every_cell_its_numbers_alone(
    experiment,
    composer,
    monkeypatch,
    movielens_file,  # noqa: F811
):
    spy = ArmSpy(monkeypatch)
    checked, problems = 0, []
    for configs in groups(composer, experiment):
        spy.batch.clear()
        batched = run_cells(configs)
        arms_together = np.stack(spy.batch)  # (T, S)
        for s, config in enumerate(configs):
            spy.alone.clear()
            alone = run_cell(config)
            where = f"{config['algorithm']['name']}/{config['tuner']['name']}/"
            where += f"{config['dataset']['name']} seed {config['seed']}"
            if spy.alone != arms_together[:, s].tolist():
                problems.append(f"{where}: the arms pulled differ")
            problems += [f"{where}: {d}" for d in differences(alone, batched[s])]
            checked += 1
    assert not problems, problems[:20]
    assert checked == {"main": 56, "ablation": 56, "candidates": 56}[experiment] * SEEDS


def test_each_component_says_how_it_runs_in_a_batch(composer):
    paths = bandit_cell.paths
    main = composer(["algorithm=gloc", "tuner=cdt", "dataset=movielens"])
    assert paths(_config(main)) == {"algorithm": BATCHED, "tuner": BATCHED, "dataset": BATCHED}
    ad2me = composer(["algorithm=linucb", "tuner=ad2me", "dataset=simulation"])
    assert paths(_config(ad2me)) == {
        "algorithm": BATCHED,
        "tuner": PER_SEED,
        "dataset": BATCHED,
    }
    lipschitz = composer(["tuner=cdt", "dataset=yahoo"])
    assert paths(_config(lipschitz))["dataset"] == ONE_AT_A_TIME


class MySimulation(Simulation):
    """A user's environment built on the simulation: it declares no batched form."""


class MyCDT(CDT):
    """A user's tuner built on CDT: it declares no batched form, so each seed runs its own."""


def test_a_subclass_that_declares_nothing_runs_one_seed_at_a_time(composer, monkeypatch):
    """The declaration is the class's own: a subclass of a batched environment makes the
    cell run seed by seed, a subclass of a batched tuner runs one object per seed inside
    the batch; the numbers are those of each seed alone either way."""
    config = _config(composer(["algorithm=linucb", "tuner=cdt", "horizon=300"]))
    mine = {**config, "tuner": {**config["tuner"], "_target_": f"{__name__}.MyCDT"}}
    assert bandit_cell.paths(mine)["tuner"] == PER_SEED
    configs = [{**mine, "seed": s} for s in range(SEEDS)]
    for alone, batched in zip(map(run_cell, configs), run_cells(configs), strict=True):
        assert differences(alone, batched) == []

    spy = ArmSpy(monkeypatch)
    env = {**config, "dataset": {**config["dataset"], "_target_": f"{__name__}.MySimulation"}}
    assert bandit_cell.paths(env)["dataset"] == ONE_AT_A_TIME
    configs = [{**env, "seed": s} for s in range(SEEDS)]
    batched = run_cells(configs)
    assert spy.batch == []  # no batched environment ran: the seeds ran one after the other
    assert all(
        differences(alone, b) == []
        for alone, b in zip(map(run_cell, configs), batched, strict=True)
    )


def test_a_batch_keeps_one_block_per_seed_and_shows_a_round_as_a_view(composer):
    """The batched environment holds each seed's block of rounds (B x K x d), drawn into its
    slice of one (S, B, K, d) array, never the horizon (a batch's memory grows with its
    seeds, not T); a round of all seeds (S x K x d) is a view of it, no copy, and each seed's
    slice holds what the seed draws alone."""
    config = _config(composer(["algorithm=linucb", "horizon=5000"]))
    parts = [bandit_cell.prepare({**config, "seed": s}) for s in range(4)]
    environments = [environment for _, _, environment, _ in parts]
    batch = BlockBatch(environments)
    for t in range(600):
        features, means = batch.observe(t)
        assert features.shape == (4, 120, 25) and means.shape == (4, 120)
    assert all(e._features.shape == (256, 120, 25) for e in environments)
    assert all(np.shares_memory(features, e._features) for e in environments)
    assert np.shares_memory(means, environments[3]._means)
    alone = Simulation(
        **{k: v for k, v in config["dataset"].items() if k not in ("_target_", "name")}
    )
    alone.reset(5000, "linear", environment_rng("simulation", 2))
    for t in range(600):
        expected = alone.observe(t)
    assert np.array_equal(features[2], expected[0]) and np.array_equal(means[2], expected[1])


def _config(cfg) -> dict[str, Any]:
    from sweeper.grid import cell_config

    return cell_config(cfg)
