"""The orchestrator learns its vocabulary from the task family (sweeper/task.py).

The toy family (conf/task/toy.yaml) has no groups, a curve called ``value`` and a lead
metric ``final_value``: sweeps, summaries and reports of it must work without any word of
the bandit family. Keys carry the family's result version; a store written under the keys
of an older sweeper is carried over (sweeper/store/migrate.py).
"""

from __future__ import annotations

import io
import subprocess

import pytest
import yaml
from mlflow import MlflowClient
from omegaconf import OmegaConf

from sweeper.cells import cell_key, legacy_key
from sweeper.grid import expand
from sweeper.paths import CONF_DIR
from sweeper.provenance import code_tags
from sweeper.report import ReportError, build_report
from sweeper.store.migrate import LEGACY_TAG
from sweeper.sweep import run_sweep
from sweeper.task import TaskError, parse_task

PINNED_KEY = "ee55c61f474e5f47408ac7ca4f426b5173bd2b7c440119999ea237c76d424b13"
"""The key of +exp=smoke's linucb/theory/simulation/seed0 cell (bandit_tuning, version 2)."""
PINNED_NULL_NORM_KEY = "cecfbebc3bfdfa3a23f7d04f3635dbbb8e1854371968fecbd2a45fe82aaefeaf"
"""The same cell with the configs' default norm_bound: null (S = ||theta*||), version 2."""
PINNED_V1_KEY = "094d8d94d16f0c940cb369f94b707f116c065d6f7fb45d2c8905803ab9eeee99"
"""The same cell's key at result version 1."""
PINNED_LEGACY_KEY = "8523618cb30ea36879e7af4baac72632d18338d60d88c3fb978cf11ec61c61c8"
"""The key the same cell had before result versions (sweeper 4eac1f6), computed by that code."""


def test_the_key_of_a_fixed_bandit_cell_is_pinned(composer):
    # A silent key change orphans every stored result: change it on purpose or not at all.
    # algorithm.norm_bound=1.0 is the config these keys were made with; the configs' default
    # became null (S = ||theta*||, issue #16), which gives that cell a new key (next test).
    overrides = ["+exp=smoke", "algorithm=linucb", "tuner=theory", "seeds=1",
                 "algorithm.norm_bound=1.0"]  # fmt: skip
    (cell,) = expand(composer(overrides), composer, overrides)
    assert cell.label == "linucb/theory/simulation/seed0"
    assert cell.config["task"] == {"name": "bandit_tuning", "result_version": 2}
    assert cell.key == PINNED_KEY
    assert cell.legacy_key is None  # version 2 reuses no result stored under the old keys
    at_v1 = [*overrides, "task.result_version=1"]
    (old,) = expand(composer(at_v1), composer, at_v1)
    assert (old.key, old.legacy_key) == (PINNED_V1_KEY, PINNED_LEGACY_KEY)


def test_the_key_with_the_instance_norm_is_pinned(composer):
    overrides = ["+exp=smoke", "algorithm=linucb", "tuner=theory", "seeds=1"]
    (cell,) = expand(composer(overrides), composer, overrides)
    assert cell.config["algorithm"]["norm_bound"] is None
    assert cell.key == PINNED_NULL_NORM_KEY


def test_the_result_version_is_part_of_the_key(composer):
    base = ["task=toy", "seed=0"]
    (v1,) = expand(composer(base), composer, base)
    bumped = [*base, "task.result_version=2"]
    (v2,) = expand(composer(bumped), composer, bumped)
    assert v1.key != v2.key and v1.label == v2.label
    assert v2.legacy_key is None  # only version 1 has results stored under the old keys
    assert v1.legacy_key == cell_key({k: v for k, v in v1.config.items() if k != "task"})


def test_display_vocabulary_never_changes_a_key(composer):
    base = ["task=toy", "seed=0"]
    (plain,) = expand(composer(base), composer, base)
    shown = [*base, "task.lead=complement", "task.curves.value.title=other"]
    (relabelled,) = expand(composer(shown), composer, shown)
    assert plain.key == relabelled.key


def test_run_names_tell_apart_every_setting_the_sweep_varies(composer):
    overrides = ["+exp=ablation", "algorithm=linucb", "dataset=simulation", "seeds=1"]
    cells = expand(composer(overrides), composer, overrides)
    labels = [c.label for c in cells]
    assert len(set(labels)) == len(cells) == 4
    assert "T1=0/k=1/linucb/cdt/simulation/seed0" in labels


def test_a_bad_task_block_says_what_is_wrong():
    with pytest.raises(TaskError, match="unknown key"):
        parse_task({"name": "x", "groupz": []})
    with pytest.raises(TaskError, match="task.name is missing"):
        parse_task({"groups": []})
    with pytest.raises(TaskError, match="whole number >= 1"):
        parse_task({"name": "x", "result_version": 0})
    with pytest.raises(TaskError, match="'lower', 'higher'"):
        parse_task({"name": "x", "metrics": {"m": {"better": "smaller"}}})
    with pytest.raises(TaskError, match="both name \\['score'\\]"):
        parse_task({"name": "x", "metrics": {"score": {}}, "curves": {"score": {}}})


@pytest.mark.parametrize("path", sorted(CONF_DIR.glob("task/*.yaml")), ids=lambda p: p.stem)
def test_every_family_declares_a_valid_vocabulary(path):
    task = parse_task(yaml.safe_load(path.read_text())["task"])
    assert task.name == path.stem
    assert task.lead in task.metrics


