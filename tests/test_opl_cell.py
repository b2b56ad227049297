"""The OPL cells end to end: result shapes and facts per experiment family, the OBD loader on
small files in OBD's format, and the one-paragraph refusals of bad input."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from sweeper_tasks.opl_hpo import bounds_cell
from sweeper_tasks.opl_hpo.cell import run_cell
from sweeper_tasks.opl_hpo.data import obd
from sweeper_tasks.storage import DatasetFormatError, DatasetMissingError
from tests.test_opl_procedures import BASELINE, cir, synthetic_config

ITEMS = 3


def write_obd(root: Path, campaign: str = "men", n: int = 60, seed: int = 0) -> Path:
    """bts and random logs of ``n`` rows in OBD's column layout, with a manifest."""
    rng = np.random.default_rng(seed)
    names = []
    for policy in obd.POLICIES:
        directory = root / policy / campaign
        directory.mkdir(parents=True)
        table = pd.DataFrame(
            {
                "timestamp": np.arange(n),
                "item_id": rng.integers(0, ITEMS, n),
                "position": rng.integers(1, 4, n),
                "click": (rng.random(n) < 0.3).astype(int),
                "propensity_score": rng.uniform(0.1, 0.9, n)
                if policy == "bts"
                else np.full(n, 1 / ITEMS),
                **{f: rng.choice(["a1", "b2", "c3"], n) for f in obd.USER_FEATURES},
                **{f"user-item_affinity_{i}": rng.random(n) for i in range(ITEMS)},
            }
        )
        table.to_csv(directory / f"{campaign}.csv")
        pd.DataFrame({"item_id": range(ITEMS), "item_feature_0": rng.random(ITEMS)}).to_csv(
            directory / "item_context.csv"
        )
        names += [f"{policy}/{campaign}/{campaign}.csv", f"{policy}/{campaign}/item_context.csv"]
    obd.write_manifest(root, names)
    return root


def test_obd_loader_reads_the_files_it_was_given(tmp_path):
    root = write_obd(tmp_path / "obd")
    data = obd.OBDLoggedData(path=str(root)).generate(np.random.default_rng(0))
    bts = pd.read_csv(root / "bts/men/men.csv", index_col=0)
    random_log = pd.read_csv(root / "random/men/men.csv", index_col=0)
    assert data.n_actions == ITEMS
    assert data.train.n + data.val.n == len(bts) and data.train.n == 30
    # rows are bts rows: the logged propensities and clicks come from the file
    pairs = set(zip(bts["propensity_score"], bts["click"], strict=True))
    assert set(zip(data.val.pscore, data.val.r, strict=True)) <= pairs
    # contexts: three one-hot user features of three categories each
    assert data.val.x.shape[1] == 12 and np.all(data.val.x.sum(axis=1) == 4)
    # the test value is IPS on the random log: a uniform policy gets the mean click
    uniform = np.full((len(random_log), ITEMS), 1 / ITEMS)
    assert data.test.value(uniform) == pytest.approx(random_log["click"].mean())
    assert np.allclose(data.val.pi0.sum(axis=1), 1.0)


def test_obd_loader_refuses_a_corrupted_file(tmp_path):
    root = write_obd(tmp_path / "obd")
    path = root / "random/men/men.csv"
    path.write_bytes(path.read_bytes().replace(b",0,", b",1,", 1))
    with pytest.raises(DatasetFormatError, match="SHA-256"):
        obd.OBDLoggedData(path=str(root)).check()


def test_obd_without_manifest_is_checked_against_the_wheel(tmp_path):
    root = write_obd(tmp_path / "obd")
    (root / obd.MANIFEST).unlink()
    with pytest.raises(DatasetFormatError, match="not the expected"):
        obd.OBDLoggedData(path=str(root)).check()


def obd_config(path: Path, procedure=BASELINE, estimator="ips") -> dict:
    config = synthetic_config(procedure, sampler="random", n_trials=6)
    config["logged_data"] = {
        "_target_": "sweeper_tasks.opl_hpo.data.obd.OBDLoggedData",
        "name": "obd",
        "path": str(path),
    }
    config["estimator"] = {
        "_target_": f"sweeper_tasks.opl_hpo.estimators.{estimator.upper()}",
        "name": estimator,
    }
    return config


def check_result(result: dict, n: int) -> None:
    assert set(result) == {"summary", "params", "curves", "trace"}
    for name, value in result["summary"].items():
        assert np.isfinite(value), name
    for name, curve in result["curves"].items():
        assert curve.shape == (n,) and np.all(np.isfinite(curve)), name
    assert result["trace"]["values"].shape == (n, len(result["trace"]["names"]))
    assert np.all(np.isfinite(result["trace"]["values"]))


