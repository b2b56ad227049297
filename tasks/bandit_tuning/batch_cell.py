"""The batched cell: cells that differ only in their seed run as one array program.

003 Algorithm 2's double loop of ``cell.run_cell``, with a leading seed axis on every
array: each round the environment shows the (S, K, d) features of all seeds, the tuners
propose (S,) values per hyperparameter, the algorithm picks (S,) arms and learns from the
(S,) rewards. Every seed keeps its own generators and its own objects' numbers, so each
seed's result is the one ``run_cell`` gives for it alone, to the last digit
(tests/test_batch.py); the batch only saves the interpreter's work per round, which a
cell of one seed spends S times.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from sweeper_tasks.bandit_tuning.batching import (
    StateTraces,
    batched_algorithm,
    batched_tuner,
    declared_batch,
)
from sweeper_tasks.bandit_tuning.results import StateTrace, cell_result, space_params


def run_batch(
    horizon: int,
    algorithms: Sequence[Any],
    tuners: Sequence[Any],
    environments: Sequence[Any],
    warmup_rngs: Sequence[np.random.Generator],
    started: float,
) -> list[dict[str, Any]]:
    """Run S seeds' reset parts (as ``cell.prepare`` gives them, one per seed) together and
    return each seed's result, as ``run_cell`` returns it. The environments must declare a
    batched implementation and the tuners one warm-up length (``cell.run_cells`` checks)."""
    n_seeds = len(algorithms)
    environment = declared_batch(environments[0])(environments)
    algorithm = batched_algorithm(algorithms)
    tuner = batched_tuner(tuners, algorithm.theoretical)
    space = algorithms[0].space
    names = [h.name for h in space]
    warmup = min(tuners[0].warmup_rounds(), horizon)
    seeds = np.arange(n_seeds)

    instant_regret = np.empty((n_seeds, horizon))
    rewards = np.empty((n_seeds, horizon))
    trace = np.full((n_seeds, horizon, len(space)), np.nan)
    states = StateTraces(n_seeds, horizon)
    observe, draw_reward, n_arms = environment.observe, environment.reward, environment.n_arms
    theoretical, select, update = algorithm.theoretical, algorithm.select, algorithm.update
    propose, tuner_observe, tuner_state = tuner.propose, tuner.observe, tuner.state
    with threadpool_limits(limits=1, user_api="blas"):  # as run_cell: d x d matrices
        for index in range(horizon):
            t = index + 1
            features, means = observe(index)
            hp = theoretical(t)  # a new mapping each round
            if index < warmup:
                arms = np.array([int(rng.integers(n_arms)) for rng in warmup_rngs])
            else:
                proposal = propose(t)
                hp.update(proposal)
                for column, name in enumerate(names):
                    trace[:, index, column] = proposal[name]
                arms = select(features, hp, t)
            reward = draw_reward(arms)
            update(features[seeds, arms], reward, hp, t)
            if index >= warmup:
                tuner_observe(reward)
                states.record(index, tuner_state())
            instant_regret[:, index] = means.max(axis=1) - means[seeds, arms]
            rewards[:, index] = reward

    results = []
    for s in range(n_seeds):
        state = StateTrace(horizon)
        state.arrays = states.of(s)
        results.append(
            cell_result(
                started=started,
                shared_by=n_seeds,
                instant_regret=instant_regret[s],
                rewards=rewards[s],
                warmup=warmup,
                params={**space_params(space), **tuners[s].params()},
                names=names,
                values=trace[s],
                state=state,
            )
        )
    return results


def unbatchable(tuners: Sequence[Any], environments: Sequence[Any], horizon: int) -> str | None:
    """Why these seeds' parts cannot run as one program, or None when they can."""
    if declared_batch(environments[0]) is None:
        return f"{type(environments[0]).__name__} declares no batched implementation"
    if len({min(tuner.warmup_rounds(), horizon) for tuner in tuners}) > 1:
        return "the seeds' tuners warm up for different numbers of rounds"
    return None
