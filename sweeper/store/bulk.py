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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import sqlalchemy as sa

from sweeper.store import mlflow_private

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
        Set once the run is in the store, committed (FINISHED or FAILED).
    logged : bool
        Through MLflow's API: set once the run is written whole but not yet committed
        (RUNNING; :mod:`sweeper.store.record`).
    created : str or None
        Through MLflow's API: the run id an attempt created.
    attempted : bool
        Through MLflow's API: an attempt was made (the next one first removes its run).
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
    logged: bool = False
    created: str | None = None
    attempted: bool = False


def refuse(record: RunRecord) -> None:
    """Raise MLflow's own ``MlflowException`` (INVALID_PARAMETER_VALUE) if its API would
    refuse a metric or param key of ``record`` (``bad key/../?*``): the direct writes store
    only what MLflow's API stores. Each key is checked once, with MLflow's validators
    (:mod:`sweeper.store.mlflow_private`); the values are the floats
    :func:`sweeper.store.cellruns.record_of` made."""
    metric = mlflow_private.get("validate_metric")
    for key in dict.fromkeys(k for k, _, _ in record.metrics):
        metric(key, 0.0, record.end_time, 0)
    param = mlflow_private.get("validate_param_name")
    for key in record.params:
        param(key)


def database_of(uri: str, database: str | None) -> str | None:
    """The SQL database the driver writes runs into: ``database`` (``tracking.database``,
    for a tracking server's backend store), else the tracking URI itself when it is one
    (``sqlite:///...``, ``postgresql://...``; MLflow's other databases go through its API),
    else None (runs go through MLflow's API)."""
    if database:
        return str(database)
    scheme = uri.split(":", 1)[0].split("+", 1)[0]
    return uri if scheme in ("sqlite", "postgresql") else None


def schema_revision(database: str) -> tuple[str | None, str]:
    """(the MLflow schema revision of ``database``, the one this MLflow writes): read only,
    from alembic's ``alembic_version`` table (None when it has none)."""
    head = mlflow_private.get("latest_revision")()
    engine = sa.create_engine(database)
    try:
        with engine.connect() as connection:
            if not sa.inspect(connection).has_table("alembic_version"):
                return None, head
            found = connection.execute(sa.text("select version_num from alembic_version"))
            return found.scalar(), head
    finally:
        engine.dispose()


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
        check_columns()
        mlflow_private.get("verify_schema")(self.engine)  # the tables this MLflow writes
        self.user = _user()
        self.fence: Any = None  # the driver's hold on the experiment (sweeper/store/lock.py)

    def artifact_uri(self, run_id: str) -> str:
        return f"{self.artifact_location}/{run_id}/artifacts"

    def experiment_name(self) -> str | None:
        """The name of this writer's experiment in its database (None: no such id)."""
        experiments = sa.table("experiments", sa.column("experiment_id"), sa.column("name"))
        query = sa.select(experiments.c.name).where(
            experiments.c.experiment_id == self.experiment_id
        )
        with self.engine.connect() as connection:
            return connection.execute(query).scalar()

    def write(self, records: Sequence[RunRecord]) -> None:
        """Write ``records`` in one transaction; a batch that already committed (a retry
        after a lost connection) is left as it is. A record whose metric or param key MLflow's
        API would refuse is refused here the same way (:func:`refuse`: MLflow's own
        ``MlflowException``), before anything is written. :attr:`fence` (a
        :class:`sweeper.store.lock.Fence`) checks, in the same transaction, that this driver still
        holds the experiment."""
        records = [r for r in records if not r.written]
        if not records:
            return
        for record in records:  # what MLflow's API refuses is refused here too
            refuse(record)
        rows = self._rows(records)
        with self.engine.begin() as connection:
            if self._committed(connection, records[0].run_id):
                return
            if self.fence is not None:
                self.fence.check_in(connection)
            insert = _copy if self.engine.dialect.name == "postgresql" else _executemany
            cursor = connection.connection.driver_connection.cursor()
            for table, data in rows.items():
                if data:
                    insert(cursor, table, COLUMNS[table], data)
            old = [(r.run_id, o) for r in records for o in r.supersedes]
            if old:
                tags = _table("tags")
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

    @staticmethod
    def _committed(connection: Any, run_id: str) -> bool:
        runs = _table("runs")
        found = connection.execute(sa.select(runs.c.run_uuid).where(runs.c.run_uuid == run_id))
        return found.first() is not None

    def _rows(self, records: Sequence[RunRecord]) -> dict[str, list[tuple]]:
        """The rows of each MLflow table for ``records``, as tuples in :data:`COLUMNS`'s
        order."""
        rows: dict[str, list[tuple]] = {table: [] for table in COLUMNS}
        for r in records:
            rows["runs"].append(
                (r.run_id, r.name, "UNKNOWN", "", "", self.user, r.status, r.start_time,
                 r.end_time, None, "", "active", self.artifact_uri(r.run_id), self.experiment_id)
            )  # fmt: skip
            tags = {**r.tags, "mlflow.runName": r.name}
            rows["tags"] += [(k, v, r.run_id) for k, v in tags.items()]
            rows["params"] += [(k, v, r.run_id) for k, v in r.params.items()]
            latest: dict[str, tuple[int, float, bool]] = {}
            for key, raw, step in r.metrics:
                is_nan, value = _sanitise(raw)
                rows["metrics"].append((key, value, r.end_time, int(step), is_nan, r.run_id))
                if key not in latest or (step, value) > latest[key][:2]:
                    latest[key] = (int(step), value, is_nan)
            rows["latest_metrics"] += [
                (k, v, r.end_time, step, nan, r.run_id) for k, (step, v, nan) in latest.items()
            ]
        return rows