def _toy(tracking_uri: str, name: str, *extra: str) -> list[str]:
    return [
        "task=toy",
        "horizon=40",
        f"tracking.uri={tracking_uri}",
        f"experiment.name={name}",
        *extra,
    ]


def _sweep(composer, overrides, grid=None):
    cfg = composer(overrides)
    if grid is not None:
        OmegaConf.update(cfg, "sweep.grid", grid, force_add=True)
    out = io.StringIO()
    result = run_sweep(cfg, composer, overrides, out=out)
    return result, out.getvalue()


def test_a_family_without_groups_sweeps_summarises_and_reports(
    composer, tracking_uri, tmp_path, ray_local
):
    overrides = _toy(tracking_uri, "toyfam", "seeds=3")
    result, out = _sweep(composer, overrides, {"+toy.variant": ["a", "b"]})
    assert result.finished == 6 and result.exit_code == 0
    # One summary row per setting of the sweep, never pooled over the variant axis.
    assert "Final value (final_value; mean, sd over seeds)" in out
    assert "variant=a " in out and "variant=b " in out
    table = result.table
    assert {"curve_value", "curve_step", "hp_knob", "final_value"} <= set(table.columns)
    assert not any("regret" in c for c in table.columns)

    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("toyfam").experiment_id])
    cells = [r for r in runs if "cell_key" in r.data.tags]
    assert sorted(r.info.run_name for r in cells)[:2] == ["variant=a/seed0", "variant=a/seed1"]
    assert {"value", "final_value"} <= set(cells[0].data.metrics)
    assert cells[0].data.params["task.name"] == "toy"

    report = build_report("toyfam", tmp_path / "report", tracking_uri)
    assert set(report.tables) == {"final_value", "runtime", "failed"}  # no compare axis: no pairs
    assert [path for path, _ in report.figures] == ["figures/value.png", "figures/hp_knob.png"]
    assert "cumulative value" in report.figures[0][1].lower()

    # --where keeps listed values of a table column (seed) or a config path (toy.variant)
    kept = build_report(
        "toyfam", tmp_path / "some", tracking_uri,
        where={"seed": ["0", "2"], "toy.variant": ["b"]},
    )  # fmt: skip
    assert sorted(kept.cells["seed"]) == [0, 2]
    assert {c["toy"]["variant"] for c in kept.cells["config"]} == {"b"}
    assert any("(2 of 6)" in note for note in kept.notes)
    no_cell = r"keeps no cell: toy.variant takes the values \['a', 'b'\]"
    with pytest.raises(ReportError, match=no_cell):
        build_report("toyfam", tmp_path / "none", tracking_uri,
                     where={"toy.variant": ["c"]})  # fmt: skip


def test_each_run_records_the_code_that_made_it(composer, tracking_uri, ray_local):
    code_tags.cache_clear()  # read the checkout as it is now
    _sweep(composer, _toy(tracking_uri, "provenance", "seeds=1"))
    client = MlflowClient(tracking_uri)
    (run,) = [
        r
        for r in client.search_runs([client.get_experiment_by_name("provenance").experiment_id])
        if "cell_key" in r.data.tags
    ]
    tags = run.data.tags
    assert tags["sweeper.version"] == "0.1.0"
    kind = client.get_experiment_by_name("provenance").tags["mlflow.experimentKind"]
    assert kind == "custom_model_development"  # the MLflow UI opens on the runs table
    head = subprocess.run(
        ["git", "rev-parse", "HEAD"], cwd=CONF_DIR.parent, capture_output=True, text=True
    )
    expected = head.stdout.strip() if head.returncode == 0 else "unknown"
    assert tags["mlflow.source.git.commit"] == expected
    assert tags["sweeper.git_dirty"] in ("true", "false", "unknown")


def test_a_bumped_result_version_recomputes_every_cell(composer, tracking_uri, ray_local):
    first, _ = _sweep(composer, _toy(tracking_uri, "bump", "seeds=2"))
    again, _ = _sweep(composer, _toy(tracking_uri, "bump", "seeds=2"))
    bumped, _ = _sweep(composer, _toy(tracking_uri, "bump", "seeds=2", "task.result_version=2"))
    assert (first.finished, again.skipped, bumped.finished, bumped.skipped) == (2, 2, 2, 0)


def test_runs_stored_under_legacy_keys_are_carried_over(
    composer, tracking_uri, monkeypatch, ray_local
):
    # An older sweeper keyed cells without their family: write a store as it did.
    monkeypatch.setattr("sweeper.grid.cell_key", legacy_key)
    old, _ = _sweep(composer, _toy(tracking_uri, "legacy", "seeds=3"))
    monkeypatch.undo()
    assert old.finished == 3
    resumed, out = _sweep(composer, _toy(tracking_uri, "legacy", "seeds=3"))
    assert (resumed.skipped, resumed.finished, resumed.carried_over) == (3, 0, 3)
    assert "3 finished run(s) stored under an older sweeper's cell keys carried over" in out

    client = MlflowClient(tracking_uri)
    experiment = client.get_experiment_by_name("legacy").experiment_id
    cells = [r for r in client.search_runs([experiment]) if "cell_key" in r.data.tags]
    assert len(cells) == 3 and all(r.info.status == "FINISHED" for r in cells)
    assert all(r.data.tags[LEGACY_TAG] != r.data.tags["cell_key"] for r in cells)
    assert set(resumed.table["cell_key"]) == {r.data.tags["cell_key"] for r in cells}
    third, _ = _sweep(composer, _toy(tracking_uri, "legacy", "seeds=3"))
    assert (third.skipped, third.carried_over) == (3, 0)  # now found under today's keys
