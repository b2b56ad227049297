"""One sweep cell: an (algorithm, tuner, dataset, seed) run of 003 Algorithm 2's double loop."""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import numpy as np
from threadpoolctl import threadpool_limits

from sweeper_tasks.bandit_tuning.algorithms.base import BanditAlgorithm
from sweeper_tasks.bandit_tuning.batch_cell import run_batch, unbatchable
from sweeper_tasks.bandit_tuning.batching import (
    BATCHED,
    ONE_AT_A_TIME,
    component_path,
    environment_path,
)
from sweeper_tasks.bandit_tuning.environments.base import Environment
from sweeper_tasks.bandit_tuning.results import (
    StateTrace,
    cell_result,
    horizon_of,
    space_params,
    spec_name,
)
from sweeper_tasks.bandit_tuning.seeding import agent_rngs, environment_rng
from sweeper_tasks.bandit_tuning.tuners.base import Tuner
from sweeper_tasks.building import build
from sweeper_tasks.storage import DataFile, data_files


def build_parts(config: Mapping[str, Any]) -> tuple[BanditAlgorithm, Tuner, Environment]:
    """The cell's algorithm, tuner and environment; constructors validate their settings.

    ``config['space']`` may override the interval or candidate set of every tuned
    hyperparameter at once (003 uses one interval [0.1, 5] and one candidate set for all).
    """
    algorithm_spec = dict(config["algorithm"])
    space = config.get("space") or {}
    overrides = {k: v for k, v in space.items() if v is not None}
    if overrides:
        algorithm = build(algorithm_spec)
        per_name = dict(algorithm_spec.get("hyperparameters") or {})
        for name in algorithm.tuned:
            per_name[name] = {**dict(per_name.get(name) or {}), **overrides}
        algorithm_spec["hyperparameters"] = per_name
    return build(algorithm_spec), build(config["tuner"]), build(config["dataset"])


def validate(config: Mapping[str, Any]) -> None:
    """Fail early, before any cell runs, on a config that cannot run (bad values, missing data)."""
    horizon_of(config)
    algorithm, _tuner, environment = build_parts(config)
    _ = algorithm.space  # interval and candidate checks happen here
    check = getattr(environment, "check", None)
    if check is not None:
        check()
    if algorithm.needs_parameter_norm and not environment.has_parameter:
        raise ValueError(
            f"algorithm.norm_bound is null (S = ||theta*|| of the instance, 003 Section 3) but "
            f"dataset {spec_name(config['dataset'])} has no model parameter theta*; set "
            "algorithm.norm_bound to a number (e.g. algorithm.norm_bound=1.0)"
        )


def data(config: Mapping[str, Any]) -> list[DataFile]:
    """The data files the cell's dataset reads, found without reading or downloading them
    (a dry run says them); ``validate`` then gets and checks them."""
    return data_files(build(config["dataset"]))


def prepare(
    config: Mapping[str, Any],
) -> tuple[BanditAlgorithm, Tuner, Environment, np.random.Generator]:
    """The cell's parts, reset for its horizon and seed as round 1 finds them, and the
    generator of the warm-up's random arms."""
    horizon = horizon_of(config)
    seed = int(config["seed"])
    algorithm, tuner, environment = build_parts(config)
    algorithm_rng, tuner_rng, warmup_rng = agent_rngs(
        seed, spec_name(config["algorithm"]), spec_name(config["tuner"])
    )
    environment.reset(horizon, algorithm.model, environment_rng(spec_name(config["dataset"]), seed))
    if algorithm.needs_parameter_norm:  # S = ||theta*|| of this instance (003 Section 3)
        algorithm.set_parameter_norm(environment.parameter_norm())
    algorithm.reset(environment.n_features, horizon, algorithm_rng)
    tuner.reset(algorithm.space, horizon, tuner_rng, algorithm.theoretical)
    return algorithm, tuner, environment, warmup_rng


def conformance(config: Mapping[str, Any], result: Mapping[str, Any]) -> list[str]:
    """What a finished cell's hyperparameter trace breaks of its tuner's declaration
    (:meth:`Tuner.proposes`): a proposal outside the declared interval or set, or a
    proposal that is not a finite number. The conformance check calls it
    (``python -m sweeper.check``)."""
    _algorithm, tuner, _environment, _ = prepare(config)
    names, values = result["trace"]["names"], np.asarray(result["trace"]["values"])
    warmup = int(result["summary"].get("warmup_rounds", 0))
    problems = []
    for column, h in enumerate(tuner.space):
        proposed = values[warmup:, column]
        if not np.all(np.isfinite(proposed)):
            problems.append(f"{names[column]}: a proposal is not a finite number")
            continue
        declared = tuner.proposes(h)
        if declared is None:
            continue
        kind, bounds = declared
        if kind == "interval":
            outside = proposed[(proposed < bounds[0] - 1e-9) | (proposed > bounds[1] + 1e-9)]
        else:
            outside = proposed[~np.isclose(proposed[:, None], np.asarray(bounds)).any(axis=1)]
        if outside.size:
            problems.append(
                f"{names[column]}: {outside.size} proposal(s) outside the declared {kind} "
                f"{list(bounds)}, e.g. {outside[0]:g}"
            )
    return problems


