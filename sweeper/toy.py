"""A toy cell for testing and benchmarking the orchestrator itself (``task=toy``).

It returns what a real cell returns (a summary, a curve of ``horizon`` steps, a trace of a
setting) in microseconds, and misbehaves on request through the config key
``toy`` (so each behaviour is part of the cell key):

- ``sleep_s``: seconds to sleep before returning (a cell that takes time);
- ``fail_seeds``: seeds that raise an exception (a cell with a bug);
- ``nan_seeds``: seeds whose summary is NaN (a cell that diverges);
- ``hang_seeds``: seeds that sleep forever (for ``launcher.timeout_s``);
- ``crash_seeds``: seeds whose worker process dies (``os._exit``), every attempt;
- ``crash_once_dir``: every cell's worker dies on its first attempt only (a marker file
  in this directory remembers the attempt), so Ray's retry finishes it;
- ``bad_results``: seed -> a result that cannot be recorded: its ``final_value`` is
  ``text`` ("abc"), ``none``, ``dict`` (a nested dict), ``float32_nan``
  (``np.float32("nan")``) or ``nan_text`` (the string "nan"), or its summary has a
  ``bad_key`` (a metric key MLflow refuses) (sweeper/outcome.py);
- ``pid_dir``: each cell writes its process id there (to check that a cancelled cell's
  process is really gone);
- ``batch_dir``: with ``cell=sweeper.toy.batched_toy_cell``, each batch writes the seeds
  it ran there (``batch-<first seed>.json``), so tests see how the launcher grouped them;
- ``shift``: added to the final value (an option that is worse by that much, paired by
  seed), and ``noise``: the standard deviation of a normal draw added to it, its own per
  (seed, shift) (a comparison that a few seeds settle, or never) (seeds until decided).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

BAD_VALUES = {
    "text": "abc",
    "none": None,
    "dict": {"nested": 1.0},
    "float32_nan": np.float32("nan"),
    "nan_text": "nan",
}
"""What ``toy.bad_results`` puts in place of a cell's ``final_value``."""
BAD_KEY = "bad key/../?*"


def toy_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    toy = dict(config.get("toy") or {})
    seed = int(config.get("seed", 0))
    horizon = int(config.get("horizon", 100))
    if toy.get("pid_dir"):
        Path(toy["pid_dir"], f"seed{seed}.pid").write_text(str(os.getpid()))
    if toy.get("crash_once_dir"):
        marker = Path(toy["crash_once_dir"], f"seed{seed}.crashed")
        if not marker.exists():
            marker.write_text(str(os.getpid()))
            os._exit(1)
    if seed in list(toy.get("crash_seeds") or []):
        os._exit(1)
    if seed in list(toy.get("hang_seeds") or []):
        while True:
            time.sleep(0.05)
    if toy.get("sleep_s"):
        time.sleep(float(toy["sleep_s"]))
    if seed in list(toy.get("fail_seeds") or []):
        raise RuntimeError(f"injected failure for seed {seed}")
    rng = np.random.default_rng(seed)
    increments = rng.uniform(0.0, 1.0, horizon) / np.sqrt(np.arange(1, horizon + 1))
    value = np.cumsum(increments)
    final = float(value[-1]) + float(toy.get("shift", 0.0))
    if toy.get("noise"):
        own = np.random.default_rng([seed, int(1000 * float(toy.get("shift", 0.0)))])
        final += float(toy["noise"]) * float(own.standard_normal())
    final = float("nan") if seed in list(toy.get("nan_seeds") or []) else final
    knob = rng.choice([0.1, 1.0, 2.0], size=(horizon, 1))
    summary: dict[str, Any] = {
        "final_value": final,
        "complement": float(horizon - final),
        "runtime_s": 0.0,
    }
    bad = (toy.get("bad_results") or {}).get(seed)
    if bad == "bad_key":
        summary[BAD_KEY] = 1.0
    elif bad is not None:
        summary["final_value"] = BAD_VALUES[bad]
    return {
        "summary": summary,
        "params": {"p": 1},
        "curves": {"value": value},
        "trace": {"names": ["knob"], "values": knob},
    }


STEP_BYTES = 40
"""The toy's memory per step: its increments, steps, their square roots, the cumulative
value and the knob's trace, float64 each."""


def validate(config: Mapping[str, Any]) -> None:
    """Refuse a toy config that cannot run, before any cell does: ``horizon`` is a positive
    whole number of steps whose arrays fit in this machine's memory."""
    horizon = config.get("horizon", 100)
    whole = isinstance(horizon, int) and not isinstance(horizon, bool)
    if not whole or horizon < 1:
        raise ValueError(
            f"horizon must be a positive whole number of steps, got {horizon!r} (e.g. horizon=100)"
        )
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    if horizon * STEP_BYTES > memory:
        raise ValueError(
            f"horizon={horizon:,} steps need {horizon * STEP_BYTES / 2**30:,.0f} GiB "
            f"({STEP_BYTES} bytes a step), more than this machine's {memory / 2**30:,.0f} GiB "
            "of memory: lower horizon"
        )


toy_cell.validate = validate


def batched_toy_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """``toy_cell`` with a batched form (``cell=sweeper.toy.batched_toy_cell``): the
    launcher's tests and fault trials of batches of seeds."""
    return toy_cell(config)


def toy_batch(configs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The batched form: the cells one after the other in one process, so a seed that
    fails, hangs or crashes does so inside the batch."""
    toy = dict(configs[0].get("toy") or {})
    if toy.get("batch_dir"):
        seeds = [int(c.get("seed", 0)) for c in configs]
        Path(toy["batch_dir"], f"batch-{seeds[0]}.json").write_text(json.dumps(seeds))
    return [toy_cell(config) for config in configs]


batched_toy_cell.validate = validate
batched_toy_cell.batch = toy_batch
