"""Every tuner config composes, validates and runs a short cell for p = 1 and p = 2."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.grid import cell_config, group_options
from sweeper_tasks.bandit_tuning.cell import run_cell

TUNERS = [
    "theory",
    "fixed",
    "op",
    "op_released",
    "tl",
    "tl_combined",
    "syndicated",
    "cdt",
    "cdt_released",
    "zooming_ts_double_restart",
    "zooming",
    "oracle",
    "sd2me",
    "ad2me",
]
CONTINUUM = TUNERS[TUNERS.index("cdt") :]  # the tuners that search a box, not a candidate set
ZOOMING = TUNERS[TUNERS.index("cdt") : TUNERS.index("sd2me")]  # ... by zooming: active arms


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
    if tuner in CONTINUUM:  # they search the box [0.1, 5]^p (released: its own [0, 4])
        low, high = (0.0, 4.0) if tuner == "cdt_released" else (0.1, 5.0)
        assert np.all((values[warmup:] >= low - 1e-12) & (values[warmup:] <= high + 1e-12))
    assert np.isfinite(result["summary"]["final_regret"])
    if tuner in ZOOMING:
        assert np.nanmax(result["trace"]["active_arms"]) >= 1
        assert "T1" in result["params"]


def test_cdt_released_is_the_released_index_beside_the_papers_cdt(composer):
    """cdt_released: s0 = sqrt(13) without ln T and T1 = 30; cdt keeps 000 Eq. 5."""
    config = cell_config(
        composer(["tuner=cdt_released", "algorithm=linucb", "horizon=2000", "seed=1"])
    )
    result = run_cell(config)
    assert result["summary"]["warmup_rounds"] == 30
    assert result["params"]["zooming.ts_scale"] == pytest.approx(np.sqrt(13.0))
    # HEAD d67bc02: H = T (no restart), r over ln T of the whole horizon, rate 4x on [0, 4],
    # the first point uniform in [0.3, 0.7] of the unit box
    assert result["params"]["T2"] == 2000 and np.nanmax(result["trace"]["restarts"]) == 0
    assert result["params"]["zooming.radius_1"] == pytest.approx(np.sqrt(6.5 * np.log(2000)))
    rates = result["trace"]["values"][30:, 0]
    assert 4 * 0.3 <= rates[0] <= 4 * 0.7 and rates.min() >= 0 and rates.max() <= 4
    paper = run_cell(
        cell_config(composer(["tuner=cdt", "algorithm=linucb", "horizon=2000", "seed=1"]))
    )
    T1 = paper["summary"]["warmup_rounds"]
    assert T1 == 44  # floor(2000^(1/2))
    scale = np.sqrt(52 * np.pi * 0.25 * np.log(2000 - T1))  # 000 Eq. 5 over horizon T - T1
    assert paper["params"]["zooming.ts_scale"] == pytest.approx(scale)
