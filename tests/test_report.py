"""The report on small real sweeps: its numbers against the runs' own artifacts."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from hydra import compose, initialize_config_dir
from mlflow import MlflowClient
from omegaconf import OmegaConf
from scipy import stats

from sweeper.configs import ConfigSearch
from sweeper.paths import CONF_DIR
from sweeper.report import build_report
from sweeper.report.__main__ import main as report_main
from sweeper.report.load import ReportError, load_experiment
from sweeper.store.parent import SweepRun
from sweeper.store.tracking import Tracker
from sweeper.sweep import run_sweep

SMALL = ["seeds=3", "horizon=100", "launcher.name=local"]
FAIL = ["cell=tests.report_helpers.failing_cell", "+fail.tuner=tl", "+fail.seed=1"]
C1 = [0.1, 1, 2, 3, 4, 5]
C2 = [0.1, 0.5, 1]


@pytest.fixture(scope="module")
def store(tmp_path_factory) -> dict:
    """Three experiments in one sqlite store (local launcher, T=100).

    rep_main: smoke (2 algorithms x 3 tuners x 3 seeds) where TL fails for seed 1.
    rep_missing: LinUCB, Theory with seeds 0-2 and TL with seeds 0-1 (two sweeps), then
    TL rerun (a second FINISHED run per cell), and one cell dropped from a cells table.
    rep_pivot: LinUCB x TL x two candidate sets, 2 seeds.
    """
    root = tmp_path_factory.mktemp("report")
    uri = f"sqlite:///{root}/mlflow.db"
    with (
        pytest.MonkeyPatch.context() as mp,
        initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"),
    ):
        mp.delenv("MLFLOW_TRACKING_URI", raising=False)

        def composer(overrides):
            return compose(config_name="config", overrides=list(overrides))

        def sweep(name, *extra, grid=None):
            overrides = ["+exp=smoke", *SMALL, f"tracking.uri={uri}", *extra]
            overrides.append(f"experiment.name={name}")
            cfg = composer(overrides)
            if grid is not None:
                OmegaConf.update(cfg, "sweep.grid", grid, merge=False)
            return run_sweep(cfg, composer, overrides, out=io.StringIO())

        main = sweep("rep_main", *FAIL)
        assert len(main.failed) == 2 and main.finished == 16
        sweep("rep_missing", "algorithm=linucb", "tuner=theory")
        sweep("rep_missing", "algorithm=linucb", "tuner=tl", "seeds=2")
        rerun = sweep("rep_missing", "algorithm=linucb", "tuner=tl", "seeds=2", "rerun=true")
        assert rerun.finished == 2
        grid = {
            "algorithm": ["linucb"],
            "tuner": ["tl"],
            "dataset": ["simulation"],
            "space.candidates": [C1, C2],
        }
        pivot = sweep("rep_pivot", "seeds=2", grid=grid)
        assert pivot.finished == 4
    return {"uri": uri, "root": root}


@pytest.fixture
def uri(store, monkeypatch) -> str:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return store["uri"]


def _runs(uri: str, name: str) -> list:
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(name)
    return [r for r in client.search_runs([experiment.experiment_id]) if "cell_key" in r.data.tags]


def _final_from_npz(uri: str, run) -> float:
    path = MlflowClient(uri).download_artifacts(run.info.run_id, "cell.npz")
    with np.load(path) as npz:
        return float(npz["curve_regret"][-1])


def _npz_finals(uri: str, name: str) -> pd.DataFrame:
    rows = []
    for run in _runs(uri, name):
        tags = run.data.tags
        final = _final_from_npz(uri, run) if run.info.status == "FINISHED" else np.nan
        rows.append(
            {
                "algorithm": tags["algorithm"],
                "tuner": tags["tuner"],
                "seed": int(tags["seed"]),
                "status": run.info.status,
                "final": final,
                "runtime": run.data.metrics.get("runtime_s", np.nan),
                "start": run.info.start_time,
                "run_id": run.info.run_id,
            }
        )
    return pd.DataFrame(rows)


def test_table_values_equal_the_runs_artifacts(uri, tmp_path):
    report = build_report("rep_main", tmp_path / "out", uri)
    regret = pd.read_csv(tmp_path / "out" / "tables" / "regret.csv")
    runtime = pd.read_csv(tmp_path / "out" / "tables" / "runtime.csv")
    truth = _npz_finals(uri, "rep_main")
    names = {"linucb": "LinUCB", "lints": "LinTS", "theory": "Theory", "fixed": "Fixed", "tl": "TL"}
    assert len(regret) == 6
    for (algorithm, tuner), group in truth.groupby(["algorithm", "tuner"]):
        row = regret[(regret.Algorithm == names[algorithm]) & (regret.Tuner == names[tuner])]
        finished = group[group.status == "FINISHED"]
        assert int(row.n.iloc[0]) == len(finished)
        assert int(row.n_failed.iloc[0]) == (1 if tuner == "tl" else 0)
        assert np.isclose(row["mean"].iloc[0], finished.final.mean())
        assert np.isclose(row["std"].iloc[0], finished.final.std(ddof=1))
        time_row = runtime[
            (runtime.Algorithm == names[algorithm]) & (runtime.Tuner == names[tuner])
        ]
        assert np.isclose(time_row["mean"].iloc[0], finished.runtime.mean())
    assert report.failed == 2
    md = (tmp_path / "out" / "tables" / "regret.md").read_text()
    assert "| LinUCB | Simulation |" in md and "(2 seeds; 1 failed)" in md


def test_failed_cells_are_listed_with_their_error(uri, tmp_path):
    build_report("rep_main", tmp_path, uri)
    failed = pd.read_csv(tmp_path / "tables" / "failed.csv")
    assert len(failed) == 2 and set(failed.seed) == {1}
    assert failed.error.str.contains("deliberate failure of tl seed 1").all()
    assert set(failed.cell) == {"LinUCB/TL/Simulation", "LinTS/TL/Simulation"}
    page = (tmp_path / "index.html").read_text()
    assert "deliberate failure of tl seed 1" in page and "2 FAILED" in page


def test_paired_differences_use_matched_seeds_only(uri, tmp_path):
    build_report("rep_main", tmp_path, uri, reference="theory")
    paired = pd.read_csv(tmp_path / "tables" / "paired.csv", dtype={"excluded_seeds": str})
    truth = _npz_finals(uri, "rep_main")
    for algorithm, name in (("linucb", "LinUCB"), ("lints", "LinTS")):
        ref = truth[(truth.algorithm == algorithm) & (truth.tuner == "theory")].set_index("seed")
        for tuner, label, seeds in (("tl", "TL", [0, 2]), ("fixed", "Fixed", [0, 1, 2])):
            mine = truth[(truth.algorithm == algorithm) & (truth.tuner == tuner)].set_index("seed")
            d = np.array([mine.final[s] - ref.final[s] for s in seeds])
            row = paired[(paired.Algorithm == name) & (paired.Tuner == label)].iloc[0]
            assert row.n_pairs == len(seeds)
            assert row.n_excluded == 3 - len(seeds)
            assert str(row.excluded_seeds) == ("1" if tuner == "tl" else "nan")  # nan: none
            half = stats.t.ppf(0.975, len(d) - 1) * d.std(ddof=1) / np.sqrt(len(d))
            assert np.isclose(row.difference, d.mean())
            assert np.isclose(row.ci_low, d.mean() - half)
            assert np.isclose(row.ci_high, d.mean() + half)
            assert np.isclose(row.p_wilcoxon, stats.wilcoxon(d).pvalue)


def test_seeds_missing_for_one_tuner_are_excluded_and_counted(uri, tmp_path):
    build_report("rep_missing", tmp_path, uri, reference="theory")
    paired = pd.read_csv(tmp_path / "tables" / "paired.csv", dtype={"excluded_seeds": str})
    assert len(paired) == 1
    row = paired.iloc[0]
    assert row.Tuner == "TL" and row.n_pairs == 2 and row.n_excluded == 1
    assert str(row.excluded_seeds) == "2"
    md = (tmp_path / "tables" / "paired.md").read_text()
    assert "seed 2 missing here" in md


def test_sweeps_are_combined_and_the_newest_run_of_a_cell_counts(uri, tmp_path):
    truth = _npz_finals(uri, "rep_missing")
    newest = truth.sort_values("start").groupby(["tuner", "seed"]).tail(1)
    assert len(truth) == 7 and len(newest) == 5
    report = build_report("rep_missing", tmp_path, uri)
    assert sorted(report.cells.run_id) == sorted(newest.run_id)
    assert any("ignored" in note for note in report.notes)


def test_cells_missing_from_the_tables_are_read_from_their_runs(uri, tmp_path, replace_table):
    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name("rep_missing")
    parents = client.search_runs([experiment.experiment_id], "tags.role = 'sweep'")
    tracker = Tracker(uri, "rep_missing")
    tables = {p.info.run_id: SweepRun(tracker, p.info.run_id).rows() for p in parents}
    parent, table = next((k, t) for k, t in tables.items() if set(t.tuner) == {"theory"})
    dropped = table.iloc[0]
    # As a driver killed between logging the run and flushing its table leaves it: the
    # table lacks the run, and its last flush (tag table_until) came before the run.
    replace_table(tracker, parent, table.iloc[1:])
    client.set_tag(parent, "table_until", str(int(dropped.start_time) - 1))

    report = build_report("rep_missing", tmp_path, uri)
    row = report.cells.set_index("run_id").loc[dropped.run_id]
    assert row.source == "run"
    run = client.get_run(dropped.run_id)
    assert np.isclose(row.final_regret, _final_from_npz(uri, run))
    assert np.isclose(np.asarray(row.curve_regret)[-1], row.final_regret)
    assert len(row.curve_step) == 100
    assert any("read from their runs" in note for note in report.notes)
    replace_table(tracker, parent, table)


def test_every_figure_is_a_non_empty_png_linked_from_the_page(uri, tmp_path):
    report = build_report("rep_main", tmp_path, uri)
    names = {Path(path).name for path, _ in report.figures}
    assert {"regret.png", "hp_exploration_rate.png"} <= names
    for path, _ in report.figures:
        data = (tmp_path / path).read_bytes()
        assert data[:8] == b"\x89PNG\r\n\x1a\n" and len(data) > 1000
    page = (tmp_path / "index.html").read_text()
    for path, _ in report.figures:
        assert f'src="{path}"' in page
    for link in ("tables/regret.md", "tables/regret.csv", "tables/paired.csv"):
        assert f'href="{link}"' in page and (tmp_path / link).is_file()


def test_pivoted_axis_labels_and_published_numbers(uri, tmp_path):
    conf = tmp_path / "conf"
    (conf / "exp").mkdir(parents=True)
    (conf / "exp" / "rep_pivot.yaml").write_text(
        "report:\n"
        "  axes:\n"
        f"    space.candidates: {{labels: {{C1: {C1}, C2: {C2}}}}}\n"
        "  pivot: space.candidates\n"
        "  optimum: space.candidates\n"
        "  tables:\n"
        "    - {name: regret, metric: final_regret, published: ['003 Table 4']}\n"
    )
    report = build_report(
        "rep_pivot", tmp_path / "out", uri, configs=ConfigSearch.with_dirs([conf])
    )
    table = report.tables["regret"]
    # One tuner: it stays a row axis; the pivoted candidate sets make the columns.
    assert table.header == [
        "Algorithm",
        "Tuner",
        "Dataset",
        "candidates=C1",
        "candidates=C1 [003 Table 4]",
        "candidates=C2",
        "candidates=C2 [003 Table 4]",
    ]
    # 003 Table 4, LinUCB on the simulation: TL with C1 343.14, with C2 356.23; the paper
    # ran T = 14000, these runs T = 100, so the numbers are flagged.
    assert table.rows[0][:3] == ["LinUCB", "TL", "Simulation"]
    assert table.rows[0][4] == "343.14†" and table.rows[0][6] == "356.23†"
    assert any("horizon=14000 (here 100)" in note for note in table.footnotes)
    tidy = pd.read_csv(tmp_path / "out" / "tables" / "regret.csv")
    best = tidy.loc[tidy["mean"].idxmin(), "candidates"]
    optimum = pd.read_csv(tmp_path / "out" / "tables" / "optimum.csv")
    assert optimum["best candidates"].tolist() == [best]


@pytest.mark.e2e
def test_cli_writes_the_report_and_rejects_an_unknown_experiment(
    store, tmp_path, monkeypatch, capsys
):
    env = {**os.environ, "MLFLOW_TRACKING_URI": store["uri"]}
    out = tmp_path / "cli"
    done = subprocess.run(
        [sys.executable, "-m", "sweeper.report", "rep_main", "--out", str(out)],
        capture_output=True,
        text=True,
        env=env,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr
    assert "2 failed" in done.stdout
    assert (out / "index.html").is_file() and (out / "tables" / "regret.md").is_file()
    monkeypatch.setenv("MLFLOW_TRACKING_URI", store["uri"])
    assert report_main(["nope"]) == 2
    stderr = capsys.readouterr().err
    assert "no experiment 'nope'" in stderr and "rep_main" in stderr


def test_the_page_tells_the_experiments_definition_from_the_seeds_that_ran(uri, tmp_path):
    """rep_pivot ran the smoke experiment (its file says 3 seeds) with seeds=2."""
    build_report("rep_pivot", tmp_path, uri)
    page = (tmp_path / "index.html").read_text()
    assert "As the experiment defines it: LinUCB, LinTS x Theory" in page
    assert "3 seeds" in page and "Seeds: 0, 1." in page


def test_a_missing_store_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    with pytest.raises(ReportError, match="no MLflow store"):
        build_report("smoke", tmp_path / "out", f"sqlite:///{tmp_path}/none.db")
    assert not (tmp_path / "none.db").exists()


def test_an_unknown_reference_is_a_clear_error(uri, tmp_path):
    with pytest.raises(ReportError, match="baseline tuner .op. has no cells"):
        build_report("rep_main", tmp_path, uri, reference="op")


def test_a_sweep_recorded_before_the_task_block_is_read_with_its_familys_file(
    composer, tracking_uri
):
    """A sweep's config.yaml from before the task block carries no ``task``: the report
    finds the family from the config search path by the config's cell function."""
    overrides = ["task=toy", "seeds=2", "horizon=10", "launcher.name=local",
                 f"tracking.uri={tracking_uri}", "experiment.name=old"]  # fmt: skip
    result = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    client = MlflowClient(tracking_uri)
    path = client.download_artifacts(result.parent_run_id, "config.yaml")
    config = OmegaConf.to_container(OmegaConf.load(path))
    del config["task"]
    client.log_text(result.parent_run_id, OmegaConf.to_yaml(config), "config.yaml")
    loaded = load_experiment("old", tracking_uri, ConfigSearch.with_dirs())
    assert "task" not in loaded.config and loaded.task.name == "toy" and len(loaded.cells) == 2