def test_opl_hpo_cell_on_obd_files(tmp_path):
    root = write_obd(tmp_path / "obd", n=200)
    for procedure, estimator in ((BASELINE, "ips"), (cir(), "dr")):
        result = run_cell(obd_config(root, procedure, estimator))
        check_result(result, 6)
        # the selected policy's value is the generalisation value times V(pi0)
        s = result["summary"]
        assert s["value"] == pytest.approx(s["generalisation"] * s["v_pi0"])


def test_opl_hpo_cell_synthetic_shapes_and_best_so_far_curves():
    n = 12
    results = {
        name: run_cell(synthetic_config(proc, sampler="random", n_trials=n, beta0=3.0))
        for name, proc in (("baseline", BASELINE), ("cir_hpo", cir()))
    }
    for result in results.values():
        check_result(result, n)
        surrogate = result["curves"]["best_surrogate"]
        assert np.all(np.diff(surrogate) >= 0)  # the incumbent's score never decreases
        assert 0 <= result["summary"]["pi0_optimality"] <= 1
    # paired: the same logged data, hence the same V(pi0), for both procedures
    assert results["baseline"]["params"]["v_pi0"] == results["cir_hpo"]["params"]["v_pi0"]
    assert np.all(results["cir_hpo"]["curves"]["alpha"] >= 0)
    assert np.all(results["baseline"]["curves"]["alpha"] == 0)


def test_sensitivity_and_ablation_configs_run():
    for procedure in (cir(delta=0.3, gamma=0.1), cir(cso=False), cir(air=False)):
        result = run_cell(synthetic_config(procedure, n_trials=8))
        check_result(result, 8)
    no_air = run_cell(synthetic_config(cir(air=False), n_trials=8))
    assert np.all(no_air["curves"]["alpha"] == 0)


def test_bounds_cell_shapes():
    config = {
        "seed": 1,
        "delta": 0.05,
        "n_repeats": 30,
        "logged_data": synthetic_config(BASELINE)["logged_data"],
    }
    result = bounds_cell.run_cell(config)
    check_result(result, 30)
    s = result["summary"]
    # beta0 = 20: a near-deterministic pi0, huge w_max, Hoeffding looser than Bernstein
    assert s["hoeffding_value"] < s["bernstein_value"] < s["t_test_value"] < s["ips"]


BAD = [
    (("logged_data", "beta0"), float("nan"), "beta0=nan is not a finite number"),
    (("procedure", "delta"), 1.5, r"procedure.delta=1.5 is outside \(0, 1\)"),
    (("procedure", "delta"), 0.0, r"procedure.delta=0.0 is outside \(0, 1\)"),
]


@pytest.mark.parametrize("where, value, message", BAD)
def test_bad_settings_are_refused_with_their_message(where, value, message):
    config = synthetic_config(cir())
    config[where[0]][where[1]] = value
    with pytest.raises(ValueError, match=message):
        run_cell.validate(config)


def test_empty_search_space_is_refused():
    config = synthetic_config(cir())
    config["policy_space"] = {"_target_": "sweeper_tasks.opl_hpo.policy.PolicySpace", "models": []}
    with pytest.raises(ValueError, match="search space is empty"):
        run_cell.validate(config)
    space = "sweeper_tasks.opl_hpo.policy.PolicySpace"
    config["policy_space"] = {"_target_": space, "beta": [5, 1]}
    with pytest.raises(ValueError, match="policy_space.beta"):
        run_cell.validate(config)


@pytest.mark.parametrize("group, valid", [("estimator", "ips, dr"), ("sampler", "tpe, random")])
def test_unknown_estimator_or_sampler_names_the_valid_ones(group, valid):
    config = copy.deepcopy(synthetic_config(cir()))
    config[group] = {"_target_": "sweeper_tasks.opl_hpo.estimators.SNIPS", "name": "snips"}
    with pytest.raises(ValueError) as caught:
        run_cell.validate(config)
    text = str(caught.value)
    for name in valid.split(", "):
        assert f"{name} (" in text


def test_missing_obd_file_says_how_to_get_it(tmp_path):
    with pytest.raises(ValueError, match="make obd"):
        run_cell.validate(obd_config(tmp_path / "nowhere"))
    with pytest.raises(DatasetMissingError, match="is missing"):
        obd.OBDLoggedData(path=str(tmp_path / "nowhere")).check()


def test_bad_trial_budget_is_refused():
    config = synthetic_config(cir())
    config["n_trials"] = 0
    with pytest.raises(ValueError, match="n_trials=0"):
        run_cell.validate(config)
