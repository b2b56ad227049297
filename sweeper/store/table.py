"""The sweep's table of cells: appended in parts, consolidated when the sweep ends.

A parent run (``role=sweep``) holds one row per recorded cell run (the columns:
:mod:`sweeper.store.tracking`). The driver never keeps the rows: each batch of recorded cells is
written as a new part ``cells/part-NNNNNN.parquet``, and when the sweep ends (and when it
is started again) the parts are streamed into the consolidated ``cells.parquet``, one part
in memory at a time. The consolidated file records in its schema metadata the last part it
holds (``parts_through``), so a kill between writing it and deleting the parts loses and
duplicates nothing: readers skip the parts it holds, and rows are kept once per run id.

So the driver's memory does not grow with the sweep, a resume reads a few columns of one
file, and every part write is a few rows.
"""

from __future__ import annotations

import io
import re
import shutil
import tempfile
import uuid
import zipfile
from collections.abc import Callable, Iterable, Sequence
from contextlib import suppress
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import unquote, urlparse

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import yaml

from sweeper import memory
from sweeper.errors import warn
from sweeper.store.result import results

CELLS_TABLE = "cells.parquet"
PARTS = "cells"
PART = re.compile(r"part-(\d{6})\.parquet$")
THROUGH = b"sweeper.parts_through"
BATCH_ROWS = 256  # rows read at a time when consolidating
UNPARSABLE = (OSError, ValueError, EOFError, zipfile.BadZipFile, yaml.YAMLError)
"""What reading a damaged JSON, YAML or npz artifact raises (a JSON or Unicode error is a
ValueError)."""
T = TypeVar("T")
UNREADABLE = (pa.ArrowException, OSError)
"""What pyarrow raises for a file that is not a whole parquet file (ArrowInvalid) or that
cannot be read (a permission, an I/O error)."""


def local_artifact_dir(artifact_uri: str) -> Path | None:
    """The directory of a ``file:`` (or plain path) artifact URI; None for a remote one."""
    parsed = urlparse(artifact_uri)
    if parsed.scheme == "file":
        return Path(unquote(parsed.path))
    if parsed.scheme == "" and artifact_uri.startswith("/"):
        return Path(artifact_uri)
    return None


def run_artifacts(client: Any) -> ArtifactIO:
    """An :class:`ArtifactIO` that finds each run's artifact directory from the run."""
    return ArtifactIO(
        client, lambda run_id: local_artifact_dir(client.get_run(run_id).info.artifact_uri)
    )


