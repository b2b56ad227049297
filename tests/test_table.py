"""The sweep's table in parts (sweeper/store/table.py): appended, read, consolidated, and safe
against a kill between consolidating and deleting the parts."""

from __future__ import annotations

import os
import stat

import numpy as np
import pyarrow.parquet as pq
import pytest
from mlflow import MlflowClient

from sweeper.store.table import ArtifactIO, CellTable, local_artifact_dir, run_artifacts


def _table(tmp_path) -> CellTable:
    return CellTable(ArtifactIO(None, lambda run_id: tmp_path / run_id), "parent")


def _row(key: str, run: str, status: str = "FINISHED", **values):
    return {"cell_key": key, "run_id": run, "status": status, **values}


def test_parts_read_back_in_order_and_the_current_row_prefers_a_finished_run(tmp_path):
    table = _table(tmp_path)
    table.append([_row("a", "r1", "FAILED", error="boom")])
    table.append([_row("a", "r2", final=3.0, curve_value=[1.0, 3.0]), _row("b", "r3", final=1)])
    table.append([_row("b", "r4", "FAILED", error="later")])  # a failed retry hides nothing
    rows = table.read()
    assert list(rows["run_id"]) == ["r1", "r2", "r3", "r4"]
    current = table.current().set_index("cell_key")
    assert current.loc["a", "run_id"] == "r2" and list(current.loc["a", "curve_value"]) == [1, 3]
    assert current.loc["b", "run_id"] == "r3" and current.loc["b", "final"] == 1.0


def test_consolidating_streams_the_parts_into_one_file_and_deletes_them(tmp_path):
    table = _table(tmp_path)
    for i in range(5):
        table.append([_row(f"c{i}", f"r{i}", final=float(i))])
    before = table.read()
    table.consolidate()
    files = sorted(p.relative_to(tmp_path / "parent").as_posix() for p in tmp_path.rglob("*.*"))
    assert files == ["cells.parquet"]
    metadata = pq.read_schema(tmp_path / "parent" / "cells.parquet").metadata
    assert metadata[b"sweeper.parts_through"] == b"5"
    assert table.read().equals(before)
    table.append([_row("c5", "r5", final=5.0)])  # numbering goes on after the consolidated
    assert (tmp_path / "parent" / "cells" / "part-000006.parquet").exists()
    assert list(CellTable(table.io, "parent").read()["run_id"]) == [f"r{i}" for i in range(6)]


def test_a_kill_between_consolidating_and_deleting_duplicates_nothing(tmp_path):
    table = _table(tmp_path)
    table.append([_row("a", "r1")])
    table.append([_row("b", "r2")])
    table.io.delete = lambda run_id, paths: None  # killed before the parts were deleted
    table.consolidate()
    assert len(list((tmp_path / "parent" / "cells").iterdir())) == 2
    assert list(_table(tmp_path).read()["run_id"]) == ["r1", "r2"]


def test_a_run_given_a_new_row_keeps_only_its_last_one(tmp_path):
    """A cell re-keyed (sweeper/store/migrate.py) gets a second row for the same run."""
    table = _table(tmp_path)
    table.append([_row("old-key", "r1", final=2.0), _row("b", "r2")])
    table.append([_row("new-key", "r1", final=2.0)])
    assert set(table.current()["cell_key"]) == {"new-key", "b"}
    table.consolidate()
    assert sorted(table.read()["cell_key"]) == ["b", "new-key"]


def test_a_truncated_part_is_skipped_and_said_once_naming_the_file(tmp_path, capsys):
    table = _table(tmp_path)
    table.append([_row("a", "r1")])
    table.append([_row("b", "r2")])
    part = tmp_path / "parent" / "cells" / "part-000002.parquet"
    part.write_bytes(part.read_bytes()[:20])  # a kill mid-upload
    assert list(table.read()["run_id"]) == ["r1"]
    assert [len(t) for t in table.arrow(["run_id"])] == [1]
    said = capsys.readouterr().err.splitlines()  # two reads, one warning
    assert len(said) == 1
    assert said[0].startswith(f"warning: the sweep's table file {part} cannot be read (ArrowInv")
    assert said[0].endswith("it is skipped, and the cells it holds are read from their MLflow runs")


