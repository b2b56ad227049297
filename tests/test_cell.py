"""The cell: deterministic, paired across tuners (common random numbers)."""

from __future__ import annotations

import numpy as np
import pytest

from sweeper.grid import cell_config
from sweeper_tasks.bandit_tuning.cell import run_cell
from tests import recording


def _config(composer, *overrides: str) -> dict:
    return cell_config(composer(["horizon=300", *overrides]))


def test_same_config_gives_bit_identical_curves(composer):
    config = _config(composer, "algorithm=lints", "tuner=tl", "seed=4")
    first, second = run_cell(config), run_cell(config)
    assert np.array_equal(first["curves"]["regret"], second["curves"]["regret"])
    assert np.array_equal(first["trace"]["values"], second["trace"]["values"], equal_nan=True)


def test_different_seeds_give_different_curves(composer):
    a = run_cell(_config(composer, "seed=0"))["curves"]["regret"]
    b = run_cell(_config(composer, "seed=1"))["curves"]["regret"]
    assert not np.array_equal(a, b)


def test_tuners_with_the_same_seed_see_the_same_environment(composer):
    target = "+dataset.record_as"
    runs = {}
    for tuner in ("theory", "fixed", "tl"):
        config = _config(
            composer,
            f"tuner={tuner}",
            "seed=7",
            "dataset._target_=tests.recording.RecordingSimulation",
            f"{target}={tuner}",
        )
        runs[tuner] = run_cell(config)
    # Different tuners pull different arms ...
    assert not np.array_equal(runs["theory"]["curves"]["regret"], runs["fixed"]["curves"]["regret"])
    # ... but every round's features and noise are the same for all of them.
    for tuner in ("fixed", "tl"):
        seen, reference = recording.SEEN[tuner], recording.SEEN["theory"]
        assert len(seen) == len(reference) == 600
        for mine, theirs in zip(seen, reference, strict=True):
            np.testing.assert_allclose(mine, theirs, rtol=0, atol=1e-12)


def test_cell_reports_summary_curve_and_trace(composer):
    result = run_cell(_config(composer, "tuner=tl"))
    regret = result["curves"]["regret"]
    assert regret.shape == (300,)
    assert np.all(np.diff(regret) >= 0), "cumulative regret never decreases"
    assert result["summary"]["final_regret"] == pytest.approx(regret[-1])
    assert result["trace"]["names"] == ["exploration_rate"]
    chosen = set(np.unique(result["trace"]["values"]))
    assert chosen <= {0.1, 1.0, 2.0, 3.0, 4.0, 5.0} and len(chosen) > 1


def test_non_positive_horizon_is_refused(composer):
    with pytest.raises(ValueError, match="horizon must be a positive"):
        run_cell(_config(composer, "horizon=0"))