COLUMNS = {
    "runs": ("run_uuid", "name", "source_type", "source_name", "entry_point_name", "user_id",
             "status", "start_time", "end_time", "deleted_time", "source_version",
             "lifecycle_stage", "artifact_uri", "experiment_id"),
    "tags": ("key", "value", "run_uuid"),
    "params": ("key", "value", "run_uuid"),
    "metrics": ("key", "value", "timestamp", "step", "is_nan", "run_uuid"),
    "latest_metrics": ("key", "value", "timestamp", "step", "is_nan", "run_uuid"),
}  # fmt: skip
"""The columns written of each MLflow table (:meth:`BulkWriter._rows` follows this order);
checked against MLflow's own table definitions when a writer opens (:func:`check_columns`).
"""
MODELS = {"runs": "SqlRun", "tags": "SqlTag", "params": "SqlParam", "metrics": "SqlMetric",
          "latest_metrics": "SqlLatestMetric"}  # fmt: skip
"""MLflow's table definition of each table (:mod:`sweeper.store.mlflow_private`)."""


def _table(name: str) -> sa.Table:
    """The SQLAlchemy table ``name`` with the columns sweeper reads and writes."""
    return sa.table(name, *(sa.column(c) for c in COLUMNS[name]))


def check_columns() -> None:
    """Refuse an MLflow whose tables have other columns than :data:`COLUMNS` (its schema
    changed: the direct writes must be updated, or ``tracking.direct_writes=false``)."""
    for table, model_name in MODELS.items():
        model = mlflow_private.get(model_name)
        ours, theirs = set(COLUMNS[table]), set(model.__table__.columns.keys())
        if ours != theirs or model.__tablename__ != table:
            raise mlflow_private.MlflowChanged(
                f"this MLflow's table {model.__tablename__} has the columns {sorted(theirs)}, "
                f"sweeper/store/bulk.py writes {sorted(ours)}: set tracking.direct_writes=false"
            )


def _copy(cursor: Any, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
    """PostgreSQL's ``COPY ... FROM STDIN`` (psycopg 3)."""
    with cursor.copy(f"COPY {table} ({', '.join(columns)}) FROM STDIN") as copy:
        for row in rows:
            copy.write_row(row)


def _executemany(cursor: Any, table: str, columns: Sequence[str], rows: list[tuple]) -> None:
    """One prepared ``INSERT`` for every row (the DB-API's ``executemany``)."""
    marks = ", ".join("?" for _ in columns)
    cursor.executemany(f"INSERT INTO {table} ({', '.join(columns)}) VALUES ({marks})", rows)


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
    except (KeyError, OSError, ImportError):  # no user name in a container (no passwd entry)
        return "unknown"
