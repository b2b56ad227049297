"""One reader of what is done (issue #38, item 2): resume, the dry run, the report and
``sweeper.load`` count the same cells done, by the same runs, in a store that holds a
superseded cell (run again, twice FINISHED), a failed rerun of a finished cell, a cell
finished only under its legacy key, and a cell no sweep table holds."""

from __future__ import annotations

import io
import re
from pathlib import Path

import sweeper
from sweeper.cells import legacy_key
from sweeper.report.load import load_experiment
from sweeper.store.index import read_index
from sweeper.store.tracking import Tracker
from sweeper.sweep import run_sweep

BASE = ["task=toy", "horizon=20", "+toy.sleep_s=0.2", "launcher.name=local",
        "experiment.name=one"]  # fmt: skip


def _sweep(composer, uri: str, *extra: str):
    overrides = [*BASE, f"tracking.uri={uri}", *extra]
    return run_sweep(composer(overrides), composer, overrides, out=io.StringIO())


def test_resume_dry_run_report_and_load_agree_on_every_cell(
    composer, tracking_uri, tmp_path, monkeypatch
):
    uri = tracking_uri
    # seed 5 finished under the key an older sweeper made (sweeper/cells.py, legacy_key)
    with monkeypatch.context() as patch:
        patch.setattr("sweeper.grid.cell_key", legacy_key)
        assert _sweep(composer, uri, "seed=5").finished == 1
    assert _sweep(composer, uri, "seeds=4").finished == 4
    # seed 1 run again and finished: superseded; seed 2 run again and timed out (FAILED, the
    # same key): its result is still its first run
    assert _sweep(composer, uri, "seed=1", "rerun=true").finished == 1
    failed = _sweep(composer, uri, "seed=2", "launcher.timeout_s=0.05", "rerun=true")
    assert len(failed.failed) == 1
    # seed 3's row is lost from every table: its run is the truth
    tracker = Tracker(uri, "one")
    for parent in tracker.sweep_parents():
        table = tracker.table(parent.info.run_id)
        rows = table.read()
        if rows is not None and "seed" in rows:
            lost = rows[rows["seed"] == 3]
            if len(lost):
                kept = rows[rows["seed"] != 3]
                _replace_table(tracker, parent.info.run_id, kept)

    # the dry run, then the resume, of the grid of seeds 0-5 (seed 4 has never run)
    overrides = [*BASE, f"tracking.uri={uri}", "seeds=6"]
    out = io.StringIO()
    run_sweep(composer([*overrides, "dry_run=true"]), composer, overrides, out=out)
    counted = int(re.search(r"(\d+) already FINISHED", out.getvalue()).group(1))
    resumed = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert counted == resumed.skipped == 5 and resumed.finished == 1
    assert resumed.carried_over == 1  # the legacy cell

    index = {k: e.run_id for k, e in read_index(Tracker(uri, "one")).finished.items()}
    report = load_experiment("one", uri).cells
    report = report[report["status"] == "FINISHED"].set_index("cell_key")["run_id"].to_dict()
    api = sweeper.load("one", tracking_uri=uri).cells
    api = api[api["status"] == "FINISHED"].set_index("cell_key")["run_id"].to_dict()
    assert index == report == api and len(index) == 6
    newest_1 = max((r for r in tracker.runs("tags.seed = '1'") if r.info.status == "FINISHED"),
                   key=lambda r: r.info.start_time)  # fmt: skip
    assert newest_1.info.run_id in index.values()  # the superseded cell: its newest run
    first_2 = [r for r in tracker.runs("tags.seed = '2'") if r.info.status == "FINISHED"]
    assert len(first_2) == 1 and first_2[0].info.run_id in index.values()  # not the FAILED


def _replace_table(tracker: Tracker, run_id: str, rows) -> None:
    """Rewrite parent ``run_id``'s table as ``rows`` alone (its parts removed)."""
    import shutil

    directory = tracker.artifact_dir(run_id)
    assert directory is not None
    parts = directory / "cells"
    if parts.is_dir():
        shutil.rmtree(parts)
    rows.to_parquet(Path(directory) / "cells.parquet", index=False)