class Probe(Protocol):
    """Chooses the tuned rounds' arm in place of ``algorithm.select`` and may record what it
    saw (003 Appendix A.2's check, ``sweeper_tasks.bandit_tuning.lipschitz_check``)."""

    def select(
        self,
        algorithm: BanditAlgorithm,
        features: np.ndarray,
        means: np.ndarray,
        hp: Mapping[str, float],
        t: int,
    ) -> int: ...


def run_cell(config: Mapping[str, Any], probe: Probe | None = None) -> dict[str, Any]:
    """Run one cell and return its summary, curves and hyperparameter trace.

    ``config`` holds ``algorithm``, ``tuner`` and ``dataset`` (each a mapping with a
    ``_target_``), ``seed`` and ``horizon``. Each round t (1-based): the environment shows
    K arms; during the tuner's warm-up (T1) a uniformly random arm is pulled, afterwards
    the tuner proposes hyperparameters (the untuned ones stay at their theoretical
    values) and the algorithm picks an arm; the reward updates both layers. Regret is
    the expected reward of the best arm minus that of the pulled arm. ``probe``, if given,
    picks the arm of every tuned round instead of ``algorithm.select``.
    """
    started = time.perf_counter()
    horizon = horizon_of(config)
    algorithm, tuner, environment, warmup_rng = prepare(config)
    space = algorithm.space
    warmup = min(tuner.warmup_rounds(), horizon)

    instant_regret = np.empty(horizon)
    rewards = np.empty(horizon)
    trace = np.full((horizon, len(space)), np.nan)
    state_trace = StateTrace(horizon)
    names = [h.name for h in space]
    # Bound methods looked up once: the loop runs T times and the per-round budget is
    # tens of microseconds (bench/bench_algorithms.py).
    observe, draw_reward = environment.observe, environment.reward
    theoretical, select, update = algorithm.theoretical, algorithm.select, algorithm.update
    propose, tuner_observe, tuner_state = tuner.propose, tuner.observe, tuner.state
    # One BLAS thread: the cell's matrices are d x d with d ~ 25, where OpenBLAS threads
    # only contend (50x slower inverses on a loaded 2-core machine); Ray workers already
    # run with OMP_NUM_THREADS=1, this makes local and test runs match.
    with threadpool_limits(limits=1, user_api="blas"):
        for index in range(horizon):
            t = index + 1
            features, means = observe(index)
            hp = theoretical(t)
            if index < warmup:
                arm = int(warmup_rng.integers(environment.n_arms))
            else:
                proposal = propose(t)
                hp.update(proposal)
                trace[index] = [proposal[name] for name in names]
                arm = (
                    select(features, hp, t)
                    if probe is None
                    else probe.select(algorithm, features, means, hp, t)
                )
            reward = draw_reward(arm)
            update(features[arm], reward, hp, t)
            if index >= warmup:
                tuner_observe(reward)
                state_trace.record(index, tuner_state())
            instant_regret[index] = means.max() - means[arm]
            rewards[index] = reward

    return cell_result(
        started=started,
        instant_regret=instant_regret,
        rewards=rewards,
        warmup=warmup,
        params={**space_params(space), **tuner.params()},
        names=[h.name for h in space],
        values=trace,
        state=state_trace,
    )


def run_cells(configs: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Run cells whose configs differ only in their seed; each one's result, as ``run_cell``
    returns it for that config alone, to the last digit (docs/architecture.md, "Batches of
    seeds"). With a batched environment the seeds run as one array program
    (``batch_cell``), else one at a time. An exception of any seed is raised: the
    orchestrator then runs the cells one at a time, so that it fails that seed's cell only.
    """
    started = time.perf_counter()
    horizon = horizon_of(configs[0])
    parts = [prepare(config) for config in configs]
    algorithms, tuners, environments, warmup_rngs = (list(p) for p in zip(*parts, strict=True))
    if unbatchable(tuners, environments, horizon) is not None:
        return [run_cell(config) for config in configs]
    return run_batch(horizon, algorithms, tuners, environments, warmup_rngs, started)


def paths(config: Mapping[str, Any]) -> dict[str, str]:
    """How each part of the cell runs when its seeds run as one batch (``run_cells``):
    ``batched`` (the class declares a batched implementation), ``per seed`` (one object per
    seed inside the batch) or, when the environment declares none, ``one seed at a time``
    for all (``python -m sweeper.check`` reports it; docs/extending.md)."""
    algorithm, tuner, environment = build_parts(config)
    if environment_path(environment) == ONE_AT_A_TIME:
        return dict.fromkeys(("algorithm", "tuner", "dataset"), ONE_AT_A_TIME)
    return {
        "algorithm": component_path(algorithm),
        "tuner": component_path(tuner),
        "dataset": BATCHED,
    }


run_cell.validate = validate  # the driver calls it once per distinct config before dispatch
run_cell.data = data  # a dry run says what data the sweep needs, and whether it is there
run_cell.conformance = conformance  # sweeper.check holds each cell to its tuner's declaration
run_cell.build = build_parts  # sweeper.check pickles the built parts (as Ray would ship them)
run_cell.batch = run_cells  # the launcher sends a group's seeds as one task (sweeper/launch.py)
run_cell.paths = paths  # sweeper.check reports how each component runs in a batch
