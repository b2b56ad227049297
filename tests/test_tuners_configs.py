"""Every tuner config composes, validates and runs a short cell for p = 1 and p = 2."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.grid import cell_config, group_options
from tasks.bandit_tuning.cell import run_cell

TUNERS = [
    "theory",
    "fixed",
    "op",
    "tl",
    "tl_combined",
    "syndicated",
    "cdt",
    "zooming_ts_double_restart",
    "zooming",
    "oracle",
    "sd2me",
    "ad2me",
]


def test_every_tuner_name_of_the_design_has_a_config():
    assert set(TUNERS) <= set(group_options("tuner"))


@pytest.mark.parametrize("tuner", TUNERS)
@pytest.mark.parametrize("tuned", ["[exploration_rate]", "[exploration_rate,regularisation]"])
def test_tuner_runs_a_short_cell(composer, tuner, tuned):
    config = cell_config(
        composer(
            [
                f"tuner={tuner}",
                "algorithm=linucb",
                f"algorithm.tuned={tuned}",
                "horizon=200",
                "seed=3",
                "space.interval=[0.1,5]",
            ]
        )
    )
    run_cell.validate(config)
    result = run_cell(config)
    values = result["trace"]["values"]
    warmup = result["summary"]["warmup_rounds"]
    assert values.shape == (200, len(result["trace"]["names"]))
    assert np.all(np.isnan(values[:warmup])) and np.all(np.isfinite(values[warmup:]))
    continuum = ("cdt", "zooming_ts_double_restart", "zooming", "oracle", "sd2me", "ad2me")
    if tuner in continuum:  # they search the box [0.1, 5]^p; the others a candidate set
        assert np.all((values[warmup:] >= 0.1 - 1e-12) & (values[warmup:] <= 5 + 1e-12))
    assert np.isfinite(result["summary"]["final_regret"])
    if tuner in ("cdt", "zooming_ts_double_restart", "zooming", "oracle"):
        assert np.nanmax(result["trace"]["active_arms"]) >= 1
        assert "T1" in result["params"]
