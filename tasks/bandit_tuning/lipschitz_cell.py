"""One cell of the switching Lipschitz benchmark (003 Appendix A.3): the tuner alone.

Here the tuner is the whole learner. Its space is one hyperparameter "x" with interval
[0, 1] (the arm set); each round it proposes x, the environment answers f_t(x) + noise and
the regret is max f_t - f_t(x). The cell returns the same shape as ``cell.run_cell``.

Privileged information goes through one explicit hook: before the first round of every
new stationary piece (each true change point) the cell calls ``tuner.notify_change()``.
Every tuner ignores it except the Oracle, which restarts there.

The same cell runs 004's retrieval-threshold problem (``dataset=movielens_retrieval``,
004 Section 7.1.2): x is the threshold beta, the reward the F-score F_t(beta) of the
round's user, and the regret max_beta F_t - F_t(x); it has no known change points.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import numpy as np
from threadpoolctl import threadpool_limits

from sweeper_tasks.bandit_tuning import cell
from sweeper_tasks.bandit_tuning.environments.lipschitz import SwitchingLipschitz
from sweeper_tasks.bandit_tuning.environments.movielens_retrieval import MovieLensRetrieval
from sweeper_tasks.bandit_tuning.results import (
    StateTrace,
    cell_result,
    horizon_of,
    space_params,
    spec_name,
)
from sweeper_tasks.bandit_tuning.seeding import agent_rngs, environment_rng
from sweeper_tasks.bandit_tuning.space import Hyperparameter
from sweeper_tasks.bandit_tuning.tuners.base import Tuner
from sweeper_tasks.building import build

ARM = "x"
ENVIRONMENTS = (SwitchingLipschitz, MovieLensRetrieval)
"""The tuner-only environments: switching Lipschitz functions (003 A.3) and the retrieval
threshold of 004 Section 7.1.2 (``dataset=movielens_retrieval``); both have arms [0, 1]."""


def build_parts(
    config: Mapping[str, Any],
) -> tuple[Tuner, SwitchingLipschitz | MovieLensRetrieval, list[Hyperparameter]]:
    """The tuner, the environment and the one-dimensional space [0, 1] of x.

    ``config['space']`` may override the interval or the candidate set of x, as it does for
    the bandit cell; by default x ranges over [0, 1] and the discrete tuners get the
    dataset's ``candidates``.
    """
    environment = build(config["dataset"])
    if not isinstance(environment, ENVIRONMENTS):
        raise ValueError(
            "the tuner-only cell needs dataset=lipschitz or dataset=movielens_retrieval, got "
            f"{spec_name(config['dataset'])}; "
            "use cell=sweeper_tasks.bandit_tuning.cell.run_cell for the contextual-bandit datasets"
        )
    arm = Hyperparameter(ARM, default=0.5, interval=(0.0, 1.0), candidates=environment.candidates)
    overrides = {k: v for k, v in dict(config.get("space") or {}).items() if v is not None}
    arm = arm.with_overrides(overrides)
    low, high = arm.interval
    if low < 0.0 or high > 1.0 or any(not 0.0 <= c <= 1.0 for c in arm.candidates):
        raise ValueError(
            f"the arm set of {spec_name(config['dataset'])} (x, a point or a threshold) is "
            f"[0, 1]; space.interval {arm.interval} and space.candidates "
            f"{list(arm.candidates)} must lie inside it: set them within [0, 1] or null"
        )
    return build(config["tuner"]), environment, [arm]


def validate(config: Mapping[str, Any]) -> None:
    """Fail early, before any cell runs, on a config that cannot run."""
    horizon = horizon_of(config)
    _tuner, environment, _space = build_parts(config)
    environment.check(horizon)


def run_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """Run one (tuner, lipschitz, seed) cell: summary, regret curve, trace of x and state.

    ``config`` holds ``tuner`` and ``dataset`` (mappings with a ``_target_``), ``seed`` and
    ``horizon``; other keys (e.g. ``algorithm``) are ignored. During the tuner's warm-up
    x is drawn uniformly from the interval, as the bandit cell pulls random arms.
    """
    started = time.perf_counter()
    horizon = horizon_of(config)
    seed = int(config["seed"])
    tuner, environment, space = build_parts(config)
    arm = space[0]
    tuner_rng, warmup_rng = agent_rngs(seed, "lipschitz", spec_name(config["tuner"]), n=2)
    environment.reset(horizon, environment_rng(spec_name(config["dataset"]), seed))
    tuner.reset(space, horizon, tuner_rng, lambda t: {ARM: arm.default})
    warmup = min(tuner.warmup_rounds(), horizon)
    changes = {int(c) for c in environment.change_points}
    low, high = arm.interval

    instant_regret = np.empty(horizon)
    rewards = np.empty(horizon)
    chosen = np.empty(horizon)
    state_trace = StateTrace(horizon)
    # One BLAS thread, as the bandit cell and Ray workers run (BO's GP algebra otherwise
    # spawns threads that contend on a loaded machine).
    with threadpool_limits(limits=1, user_api="blas"):
        for index in range(horizon):
            if index in changes:
                tuner.notify_change()
            if index < warmup:
                x = float(warmup_rng.uniform(low, high))
            else:
                x = float(tuner.propose(index + 1)[ARM])
                if not 0.0 <= x <= 1.0:
                    raise ValueError(
                        f"{spec_name(config['tuner'])} proposed x = {x} at round {index + 1}, "
                        "outside the arm set [0, 1]; give the tuner values inside it"
                    )
            reward = environment.reward(index, x)
            if index >= warmup:
                tuner.observe(reward)
                state_trace.record(index, tuner.state())
            instant_regret[index] = environment.best_mean(index) - float(environment.mean(index, x))
            rewards[index] = reward
            chosen[index] = x

    return cell_result(
        started=started,
        instant_regret=instant_regret,
        rewards=rewards,
        warmup=warmup,
        params={**space_params(space), **environment.params(), **tuner.params()},
        names=[ARM],
        values=chosen[:, None],
        state=state_trace,
    )


def at_horizon(config: Mapping[str, Any], horizon: int) -> dict[str, Any]:
    """The cell's config moved to another T, its layout and epoch scaled with it.

    Explicit ``dataset.change_points`` and the tuner's ``restart_every`` are given for
    ``config['horizon']``; both scale by horizon / config['horizon'] (rounded down), so a
    layout such as the released A.3 script's can be run at a shorter horizon.
    """
    scale = int(horizon) / horizon_of(config)
    dataset, tuner = dict(config["dataset"]), dict(config["tuner"])
    if dataset.get("change_points"):
        dataset["change_points"] = [int(c * scale) for c in dataset["change_points"]]
    if tuner.get("restart_every"):
        tuner["restart_every"] = int(tuner["restart_every"] * scale)
    return {**config, "horizon": int(horizon), "dataset": dataset, "tuner": tuner}


run_cell.validate = validate  # the driver calls it once per distinct config before dispatch
run_cell.data = cell.data  # the dataset's files, as the bandit cell says them
