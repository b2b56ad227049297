"""003 Appendix A.3 at a shorter horizon: restarts pay off, and the Oracle is lowest.

Two settings. The paper's text (experiment ``lipschitz``: a random layout, 000 Eq. 5) is
below; the released script's (experiment ``lipschitz_released``: its change points, peak
order, epoch H = 24000 and constants), scaled to T = 12000, is at the end of this file.

Zooming TS-R is CDT's top layer (000 Algorithm 1) with the epoch of A.3,
H = 10 ceil((T/c(T))^(3/4)), c(T) = 3. The TS scale here is the one of the authors' released
ZoomingTS_exp code, s0 = sqrt(pi/2 tau0^2 ln T) with tau0 = sqrt(0.1) the noise level (their
Figure4 script uses pi); with the
analysis constant 52 pi of 000 Eq. 5 every Thompson-sampling variant explores about ten times
more and loses to UCB Zooming (see bench/results/tuners.md).

Not asserted in the paper's setting: A.3's "Zooming TS-R beats Zooming". On random change
points it does not reproduce here (Zooming's UCB index keeps all active arms near the
leader's index and so recovers from a switch within a few hundred rounds, while TS-R waits
for its next restart); bench/bench_tuners.py measures it and bench/results/tuners.md
reports the numbers. In the released setting at T = 12000 it does hold (the slow test at
the end); at longer horizons it holds for the triangle family only, or not at all,
depending on the start rule (the bench).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from sweeper.grid import expand
from sweeper_tasks.bandit_tuning.lipschitz_cell import at_horizon, run_cell

NOISE = math.sqrt(0.1)
TS = {"tau0": NOISE, "ts_constant": math.pi / 2}


def tuners(horizon: int) -> dict[str, dict]:
    cdt = "sweeper_tasks.bandit_tuning.tuners.cdt.CDT"
    return {
        "ts_r": {
            "_target_": cdt,
            "name": "cdt",
            "warmup_rounds": 0,
            "expected_changes": 3,
            "restart_multiplier": 10.0,
            **TS,
        },
        "ts_no_restart": {
            "_target_": cdt,
            "name": "cdt",
            "warmup_rounds": 0,
            "restart_every": horizon,
            **TS,
        },
        "oracle": {
            "_target_": "sweeper_tasks.bandit_tuning.tuners.oracle.Oracle",
            "name": "oracle",
            **TS,
        },
        "zooming": {
            "_target_": "sweeper_tasks.bandit_tuning.tuners.zooming.Zooming",
            "name": "zooming",
            "tau0": NOISE,
        },
    }


def mean_regret(horizon: int, seeds: int, family: str, names: list[str]) -> dict[str, float]:
    dataset = {
        "_target_": "sweeper_tasks.bandit_tuning.environments.lipschitz.SwitchingLipschitz",
        "name": "lipschitz",
        "family": family,
        "layout_seed": 0,
    }
    out = {}
    for name in names:
        config = {"tuner": tuners(horizon)[name], "dataset": dataset, "horizon": horizon}
        runs = [run_cell({**config, "seed": s})["summary"]["final_regret"] for s in range(seeds)]
        out[name] = float(np.mean(runs))
    return out


def test_restarts_pay_off_and_the_oracle_is_lowest_fast():
    regret = mean_regret(12000, 3, "triangle", ["ts_r", "ts_no_restart", "oracle"])
    assert regret["oracle"] < regret["ts_r"] < regret["ts_no_restart"], regret


@pytest.mark.slow
@pytest.mark.parametrize("family", ["triangle", "sine"])
def test_restarts_pay_off_and_the_oracle_is_lowest(family):
    names = ["ts_r", "ts_no_restart", "oracle", "zooming"]
    regret = mean_regret(30000, 5, family, names)
    assert regret["oracle"] < regret["ts_r"] < regret["ts_no_restart"], regret
    assert regret["oracle"] < regret["zooming"], regret


def released_cells(composer, seeds: int) -> list:
    """The ``lipschitz_released`` experiment's cells at its own horizon (T = 90000)."""
    overrides = ["+exp=lipschitz_released", f"seeds={seeds}"]
    return expand(composer(overrides), composer, overrides)


def test_released_experiment_keeps_the_released_layout(composer):
    cells = released_cells(composer, 1)
    assert {c.tags["tuner"] for c in cells} == {"cdt", "zooming", "oracle"}
    (restart,) = {c.config["tuner"]["restart_every"] for c in cells if c.tags["tuner"] == "cdt"}
    assert restart == 24000
    short = at_horizon(next(c.config for c in cells if c.tags["tuner"] == "cdt"), 3000)
    assert short["dataset"]["change_points"] == [762, 1591, 2493]  # 22861 / 30, ...
    assert short["tuner"]["restart_every"] == 800
    result = run_cell(short)
    assert result["params"]["peaks"] == "[0.95, 0.7, 0.05, 0.45]"
    assert result["params"]["change_points"] == "[762, 1591, 2493]"


@pytest.mark.slow
def test_released_setting_zooming_ts_r_beats_zooming_and_the_oracle_is_lowest(composer):
    """003 A.3's claim in the released setting at T = 12000, 10 seeds, both families."""
    regret: dict[tuple[str, str], list[float]] = {}
    for cell in released_cells(composer, 10):
        key = (cell.config["dataset"]["family"], cell.tags["tuner"])
        config = at_horizon(cell.config, 12000)  # layout and epoch scaled to T = 12000
        regret.setdefault(key, []).append(run_cell(config)["summary"]["final_regret"])
    for family in ("triangle", "sine"):
        mean = {t: float(np.mean(regret[(family, t)])) for t in ("cdt", "zooming", "oracle")}
        assert mean["oracle"] < mean["cdt"] < mean["zooming"], (family, mean)
