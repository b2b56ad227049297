"""Cell runs written in batches straight into an MLflow SQL database (issue #15).

MLflow's API records a run in at least four calls, each a transaction (through a tracking
server, each also an HTTP round trip handled by the server's Python): about 15 cells/s
into sqlite here, 11 through a server. When the driver can reach the store's database (the
embedded sqlite file, or the PostgreSQL database behind a tracking server:
``tracking.database``), it writes a whole batch of finished cells as runs in ONE
transaction, into MLflow's own tables and through MLflow's own table definitions
(``mlflow.store.tracking.dbmodels``), after checking that the database's schema is the one
this MLflow expects. PostgreSQL gets the rows by ``COPY``, sqlite by ``executemany``.

What a reader sees is what MLflow's API would have written: a run with its tags (run name
included), params, metrics (with ``latest_metrics``, which the UI and searches use), its
status FINISHED or FAILED, ``start_time`` at the cell's start and ``end_time`` at the
batch's commit, and its artifact directory ``<experiment artifact location>/<run id>/
artifacts``. A batch is atomic: a kill or a lost database leaves all of its runs or none
(and never a RUNNING one), and its retry with the same run ids knows a batch that did
commit by its first run id.
"""

from __future__ import annotations

import getpass
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa
from mlflow.store.db.utils import _verify_schema
from mlflow.store.tracking.dbmodels.models import (
    SqlLatestMetric,
    SqlMetric,
    SqlParam,
    SqlRun,
    SqlTag,
)

MAX_FLOAT = 1.7976931348623157e308
SUPERSEDED = "superseded_by"


@dataclass
class RunRecord:
    """One cell's run, ready to be written.

    Parameters
    ----------
    run_id : str
        32 hex digits (MLflow's run id format), chosen by the driver.
    name : str
        The run name (also written as the tag ``mlflow.runName``).
    status : str
        ``FINISHED`` or ``FAILED``.
    start_time, end_time : int
        Milliseconds since the epoch.
    tags, params : dict of str to str
    metrics : list of (key, value, step)
        Every metric point; its timestamp is ``end_time``.
    artifacts : dict of str to bytes
        File name -> content, written into the run's artifact directory.
    supersedes : list of str
        Run ids of the cell's older FINISHED runs (a rerun): tagged ``superseded_by`` this
        run in the same transaction.
    written : bool
        Set once the run is in the store.
    created : str or None
        Through MLflow's API: the run id an attempt created (a failed attempt's run is
        settled before the next one).
    """

    run_id: str
    name: str
    status: str
    start_time: int
    end_time: int
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, str] = field(default_factory=dict)
    metrics: list[tuple[str, float, int]] = field(default_factory=list)
    artifacts: dict[str, bytes] = field(default_factory=dict)
    supersedes: list[str] = field(default_factory=list)
    written: bool = False
    created: str | None = None


def database_of(uri: str, database: str | None) -> str | None:
    """The SQL database the driver writes runs into: ``database`` (``tracking.database``,
    for a tracking server's backend store), else the tracking URI itself when it is one
    (``sqlite:///...``, ``postgresql://...``), else None (runs go through MLflow's API)."""
    if database:
        return str(database)
    scheme = uri.split(":", 1)[0].split("+", 1)[0]
    return uri if scheme in ("sqlite", "postgresql", "mysql", "mssql") else None