def test_a_damaged_consolidated_file_is_said_an_absent_table_is_not(tmp_path, capsys):
    table = _table(tmp_path)
    assert table.read() is None and table.arrow(["run_id"]) == []  # no table yet: silent
    table.append([_row("a", "r1")])
    table.consolidate()
    table.append([_row("b", "r2")])
    consolidated = tmp_path / "parent" / "cells.parquet"
    consolidated.write_bytes(b"PAR1" + b"\0" * 64)  # damaged where it lies
    assert capsys.readouterr().err == ""
    assert list(table.read()["run_id"]) == ["r2"]
    said = capsys.readouterr().err
    assert f"the sweep's table file {consolidated} cannot be read (ArrowInvalid" in said


def test_a_remote_file_absent_from_the_listing_is_absent_a_failing_listing_is_an_error(
    tmp_path, monkeypatch
):
    """MLflow's download says "does not exist" for any failure, so absence is asked of the
    listing, and a store that fails to list is not taken for a table without files. Both go
    to the run's artifact location (not ``runs:/``, which an MLflow 2 server cannot list)."""

    class Store:
        tracking_uri = "http://127.0.0.1:5000"

        def __init__(self, names=(), fails=False):
            self.names, self.fails, self.downloads = list(names), fails, []

        def get_run(self, run_id):
            info = type("Info", (), {"artifact_uri": f"mlflow-artifacts:/1/{run_id}/artifacts/"})
            return type("Run", (), {"info": info})

        def list_artifacts(self, artifact_uri, tracking_uri):
            assert tracking_uri == self.tracking_uri
            if self.fails:
                raise ConnectionRefusedError(111, "Connection refused")
            folder = artifact_uri.removeprefix("mlflow-artifacts:/1/r/artifacts").strip("/")
            return [type("F", (), {"path": f"{folder}/{n}" if folder else n}) for n in self.names]

        def download_artifacts(self, artifact_uri, dst_path, tracking_uri):
            self.downloads.append(artifact_uri)
            return str(tmp_path / "downloaded")

    def use(store):
        monkeypatch.setattr("mlflow.artifacts.list_artifacts", store.list_artifacts)
        monkeypatch.setattr("mlflow.artifacts.download_artifacts", store.download_artifacts)
        return ArtifactIO(store, lambda _: None)

    absent = Store()
    assert use(absent).fetch("r", "cells.parquet", tmp_path) is None
    assert absent.downloads == []
    there = Store(["part-000001.parquet"])
    assert use(there).fetch("r", "cells/part-000001.parquet", tmp_path) == tmp_path / "downloaded"
    assert there.downloads == ["mlflow-artifacts:/1/r/artifacts/cells/part-000001.parquet"]
    with pytest.raises(ConnectionRefusedError):
        use(Store(fails=True)).fetch("r", "cells.parquet", tmp_path)


def test_through_mlflow_the_table_is_appended_consolidated_and_read_the_same(tmp_path):
    """The path of a remote artifact store (a tracking server without
    ``tracking.artifacts_destination``): every read and write through MLflow's client."""
    from mlflow import MlflowClient

    client = MlflowClient(f"sqlite:///{tmp_path}/mlflow.db")
    experiment = client.create_experiment("t", artifact_location=(tmp_path / "art").as_uri())
    run_id = client.create_run(experiment).info.run_id
    table = CellTable(ArtifactIO(client, lambda _: None), run_id)  # never the local shortcut
    table.append([_row("a", "r1", final=1.0)])
    table.append([_row("b", "r2", final=2.0)])
    table.consolidate()
    table.append([_row("c", "r3", final=3.0)])
    again = CellTable(ArtifactIO(client, lambda _: None), run_id)
    assert list(again.read()["run_id"]) == ["r1", "r2", "r3"]
    again.consolidate()
    assert list(again.read()["final"]) == [1.0, 2.0, 3.0]
    names = {a.path for a in client.list_artifacts(run_id)}
    assert "cells.parquet" in names


