"""The skyline gap (tasks/bandit_tuning/skyline.py) on hand-made cells."""

from __future__ import annotations

import pandas as pd
import pytest

from sweeper_tasks.bandit_tuning import skyline


def _cells(rows):
    return pd.DataFrame(rows).assign(status="FINISHED", algorithm="linucb", dataset="simulation")


def test_gap_to_the_best_fixed_value_on_shared_seeds_hand_worked():
    fixed = _cells(
        [
            {"tuner": "fixed", "α": a, "seed": s, "final_regret": r}
            for a, regrets in ((0.5, [10.0, 14.0]), (1.0, [8.0, 12.0]), (5.0, [30.0, 20.0]))
            for s, r in enumerate(regrets)
        ]  # fmt: skip
    )
    tuned = _cells(
        [
            {"tuner": "op", "seed": 0, "final_regret": 11.0},
            {"tuner": "op", "seed": 1, "final_regret": 15.0},
            {"tuner": "op", "seed": 2, "final_regret": 99.0},  # no fixed cell: not compared
            {"tuner": "cdt", "seed": 0, "final_regret": 9.0},
            {"tuner": "cdt", "seed": 1, "final_regret": 11.0},
        ]  # fmt: skip
    )
    gaps = skyline.skyline_gaps(tuned, fixed).set_index("tuner")
    # means over seeds 0, 1: 0.5 -> 12, 1 -> 10, 5 -> 25: the best fixed value is 1 (mean 10)
    assert set(gaps["best fixed value"]) == {1.0} and set(gaps["best fixed mean"]) == {10.0}
    # op: differences 11 - 8 = 3 and 15 - 12 = 3 -> gap 3, s.e. 0; cdt: 1 and -1 -> 0, s.e. 1
    assert gaps.loc["op", ["tuner mean", "gap", "gap s.e.", "seeds"]].tolist() == [13, 3, 0, 2]
    assert gaps.loc["cdt", "gap"] == 0 and gaps.loc["cdt", "gap s.e."] == pytest.approx(1.0)
    assert gaps.loc["op", "relative gap"] == pytest.approx(0.3)
    table = skyline.to_markdown(gaps.reset_index())
    assert (
        "| linucb | simulation | 1 | 10.0 | 13.0 (+3.0 ± 0.0, +30%) | 10.0 (+0.0 ± 1.0, +0%) |"
        in table
    )


def test_failed_cells_are_left_out():
    fixed = _cells([{"tuner": "fixed", "α": 1.0, "seed": 0, "final_regret": 5.0}])
    tuned = _cells([{"tuner": "op", "seed": 0, "final_regret": 7.0}]).assign(status="FAILED")
    assert skyline.skyline_gaps(tuned, fixed).empty