class ArtifactIO:
    """Read, write, list and delete a run's artifacts: straight on a local file system (a
    local store, or a server's artifact directory this machine sees), else through MLflow.

    Parameters
    ----------
    client : mlflow.MlflowClient
    local_dir : callable
        ``local_dir(run_id) -> Path | None``: the run's artifact directory when it is local.
    """

    def __init__(self, client: Any, local_dir: Any) -> None:
        self.client, self.local_dir = client, local_dir
        self._roots: dict[str, str] = {}

    def _uri(self, run_id: str, path: str) -> str:
        """The URI of artifact ``path`` of run ``run_id`` in the run's artifact location.
        Listing and downloading go there, not through ``runs:/``: MLflow 3 lists a ``runs:/``
        folder together with its logged models' artifacts, an API an MLflow 2 server answers
        with 404."""
        if run_id not in self._roots:
            self._roots[run_id] = self.client.get_run(run_id).info.artifact_uri.rstrip("/")
        return f"{self._roots[run_id]}/{path}" if path else self._roots[run_id]

    def write(self, run_id: str, path: str, data: bytes) -> None:
        """Write ``data`` as artifact ``path`` (atomically, by rename, when local)."""
        local = self.local_dir(run_id)
        if local is not None:
            target = local / path
            target.parent.mkdir(parents=True, exist_ok=True)
            partial = target.with_name(f".{target.name}.partial")
            partial.write_bytes(data)
            partial.replace(target)
            return
        folder, _, name = path.rpartition("/")
        with tempfile.TemporaryDirectory() as tmp:
            file = Path(tmp) / name
            file.write_bytes(data)
            self.client.log_artifact(run_id, str(file), folder or None)

    def fetch(self, run_id: str, path: str, into: Path) -> Path | None:
        """A local path to artifact ``path``: itself when local, else downloaded into
        ``into``; None when it is absent. (Absence is asked of the listing: MLflow's
        download says "does not exist" for any failure, a server that is away included.)"""
        local = self.local_dir(run_id)
        if local is not None:
            return local / path if (local / path).is_file() else None
        folder, _, name = path.rpartition("/")
        if name not in self.names(run_id, folder):
            return None
        from mlflow import artifacts

        uri, tracking = self._uri(run_id, path), self.client.tracking_uri
        return Path(
            artifacts.download_artifacts(
                artifact_uri=uri, dst_path=str(into), tracking_uri=tracking
            )
        )

    def load(self, run_id: str, path: str, parse: Callable[[bytes], T], instead: str) -> T | None:
        """Artifact ``path`` read by ``parse``, or None when the run has none; one that cannot
        be read (damaged, unreadable) is said, with ``instead``: what is done without it."""
        with tempfile.TemporaryDirectory() as tmp:
            local = self.fetch(run_id, path, Path(tmp))
            if local is None:
                return None
            try:
                return parse(local.read_bytes())
            except UNPARSABLE as err:
                reason = " ".join(str(err).split())[:200]
                where = local if self.local_dir(run_id) is not None else f"{path} of run {run_id}"
                warn(f"{where} cannot be read ({type(err).__name__}: {reason}); {instead}")
                return None

    def put(self, run_id: str, path: str, file: Path) -> None:
        """Move the local ``file`` into place as artifact ``path`` (atomically when local)."""
        local = self.local_dir(run_id)
        if local is not None:
            (local / path).parent.mkdir(parents=True, exist_ok=True)
            Path(file).replace(local / path)
            return
        folder, _, name = path.rpartition("/")
        with tempfile.TemporaryDirectory() as tmp:  # uploaded under its own name
            upload = Path(tmp) / name
            shutil.move(file, upload)
            self.client.log_artifact(run_id, str(upload), folder or None)

    def names(self, run_id: str, folder: str) -> list[str]:
        local = self.local_dir(run_id)
        if local is not None:
            directory = local / folder
            return sorted(p.name for p in directory.iterdir()) if directory.is_dir() else []
        from mlflow import artifacts

        uri, tracking = self._uri(run_id, folder), self.client.tracking_uri
        return sorted(
            Path(f.path).name
            for f in artifacts.list_artifacts(artifact_uri=uri, tracking_uri=tracking)
        )

    def delete(self, run_id: str, paths: Iterable[str]) -> None:
        """Delete local artifacts; on a remote artifact store they stay (readers skip them)."""
        local = self.local_dir(run_id)
        if local is not None:
            for path in paths:
                (local / path).unlink(missing_ok=True)
                with suppress(OSError):  # a folder left empty goes too
                    (local / path).parent.rmdir()