def test_consolidating_keeps_each_runs_last_row_as_the_obvious_rule_does(tmp_path, monkeypatch):
    """Arrow's group-by (the fast path) against a dict of run id -> last row, with runs
    given new rows within a part, across parts and across read batches."""
    monkeypatch.setattr("sweeper.store.table.BATCH_ROWS", 4)
    rng = np.random.default_rng(7)
    table, written = _table(tmp_path), []
    for _ in range(6):
        rows = [
            _row(f"k{n}", f"r{rng.integers(25)}", final=float(len(written) + n)) for n in range(9)
        ]
        table.append(rows)
        written += rows
    last = {r["run_id"]: r for r in written}  # the obvious rule: a later row replaces
    expected = sorted(last.values(), key=lambda r: written.index(r))
    table.consolidate()
    kept = table.read()
    assert list(kept["run_id"]) == [r["run_id"] for r in expected]
    assert list(kept["final"]) == [r["final"] for r in expected]
    assert len(kept) < len(written)  # duplicates were there to drop


def test_a_consolidation_clears_a_killed_ones_half_written_file(tmp_path):
    """Issue #27, item 2: a driver killed while it consolidated left a .cells.*.partial
    (up to 54 MB); the next consolidation, by the driver that now holds the sweep, removes
    it."""
    table = _table(tmp_path)
    table.append([_row("a", "r1")])
    stale = tmp_path / "parent" / ".cells.x1y2.partial"
    stale.write_bytes(b"half a parquet file")
    table.consolidate()
    assert not stale.exists()
    assert list(table.read()["run_id"]) == ["r1"]
    assert not list((tmp_path / "parent").glob(".cells.*.partial"))


@pytest.mark.parametrize("umask", [0o022, 0o002])
def test_the_table_has_the_mode_of_mlflows_own_artifacts(tracking_uri, umask):
    """Issue #27, item 4: the consolidated cells.parquet was written 0600 (mkstemp), so a
    tracking server running as another user could not serve it. Now it and its parts have
    the mode of a file MLflow itself logs into the same run (0666 less the umask)."""
    client = MlflowClient(tracking_uri)
    run_id = client.create_run(client.create_experiment("modes")).info.run_id
    local = local_artifact_dir(client.get_run(run_id).info.artifact_uri)
    before = os.umask(umask)
    try:
        client.log_text(run_id, "logged by MLflow", "mlflow.txt")
        table = CellTable(run_artifacts(client), run_id)
        table.append([_row("a", "r1")])
        table.append([_row("b", "r2")])
        part = stat.S_IMODE((local / "cells" / "part-000001.parquet").stat().st_mode)
        table.consolidate()
    finally:
        os.umask(before)
    mlflows = stat.S_IMODE((local / "mlflow.txt").stat().st_mode)
    consolidated = stat.S_IMODE((local / "cells.parquet").stat().st_mode)
    assert mlflows == 0o666 & ~umask
    assert (consolidated, part) == (mlflows, mlflows), f"{consolidated:o}, {part:o}"
    assert list(table.read()["run_id"]) == ["r1", "r2"]


def test_a_damaged_artifact_is_said_with_what_is_done_without_it_an_absent_one_is_not(
    tmp_path, capsys
):
    import json

    io_ = ArtifactIO(None, lambda run_id: tmp_path / run_id)
    assert io_.load("run", "decisions.json", json.loads, "no decisions") is None
    io_.write("run", "decisions.json", b'[{"group": ')  # cut short
    assert io_.load("run", "decisions.json", json.loads, "no decisions") is None
    assert capsys.readouterr().err == (
        f"warning: {tmp_path}/run/decisions.json cannot be read (JSONDecodeError: Expecting "
        "value: line 1 column 12 (char 11)); no decisions\n"
    )
    io_.write("run", "decisions.json", b"[1]")
    assert io_.load("run", "decisions.json", json.loads, "no decisions") == [1]