class BulkWriter:
    """Writes batches of :class:`RunRecord` into the MLflow database ``database``.

    Parameters
    ----------
    database : str
        A SQLAlchemy URI of an MLflow tracking database (``sqlite:///...``,
        ``postgresql+psycopg://...``).
    experiment_id : str
    artifact_location : str
        The experiment's artifact location; a run's is ``<it>/<run id>/artifacts``.
    """

    def __init__(self, database: str, experiment_id: str, artifact_location: str) -> None:
        self.database = database
        self.experiment_id = int(experiment_id)
        self.artifact_location = artifact_location.rstrip("/")
        options = {"connect_args": {"timeout": 60}} if database.startswith("sqlite") else {}
        self.engine = sa.create_engine(database, pool_pre_ping=True, **options)
        _verify_schema(self.engine)  # the tables are the ones this MLflow writes
        self.user = _user()

    def artifact_uri(self, run_id: str) -> str:
        return f"{self.artifact_location}/{run_id}/artifacts"

    def write(self, records: Sequence[RunRecord]) -> None:
        """Write ``records`` in one transaction; a batch that already committed (a retry
        after a lost connection) is left as it is."""
        records = [r for r in records if not r.written]
        if not records:
            return
        rows = self._rows(records)
        with self._transaction() as connection:
            if self._committed(connection, records[0].run_id):
                return
            if self.engine.dialect.name == "postgresql":
                _copy(connection, rows)
            else:
                for model, data in rows.items():
                    if data:
                        connection.execute(model.__table__.insert(), data)
            old = [(r.run_id, o) for r in records for o in r.supersedes]
            if old:
                tags = SqlTag.__table__
                connection.execute(
                    tags.delete().where(
                        tags.c.key == SUPERSEDED, tags.c.run_uuid.in_([o for _, o in old])
                    )
                )
                connection.execute(
                    tags.insert(), [{"key": SUPERSEDED, "value": n, "run_uuid": o} for n, o in old]
                )
        for record in records:
            record.written = True

    def close(self) -> None:
        self.engine.dispose()

    @contextmanager
    def _transaction(self) -> Iterator[Any]:
        with self.engine.begin() as connection:
            yield connection

    @staticmethod
    def _committed(connection: Any, run_id: str) -> bool:
        runs = SqlRun.__table__
        found = connection.execute(sa.select(runs.c.run_uuid).where(runs.c.run_uuid == run_id))
        return found.first() is not None

    def _rows(self, records: Sequence[RunRecord]) -> dict[Any, list[dict[str, Any]]]:
        """The rows of each MLflow table for ``records``."""
        rows: dict[Any, list[dict[str, Any]]] = {
            m: [] for m in (SqlRun, SqlTag, SqlParam, SqlMetric, SqlLatestMetric)
        }
        for r in records:
            rows[SqlRun].append(
                {
                    "run_uuid": r.run_id,
                    "name": r.name,
                    "source_type": "UNKNOWN",
                    "source_name": "",
                    "entry_point_name": "",
                    "user_id": self.user,
                    "status": r.status,
                    "start_time": r.start_time,
                    "end_time": r.end_time,
                    "deleted_time": None,
                    "source_version": "",
                    "lifecycle_stage": "active",
                    "artifact_uri": self.artifact_uri(r.run_id),
                    "experiment_id": self.experiment_id,
                }  # fmt: skip
            )
            tags = {**r.tags, "mlflow.runName": r.name}
            rows[SqlTag] += [{"key": k, "value": v, "run_uuid": r.run_id} for k, v in tags.items()]
            rows[SqlParam] += [
                {"key": k, "value": v, "run_uuid": r.run_id} for k, v in r.params.items()
            ]
            latest: dict[str, tuple[int, float, bool]] = {}
            for key, raw, step in r.metrics:
                is_nan, value = _sanitise(raw)
                rows[SqlMetric].append(
                    {
                        "key": key,
                        "value": value,
                        "timestamp": r.end_time,
                        "step": int(step),
                        "is_nan": is_nan,
                        "run_uuid": r.run_id,
                    }  # fmt: skip
                )
                if key not in latest or (step, value) > latest[key][:2]:
                    latest[key] = (int(step), value, is_nan)
            rows[SqlLatestMetric] += [
                {
                    "key": k,
                    "value": v,
                    "timestamp": r.end_time,
                    "step": s,
                    "is_nan": n,
                    "run_uuid": r.run_id,
                }  # fmt: skip
                for k, (s, v, n) in latest.items()
            ]
        return rows


def _copy(connection: Any, rows: Mapping[Any, list[dict[str, Any]]]) -> None:
    """PostgreSQL's ``COPY ... FROM STDIN`` of each table's rows (psycopg 3)."""
    cursor = connection.connection.driver_connection.cursor()
    for model, data in rows.items():
        if not data:
            continue
        columns = list(data[0])
        statement = f"COPY {model.__tablename__} ({', '.join(columns)}) FROM STDIN"
        with cursor.copy(statement) as copy:
            for row in data:
                copy.write_row([row[c] for c in columns])


def _sanitise(value: float) -> tuple[bool, float]:
    """As MLflow stores a metric: NaN as 0 with ``is_nan``, +-inf as the largest float."""
    value = float(value)
    if math.isnan(value):
        return True, 0.0
    if math.isinf(value):
        return False, MAX_FLOAT if value > 0 else -MAX_FLOAT
    return False, value


def _user() -> str:
    try:
        return getpass.getuser()
    except Exception:  # no user name in a container
        return "unknown"
