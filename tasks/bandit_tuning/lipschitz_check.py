"""003 Appendix A.2 (Figure 3): is the reward of an exploration rate Lipschitz in the rate?

A.2 runs LinUCB and LinTS under CDT (d = 6, K = 60, T = 3000, 200 random warm-up rounds)
and "also obtains the results" of every exploration rate in {0.3, 0.45, ..., 9}: here, each
tuned round, the arm each rate would pull from the same state (the history CDT made; LinTS
shares one draw z across the rates) and that arm's expected reward. The rounds after the
warm-up are cut into groups of 20 consecutive rounds (140 groups); a rate's group mean
reward is its mean over the group, centred by subtracting the mean over all rates in that
group; Figure 3 draws its mean and standard deviation over the groups against the rate.

Expected instead of drawn rewards: the simulation draws one noise value per round, shared
by every arm, so the drawn rewards of two rates differ by the same amount as their expected
rewards and centring over the rates removes the noise exactly (the linear model).

The sweep makes one cell per (algorithm, seed, ``check.rate``): the CDT run is the same for
every rate of one seed (a cell is a pure function of its config, and the rate is read only
after the run), and each cell reports its own rate's numbers, so the report draws them
against the rate axis.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from sweeper_tasks.bandit_tuning import cell
from sweeper_tasks.bandit_tuning.algorithms.base import BanditAlgorithm
from sweeper_tasks.bandit_tuning.results import horizon_of


def check_rates(settings: Mapping[str, Any]) -> np.ndarray:
    """The grid {first, first + step, ..., last} of ``settings`` (003 A.2: 0.3, 0.15, 9)."""
    first, last, step = (float(settings[k]) for k in ("first", "last", "step"))
    if not (step > 0 and last > first):
        raise ValueError(
            f"check.first/last/step must give a grid of two rates or more (step > 0, "
            f"last > first), got "
            f"{first}, {last}, {step}"
        )
    count = int(round((last - first) / step)) + 1
    return np.round(first + step * np.arange(count), 10)


def centred_group_means(rewards: np.ndarray, group_rounds: int) -> np.ndarray:
    """(G, R) group means of ``rewards`` (rounds x rates), each row minus its mean over rates.

    Rounds beyond the last whole group are dropped (A.2: 2800 rounds, 140 groups of 20).
    """
    groups = rewards.shape[0] // group_rounds
    if groups < 2:
        raise ValueError(
            f"need at least two groups of check.group_rounds={group_rounds} tuned rounds, got "
            f"{rewards.shape[0]} rounds; raise horizon or lower check.group_rounds"
        )
    means = rewards[: groups * group_rounds].reshape(groups, group_rounds, -1).mean(axis=1)
    return means - means.mean(axis=1, keepdims=True)


class RateProbe:
    """Pulls the tuner's rate and records every grid rate's expected reward, each round."""

    def __init__(self, rates: np.ndarray, horizon: int) -> None:
        self.rates = rates
        self.rewards = np.full((horizon, len(rates)), np.nan)

    def select(
        self,
        algorithm: BanditAlgorithm,
        features: np.ndarray,
        means: np.ndarray,
        hp: Mapping[str, float],
        t: int,
    ) -> int:
        arms_for_rates = getattr(algorithm, "arms_for_rates", None)
        if arms_for_rates is None:
            raise ValueError(
                f"the A.2 check needs an algorithm whose arm follows from its exploration rate "
                f"(linucb or lints), got {type(algorithm).__name__}"
            )
        arms = arms_for_rates(features, hp, np.append(self.rates, hp["exploration_rate"]))
        self.rewards[t - 1] = means[arms[:-1]]
        return int(arms[-1])


def validate(config: Mapping[str, Any]) -> None:
    """Refuse a config the check cannot run: the bandit cell's checks, then the grid's."""
    cell.validate(config)
    settings = config["check"]
    rates = check_rates(settings)
    if not np.isclose(rates, float(settings["rate"])).any():
        raise ValueError(
            f"check.rate={settings['rate']} is not on the grid {rates[0]}..{rates[-1]} step "
            f"{settings['step']}; choose one of its values"
        )
    algorithm, _tuner, _environment = cell.build_parts(config)
    if not hasattr(algorithm, "arms_for_rates") or algorithm.tuned != ["exploration_rate"]:
        raise ValueError(
            "the A.2 check tunes the exploration rate alone of linucb or lints; set "
            "algorithm=linucb or algorithm=lints with tuned: [exploration_rate]"
        )


def run_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """The bandit cell under CDT, plus A.2's rate check for the cell's ``check.rate``.

    Summary (besides the bandit cell's): ``group_reward``, the mean over groups of the
    centred group mean reward of ``check.rate``; ``group_reward_sd``, its standard
    deviation over groups; ``lipschitz_slope``, the larger of the two slopes |Δ mean| /
    step to the neighbouring grid rates (one at the ends); ``max_slope``, the largest
    slope anywhere on the grid in this run.
    """
    settings = config["check"]
    rates = check_rates(settings)
    probe = RateProbe(rates, horizon_of(config))
    result = cell.run_cell(config, probe=probe)
    tuned = probe.rewards[~np.isnan(probe.rewards).any(axis=1)]
    groups = centred_group_means(tuned, int(settings["group_rounds"]))
    mean = groups.mean(axis=0)
    slopes = np.abs(np.diff(mean)) / np.diff(rates)
    index = int(np.argmin(np.abs(rates - float(settings["rate"]))))
    neighbours = slopes[max(index - 1, 0) : index + 1]
    result["summary"].update(
        group_reward=float(mean[index]),
        group_reward_sd=float(groups[:, index].std(ddof=1)),
        lipschitz_slope=float(neighbours.max()),
        max_slope=float(slopes.max()),
        groups=float(len(groups)),
    )
    return result


run_cell.validate = validate
run_cell.data = cell.data