class CellTable:
    """The table of one sweep's parent run ``run_id`` (see the module docstring)."""

    def __init__(self, io_: ArtifactIO, run_id: str) -> None:
        self.io, self.run_id = io_, run_id
        self._next: int | None = None

    # --- writing --------------------------------------------------------------------
    def append(self, rows: Sequence[dict[str, Any]]) -> None:
        """Write ``rows`` as the next part (nothing for no rows)."""
        if not rows:
            return
        if self._next is None:
            with tempfile.TemporaryDirectory() as tmp:
                self._next = max(self._part_numbers(), default=self._through(Path(tmp))) + 1
        buffer = io.BytesIO()
        pd.DataFrame(list(rows)).to_parquet(buffer, index=False)
        self.io.write(self.run_id, _part(self._next), buffer.getvalue())
        self._next += 1

    def consolidate(self) -> None:
        """Stream the consolidated file and the parts into a new consolidated file (one
        record batch in memory at a time, each run id once), then delete the parts it
        holds."""
        memory.lean()
        local = self.io.local_dir(self.run_id)
        if local is not None and local.is_dir():  # a killed consolidation's half-written file:
            for stale in local.glob(".cells.*.partial"):  # the driver holds the experiment
                stale.unlink(missing_ok=True)
        with tempfile.TemporaryDirectory() as tmp:
            through = self._through(Path(tmp))
            numbers = [n for n in self._part_numbers() if n > through]
            if not numbers:
                return
            files = [(CELLS_TABLE, self._fetch(CELLS_TABLE, tmp))]
            files += [(_part(n), self._fetch(_part(n), tmp)) for n in numbers]
            sources = [p for name, p in files if self._open(name, p) is not None]
            schema = pa.unify_schemas(
                [pq.read_schema(p) for p in sources], promote_options="permissive"
            ).remove_metadata()
            # A new file with the mode MLflow's own artifact writes have (0666 & ~umask; not
            # mkstemp's 0600, which a tracking server running as another user cannot serve).
            target = Path(local or tmp) / f".cells.{uuid.uuid4().hex}.partial"
            target.touch(mode=0o666, exist_ok=False)
            try:
                self._stream(sources, schema, numbers[-1], target)
            except BaseException:
                target.unlink(missing_ok=True)  # never a stale .cells.*.partial
                raise
            self.io.put(self.run_id, CELLS_TABLE, target)
        self.io.delete(self.run_id, [_part(n) for n in numbers])
        self._next = numbers[-1] + 1

    @staticmethod
    def _stream(sources: list[Path], schema: pa.Schema, through: int, target: Path) -> None:
        """Write ``sources`` into ``target``, each run id once (its last row)."""
        keep = _last_rows(sources)
        meta = schema.with_metadata({THROUGH: str(through).encode()})
        with pq.ParquetWriter(target, meta) as writer:
            # One file open, one batch read, at a time, in this thread (Arrow's reader
            # threads would hold buffers of their own: twice the peak).
            for i, path in enumerate(sources):
                offset = 0
                with pq.ParquetFile(path) as source:
                    for batch in source.iter_batches(batch_size=BATCH_ROWS, use_threads=False):
                        part = _conform(pa.Table.from_batches([batch]), schema)
                        if keep[i] is not None:
                            part = part.filter(keep[i][offset : offset + batch.num_rows])
                        offset += batch.num_rows
                        if part.num_rows:
                            writer.write_table(part)

    # --- reading --------------------------------------------------------------------
    def read(self, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
        """Every row (consolidated, then the parts in order), each run id once (its last
        row: a cell re-keyed by sweeper/store/migrate.py gets a new row for the same run); None
        when the sweep has no table (a part truncated by a kill is skipped)."""
        with tempfile.TemporaryDirectory() as tmp:
            tables = [self._read(name, path, columns) for name, path in self._files(tmp)]
        frames = [t.to_pandas() for t in tables if t is not None]
        if not frames:
            return None
        table = pd.concat(frames, ignore_index=True) if len(frames) > 1 else frames[0]
        if "run_id" in table:
            table = table.drop_duplicates("run_id", keep="last").reset_index(drop=True)
        return table

    def arrow(self, columns: Sequence[str]) -> list[pa.Table]:
        """``columns`` of every file of the table (consolidated, then the parts), as Arrow
        tables, not de-duplicated: the resume index's fast read."""
        with tempfile.TemporaryDirectory() as tmp:
            tables = [self._read(name, path, columns) for name, path in self._files(tmp)]
        return [t for t in tables if t is not None]

    def current(self, columns: Sequence[str] | None = None) -> pd.DataFrame | None:
        """One row per cell: its result's row (:func:`sweeper.store.result.results`)."""
        if columns is not None:
            columns = list(dict.fromkeys([*columns, "cell_key", "status", "start_time"]))
        table = self.read(columns)
        if table is None or not len(table):
            return table
        return results(table)

    # --- internals ------------------------------------------------------------------
    def _part_numbers(self) -> list[int]:
        found = (PART.search(name) for name in self.io.names(self.run_id, PARTS))
        return sorted(int(m.group(1)) for m in found if m)

    def _files(self, tmp: str | Path) -> list[tuple[str, Path | None]]:
        """The consolidated file, then the parts it does not hold: each one's artifact
        path and local path (None: absent)."""
        through = self._through(Path(tmp))
        names = [CELLS_TABLE, *(_part(n) for n in self._part_numbers() if n > through)]
        return [(name, self._fetch(name, tmp)) for name in names]

    def _fetch(self, path: str, tmp: str | Path) -> Path | None:
        into = Path(tmp) / path.replace("/", "_")
        return self.io.fetch(self.run_id, path, into)

    def _through(self, tmp: Path) -> int:
        """The last part the consolidated file holds (0: none, or no consolidated file)."""
        file = self._open(CELLS_TABLE, self._fetch(CELLS_TABLE, tmp))
        if file is None:
            return 0
        return int((file.schema_arrow.metadata or {}).get(THROUGH, b"0"))

    def _open(self, name: str, path: Path | None) -> pq.ParquetFile | None:
        """File ``name`` of the table opened; None when it is absent, or cannot be read
        (said: :meth:`_unreadable`)."""
        if path is None:
            return None
        try:
            return pq.ParquetFile(path)
        except UNREADABLE as err:
            self._unreadable(name, path, err)
            return None

    def _read(self, name: str, path: Path | None, columns: Sequence[str] | None) -> pa.Table | None:
        """``columns`` (those it has; None: all) of file ``name``, or None (see :meth:`_open`)."""
        file = self._open(name, path)
        if file is None:
            return None
        wanted = None if columns is None else [c for c in columns if c in file.schema_arrow.names]
        try:
            return file.read(columns=wanted)
        except UNREADABLE as err:
            self._unreadable(name, path, err)
            return None

    def _unreadable(self, name: str, path: Path, err: BaseException) -> None:
        """Say that a file of the table cannot be read (a part cut short by a kill while it
        was uploaded, a damaged disk, a permission): it is skipped, its cells' rows rebuilt
        from their runs, as for a table that lost a part."""
        local = self.io.local_dir(self.run_id)
        where = str(path) if local is not None else f"artifact {name} of run {self.run_id}"
        reason = " ".join(str(err).split())[:200]
        warn(
            f"the sweep's table file {where} cannot be read ({type(err).__name__}: {reason}); "
            "it is skipped, and the cells it holds are read from their MLflow runs"
        )


def holds(tables: Sequence[pa.Table], runs: Any) -> bool:
    """Whether a sweep's table, read as ``tables`` (:meth:`CellTable.arrow`), still holds
    the ``runs`` runs its driver wrote into it (the parent's tag ``table_runs``; None for a
    table written before that tag: trusted). A part deleted or truncated after it was
    written, during a sweep or after, leaves fewer: then the runs are the truth and the
    table a cache to rebuild from them, never a reason to run their cells again."""
    try:
        expected = int(float(runs))
    except (TypeError, ValueError):
        return True
    chunks = [c for t in tables if "run_id" in t.column_names for c in t["run_id"].chunks]
    if not chunks:
        return expected <= 0
    ids = pa.chunked_array(chunks).cast(pa.string())
    return pc.count_distinct(ids).as_py() >= expected


def _part(number: int) -> str:
    return f"{PARTS}/part-{number:06d}.parquet"


def _conform(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns in its order (missing ones null), cast to it."""
    n = table.num_rows
    columns = [
        table.column(f.name).cast(f.type) if f.name in table.column_names else pa.nulls(n, f.type)
        for f in schema
    ]
    return pa.Table.from_arrays(columns, schema=schema)


def _last_rows(sources: Sequence[Path]) -> list[np.ndarray | None]:
    """Per source, which of its rows are their run's last row (the rows a consolidation
    keeps), as a boolean mask; None for a source without run ids (all its rows are kept).

    Found by Arrow's group-by over the run ids of every source: a few bytes per row, where
    a Python dict of run ids would grow the driver's memory with the sweep (issue #15).
    """
    ids: list[pa.ChunkedArray | None] = []
    for path in sources:
        with pq.ParquetFile(path) as source:
            has_ids = "run_id" in source.schema_arrow.names
            column = source.read(columns=["run_id"], use_threads=False) if has_ids else None
        ids.append(None if column is None else column.column("run_id").cast(pa.string()))
    present = [c for c in ids if c is not None]
    total = sum(len(c) for c in present)
    rows = pa.table(
        {
            "run_id": pa.chunked_array([chunk for c in present for chunk in c.chunks], pa.string()),
            "row": pa.array(np.arange(total, dtype=np.int64)),
        }
    )
    last = rows.group_by("run_id", use_threads=False).aggregate([("row", "max")])
    keep = np.zeros(total, dtype=bool)
    keep[last.column("row_max").to_numpy()] = True
    masks, start = [], 0
    for column in ids:
        masks.append(None if column is None else keep[start : start + len(column)])
        start += 0 if column is None else len(column)
    return masks
