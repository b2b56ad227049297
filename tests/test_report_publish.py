"""A report folder rebuilds without its MLflow store (sweeper/report/publish.py): the
tables and cells.csv from the published table equal the ones built from the store, to
the last digit; only the curves are thinner."""

from __future__ import annotations

import io
import json
import shutil

import numpy as np
import pandas as pd
import pytest

from sweeper.report import ReportError, build_report
from sweeper.report.__main__ import main
from sweeper.report.publish import POINTS, read_table, thin
from sweeper.sweep import run_sweep


def test_a_published_folder_rebuilds_the_same_tables_without_the_store(
    composer, tracking_uri, tmp_path, ray_local
):
    overrides = ["task=toy", "horizon=2000", "seeds=3", f"tracking.uri={tracking_uri}",
                 "experiment.name=published", "sweep.grid={+variant:[a,b]}"]  # fmt: skip
    run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    store = build_report("published", tmp_path / "store", tracking_uri)
    shutil.copytree(tmp_path / "store", tmp_path / "copy")
    (tmp_path / "mlflow.db").unlink()  # the store is gone
    meta = tmp_path / "copy/sweep/experiment.json"  # as published before the library check
    stale = "the cells were computed under 2 sets of library versions (numpy=2 pandas=3; numpy=2)"
    meta.write_text(json.dumps({**json.loads(meta.read_text()), "notes": [stale]}))
    assert main(["--from", str(tmp_path / "copy")]) == 0
    for name in ["cells.csv", *(f"tables/{p.name}" for p in (tmp_path / "store/tables").iterdir())]:
        assert (tmp_path / "copy" / name).read_bytes() == (tmp_path / "store" / name).read_bytes()
    rebuilt = read_table(tmp_path / "copy")
    assert len(rebuilt.cells) == len(store.cells) == 6
    assert sorted(rebuilt.cells["cell_key"]) == sorted(store.cells["cell_key"])
    steps = rebuilt.cells["curve_step"].iloc[0]
    assert len(steps) == POINTS and steps[-1] == store.cells["curve_step"].iloc[0][-1]
    assert all(len(v) == POINTS for v in rebuilt.cells["hp_knob"])
    assert any("published table" in note for note in rebuilt.notes)
    assert not any("library versions" in note for note in rebuilt.notes)  # one numpy: no mix
    figures = sorted(p.name for p in (tmp_path / "copy/figures").glob("*.png"))
    assert figures == sorted(p.name for p in (tmp_path / "store/figures").glob("*.png"))
    again = pd.read_parquet(tmp_path / "copy/sweep/cells.parquet")  # rebuilt in place: stable
    assert np.array_equal(again["curve_step"].iloc[0], steps)


def test_thinning_keeps_the_ends_and_a_folder_without_a_table_is_a_clear_error(tmp_path):
    assert list(thin(5)) == [0, 1, 2, 3, 4]
    kept = thin(500)
    assert len(kept) == POINTS and kept[0] == 0 and kept[-1] == 499
    with pytest.raises(ReportError, match="no published table"):
        read_table(tmp_path)
