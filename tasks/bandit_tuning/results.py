"""What a cell returns, shared by the bandit cell and the Lipschitz cell.

The orchestrator records this shape: ``summary`` (scalars: final_regret,
cumulative_reward, runtime_s, warmup_rounds), ``params`` (settings derived at run time),
``curves`` (cumulative regret and reward per round) and ``trace`` (the hyperparameters used
each round, under ``names``/``values``, plus the tuner's per-round state sizes).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from sweeper_tasks.bandit_tuning.space import Hyperparameter


def spec_name(spec: Mapping[str, Any]) -> str:
    """The config's ``name`` (what tags the run), else its ``_target_``."""
    return str(spec.get("name") or spec["_target_"])


ROUND_BYTES = 32
"""The least memory a cell holds per round: its instantaneous regret and reward, one traced
hyperparameter and the cumulative regret, float64 each (its other per-round arrays aside)."""


def horizon_of(config: Mapping[str, Any]) -> int:
    """T from the config, refused early when it is not a positive whole number of rounds, or
    when T rounds need more memory than this machine has (a MemoryError in every cell)."""
    value = config["horizon"]
    whole = isinstance(value, int) or (isinstance(value, float) and value.is_integer())
    if isinstance(value, bool) or not whole or value <= 0:
        raise ValueError(
            f"horizon must be a positive whole number of rounds (horizon=T), got {value!r}"
        )
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if value * ROUND_BYTES > memory:
        raise ValueError(
            f"horizon={int(value):,} rounds need at least {value * ROUND_BYTES / 2**30:,.0f} "
            f"GiB ({ROUND_BYTES} bytes a round for the cell's per-round arrays), more than "
            f"this machine's {memory / 2**30:,.0f} GiB of memory: lower horizon"
        )
    return int(value)


class StateTrace:
    """Per-round tuner state (e.g. CDT's active arms); each key is allocated once, NaN-filled."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.arrays: dict[str, np.ndarray] = {}

    def record(self, index: int, state: Mapping[str, float]) -> None:
        for key, value in state.items():
            if key not in self.arrays:
                self.arrays[key] = np.full(self.horizon, np.nan)
            self.arrays[key][index] = value


def space_params(space: Sequence[Hyperparameter]) -> dict[str, Any]:
    """The tuned space as run params: p, names, each interval and candidate set."""
    return {
        "p": len(space),
        "tuned": ",".join(h.name for h in space),
        **{f"interval.{h.name}": f"[{h.interval[0]}, {h.interval[1]}]" for h in space},
        **{f"candidates.{h.name}": str(list(h.candidates)) for h in space},
        **{f"n_candidates.{h.name}": len(h.candidates) for h in space},
    }


def cell_result(
    *,
    started: float,
    instant_regret: np.ndarray,
    rewards: np.ndarray,
    warmup: int,
    params: Mapping[str, Any],
    names: Sequence[str],
    values: np.ndarray,
    state: StateTrace,
    shared_by: int = 1,
) -> dict[str, Any]:
    """Assemble a cell's result from its per-round regret, rewards and traces.

    ``runtime_s`` is the time since ``started`` divided by ``shared_by``: the cells of a
    batch (``batch_cell``) share its time equally."""
    regret = np.cumsum(instant_regret)
    return {
        "summary": {
            "final_regret": float(regret[-1]),
            "cumulative_reward": float(rewards.sum()),
            "runtime_s": (time.perf_counter() - started) / shared_by,
            "warmup_rounds": warmup,
        },
        "params": dict(params),
        "curves": {"regret": regret, "reward": np.cumsum(rewards)},
        "trace": {"names": list(names), "values": values, **state.arrays},
    }
