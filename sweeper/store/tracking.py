"""The connection to an MLflow experiment: the store behind a tracking URI, checked before
use, and the experiment the driver writes into (docs/architecture.md, "The MLflow layout").

Only the driver writes into the store. What it writes lives beside this module: the runs of
cells (:mod:`~sweeper.store.cellruns`), a sweep's parent run and table
(:mod:`~sweeper.store.parent`, :mod:`~sweeper.store.table`), the resume index
(:mod:`~sweeper.store.index`) and the settling of what killed drivers left
(:mod:`~sweeper.store.settle`); :mod:`sweeper.store` is the interface the driver uses.
"""

from __future__ import annotations

import json
import logging
import os
import socket
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.error import HTTPError
from urllib.parse import urlparse
from urllib.request import urlopen

import numpy as np
from mlflow import MlflowClient
from mlflow.entities import RunTag, ViewType
from mlflow.exceptions import MlflowException

from sweeper.errors import StoreFailed, SweepError
from sweeper.process import driver_id
from sweeper.store.failures import STORE_ERRORS
from sweeper.store.lock import prepare_sqlite_store, sqlite_path
from sweeper.store.table import ArtifactIO, CellTable, local_artifact_dir
from sweeper.uri import redact

CURVE_POINTS = 500
"""Points of each declared curve in the sweep's table (``curve_<name>`` columns)."""
METRIC_POINTS = 100
"""Points of each curve logged as MLflow step metrics (its charts); the table keeps
:data:`CURVE_POINTS` and ``cell.npz`` every round."""
CELL_ARTIFACT = "cell.npz"
MAX_PARAM_LENGTH = 500
PAGE = 10_000
EXPERIMENT_KIND = ("mlflow.experimentKind", "custom_model_development")
"""Marks an experiment as model training for MLflow 3's UI, which otherwise opens an
experiment without traces on its GenAI overview instead of the runs table."""
RUN_COLOR = "mlflow.runColor"
"""The run tag MLflow's UI draws a run in (and writes when a colour is picked)."""
TABLE_RUNS = "table_runs"
"""The parent's tag counting the runs ever written into its table
(:func:`sweeper.store.table.holds`)."""


class Vocabulary(Protocol):
    """What the store needs of a family's vocabulary (``sweeper.task.Task`` is one): the
    curves its cells return, by name (the table's ``curve_<name>`` columns, the runs' step
    metrics). The store imports nothing of the driver."""

    curves: Mapping[str, Any]


@dataclass(frozen=True)
class NoCurves:
    """The vocabulary of a store opened without a family: no curves."""

    curves: Mapping[str, Any] = field(default_factory=dict)


def quiet_mlflow() -> None:
    """MLflow's client settings for a driver that writes thousands of runs: no "View run at
    <url>" line per run, no progress bars, and a server that is away fails a call at once
    (the driver waits for it itself, saying so: :func:`sweeper.store.record.patiently`,
    instead of MLflow's silent minutes of HTTP retries), and its database errors logged as
    one line (:class:`_OneParagraph`). A value already set is kept."""
    quiet = logging.getLogger("mlflow.store.db.utils")
    if not any(isinstance(f, _OneParagraph) for f in quiet.filters):
        quiet.addFilter(_OneParagraph())
    os.environ.setdefault("MLFLOW_SUPPRESS_PRINTING_URL_TO_STDOUT", "true")
    os.environ.setdefault("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")


def resolve_uri(uri: str | None) -> str:
    """The URI given (config or command line) wins; else $MLFLOW_TRACKING_URI; else a local
    sqlite store in the working directory. (The config's default already reads the variable.)
    """
    return uri or os.environ.get("MLFLOW_TRACKING_URI") or "sqlite:///mlflow.db"


SERVER_TIMEOUT_S = 3.0
"""How long a connection to a server or a database may take before it counts as refused."""
SERVER_PATIENCE_S = 30.0
"""How long a tracking server that accepted the connection may take to answer ``/health``
(a loaded machine) before it is refused: the longest a silent server holds the start."""
DATABASE_PORTS = {"postgresql": 5432, "mysql": 3306, "mssql": 1433}
BOUNDS = {
    "connect_timeout": "10",
    "keepalives": "1",
    "keepalives_idle": "30",
    "keepalives_interval": "10",
    "keepalives_count": "3",
    "tcp_user_timeout": "30000",
}
"""libpq's connection settings of every PostgreSQL connection the driver opens (MLflow's
store, the direct writes, the advisory lock): a connection attempt ends after 10 s, a peer
that vanished is noticed within about a minute (TCP keepalive, unacknowledged data). A
database that stays connected but never answers is bounded by ``tracking.patience_s``
(:func:`sweeper.store.record.patiently`)."""
IDLE_IN_TRANSACTION_MS = 60_000
"""PostgreSQL ends a session left inside a transaction this long (a driver paused in the
middle of a batch holds the fencing token's row lock: a takeover waits at most this)."""


def check_store(uri: str) -> None:
    """Refuse in seconds a store that cannot be used (minutes of retries otherwise), before a
    lock file or a store is made: an MLflow server that does not answer (or a server that is
    not MLflow's), a database nobody listens for at its host and port, a sqlite URI naming a
    directory, a file that is not an SQLite database, or a file in a directory that is missing
    or cannot be written."""
    scheme = uri.split(":", 1)[0]
    if scheme in ("http", "https"):
        _check_server(uri)
        return
    if scheme.split("+", 1)[0] in DATABASE_PORTS:
        _check_database(uri)
        return
    if scheme != "sqlite" or not uri.startswith("sqlite:///"):
        return
    path = Path(uri.removeprefix("sqlite:///"))
    if path.is_dir():
        raise SweepError(
            f"tracking.uri={uri} names the directory {path}, not a file: a sqlite store is a "
            f"file, e.g. tracking.uri=sqlite:///{path / 'mlflow.db'}"
        )
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise SweepError(f"the MLflow store {path} (tracking.uri) cannot be read and written")
        _check_sqlite_file(path, uri)
        _check_free(path.parent or Path("."), MIN_FREE_BYTES, path, uri)
        return
    try:
        with tempfile.NamedTemporaryFile(dir=path.parent or "."):
            pass
    except OSError as err:
        raise SweepError(
            f"cannot create the MLflow store {path} (tracking.uri={uri}): {err.strerror or err}. "
            "Point tracking.uri at a writable directory (e.g. tracking.uri=sqlite:///mlflow.db)"
        ) from None
    _check_free(path.parent or Path("."), NEW_STORE_BYTES, path, uri)


SQLITE_HEADER = b"SQLite format 3\x00"
"""The first 16 bytes of every SQLite database file (an empty file is a new database)."""


def _check_sqlite_file(path: Path, uri: str) -> None:
    """Refuse a file that is not an SQLite database before a lock file is made beside it."""
    with open(path, "rb") as file:
        head = file.read(len(SQLITE_HEADER))
    if head and head != SQLITE_HEADER:
        raise SweepError(
            f"the file {path} (tracking.uri={uri}) is not an SQLite database (it does not "
            "begin with SQLite's header), so it is no MLflow store: point tracking.uri at the "
            "store's file, or at a new file name to make a store there"
        )


NEW_STORE_BYTES = 8 << 20
"""Free space a new sqlite store needs (its empty schema is about 1 MB, its journal as much)."""
MIN_FREE_BYTES = 1 << 20
"""Free space below which an existing sqlite store is refused (a batch could not be written)."""


def _check_free(directory: Path, needed: int, path: Path, uri: str) -> None:
    """Refuse a store on a disk without ``needed`` bytes free, before a lock file exists."""
    try:
        stat = os.statvfs(directory)
    except OSError:
        return
    free = stat.f_bavail * stat.f_frsize
    if free < needed:
        raise SweepError(
            f"the disk holding the MLflow store {path} (tracking.uri={uri}) has "
            f"{free / 1024:.0f} kB free, less than the {needed >> 20} MB a sweep needs there: "
            "free disk space, or point tracking.uri at another disk"
        )


class _OneParagraph(logging.Filter):
    """MLflow logs each database error with its traceback before raising it; the driver
    says what failed itself (:func:`store_calls`), so only the message is kept."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.exc_info, record.exc_text = None, None
        return True


@contextmanager
def store_calls(what: str) -> Iterator[None]:
    """Turn an error of the store during ``what`` into :class:`StoreFailed`."""
    try:
        yield
    except STORE_ERRORS as err:
        reason = " ".join(str(err).split())
        reason = reason if len(reason) <= 400 else reason[:397] + "..."
        raise StoreFailed(f"{what}: {type(err).__name__}: {reason}") from err


def _check_server(uri: str) -> None:
    """A server that refuses the connection (or whose host is unknown) is refused at once;
    one that accepts it but is slow to answer (a loaded machine) gets SERVER_PATIENCE_S in
    all; one that answers, but not as MLflow does, is refused (:func:`_check_mlflow_api`)."""
    deadline = time.monotonic() + SERVER_PATIENCE_S
    while True:
        left = deadline - time.monotonic()
        try:
            with urlopen(f"{uri.rstrip('/')}/health", timeout=min(SERVER_TIMEOUT_S, left)):
                break
        except (OSError, ValueError) as err:
            slow = isinstance(getattr(err, "reason", err), TimeoutError)
            if slow and deadline - time.monotonic() > 0.1:
                continue
            what = f"it did not answer for {SERVER_PATIENCE_S:.0f} s" if slow else str(err)
            raise SweepError(
                f"no MLflow tracking server answers at {uri} (tracking.uri): {what}. Start it "
                "(mlflow server --host HOST --port PORT ...), fix tracking.uri, or use a local "
                "store (tracking.uri=sqlite:///mlflow.db)"
            ) from None
    _check_mlflow_api(uri)


PROBE = "api/2.0/mlflow/experiments/get-by-name?experiment_name=sweeper-probe"
"""An MLflow API call every tracking server answers with JSON: the experiment, or an
``error_code`` (RESOURCE_DOES_NOT_EXIST)."""


def _check_mlflow_api(uri: str) -> None:
    """Refuse a server that answers but is no MLflow tracking server (a web server or a
    proxy that answers 200 to everything): MLflow's API answers :data:`PROBE` with JSON
    holding ``experiment`` or ``error_code``. A 401 or 403 is MLflow's authentication: the
    client's credentials decide, later."""
    try:
        with urlopen(f"{uri.rstrip('/')}/{PROBE}", timeout=SERVER_TIMEOUT_S) as answer:
            status, body = answer.status, answer.read(1 << 16)
    except HTTPError as err:
        if err.code in (401, 403):
            return
        status, body = err.code, err.read(1 << 16)
    except (OSError, ValueError):  # it stopped answering since /health: said when used
        return
    try:
        found = json.loads(body)
    except ValueError:
        found = None
    if isinstance(found, dict) and ("experiment" in found or "error_code" in found):
        return
    shown = " ".join(body[:80].decode(errors="replace").split())
    raise SweepError(
        f"the server at {uri} (tracking.uri) answers, but not as an MLflow tracking server: "
        f"GET /{PROBE.split('?')[0]} got HTTP {status} with {shown!r}. Point tracking.uri at "
        "an MLflow tracking server (mlflow server --host HOST --port PORT), not a proxy or "
        "another web server, or use a local store (tracking.uri=sqlite:///mlflow.db)"
    )


def _check_database(uri: str) -> None:
    """A database that nobody listens for at its host and port is refused within
    SERVER_TIMEOUT_S (MLflow would retry for minutes); a socket path, or a URI this
    cannot read, is left to the database's driver."""
    import sqlalchemy as sa

    try:
        url = sa.engine.make_url(uri)
    except sa.exc.ArgumentError:
        return
    if not url.host:
        return
    port = url.port or DATABASE_PORTS[uri.split(":", 1)[0].split("+", 1)[0]]
    try:
        socket.create_connection((url.host, port), timeout=SERVER_TIMEOUT_S).close()
    except OSError as err:
        reason = "it did not accept within 3 s" if isinstance(err, TimeoutError) else err
        raise SweepError(
            f"no database answers at {url.host}:{port} (tracking.uri={redact(uri)}): "
            f"{reason}. Start it, fix the host and port of tracking.uri, or use a local "
            "store (tracking.uri=sqlite:///mlflow.db)"
        ) from None


def bounded(uri: str, patience_s: float) -> str:
    """``uri`` with libpq's :data:`BOUNDS`, a statement timeout of ``patience_s`` and
    :data:`IDLE_IN_TRANSACTION_MS` when it is a PostgreSQL database's (settings the URI
    gives itself are kept); any other URI as it is."""
    if uri.split(":", 1)[0].split("+", 1)[0] != "postgresql":
        return uri
    import sqlalchemy as sa

    url = sa.engine.make_url(uri)
    options = (
        f"-c statement_timeout={int(patience_s * 1000)} "
        f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_MS}"
    )
    query = {**BOUNDS, "options": options, **url.query}
    return url.update_query_dict(query).render_as_string(hide_password=False)


def _connect_once(uri: str) -> None:
    """Connect to a database ``uri`` once, so that what keeps it from answering is said at
    once and judged (:mod:`sweeper.store.failures`: a refused password is no restart),
    not after MLflow's ten attempts of its own (about a hundred seconds)."""
    if uri.split(":", 1)[0].split("+", 1)[0] not in DATABASE_PORTS:
        return
    import sqlalchemy as sa
    from sqlalchemy.pool import NullPool

    engine = sa.create_engine(uri, poolclass=NullPool)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def search_all(client: MlflowClient, experiment_id: str, filter_string: str = "") -> list[Any]:
    """Every active run of the experiment that matches ``filter_string``, page by page."""
    runs, token = [], None
    while True:
        page = client.search_runs(
            [experiment_id],
            filter_string=filter_string,
            run_view_type=ViewType.ACTIVE_ONLY,
            max_results=PAGE,
            page_token=token,
        )
        runs.extend(page)
        token = page.token
        if not token:
            return runs


class Tracker:
    """The experiment ``experiment`` in the store at ``uri``, created (or restored) when
    missing: its runs, its sweeps' tables and its runs' artifacts.

    Parameters
    ----------
    uri : str or None
        The tracking URI (:func:`resolve_uri`); checked first (:func:`check_store`), a
        sqlite store upgraded or repaired whole (:func:`~sweeper.store.lock.prepare_sqlite_store`,
        said in ``store_note``).
    experiment : str
        The experiment's name.
    task : Vocabulary
        The family's declarations (its curves are the table's columns).
    artifacts_destination : str or None
        A tracking server's ``--artifacts-destination`` as this machine sees it
        (``tracking.artifacts_destination``), so that artifacts are written there directly
        instead of through the server.
    patience_s : float
        ``tracking.patience_s``: a PostgreSQL statement running longer is cancelled
        (:func:`bounded`).
    """

    def __init__(
        self,
        uri: str | None,
        experiment: str,
        task: Vocabulary = NoCurves(),
        artifacts_destination: str | None = None,
        patience_s: float = 300.0,
    ) -> None:
        self.artifacts_destination = Path(artifacts_destination) if artifacts_destination else None
        self.uri = resolve_uri(uri)
        self.patience_s = patience_s
        check_store(self.uri)
        path = sqlite_path(self.uri)
        self.store_note = "" if path is None else prepare_sqlite_store(path)
        _connect_once(self.database_uri())
        self.client = MlflowClient(tracking_uri=self.database_uri())
        self.experiment_name = experiment
        self.task = task
        self.metric_points = METRIC_POINTS
        self.colour_by: tuple[str, dict[str, str]] = ("", {})  # a tag -> a run's UI colour
        self._tables: dict[str, CellTable] = {}
        self.driver = driver_id()
        self.experiment_id = self._experiment(experiment)

    def database_uri(self, uri: str | None = None) -> str:
        """``uri`` (default: the tracking URI) as the driver connects to it: a PostgreSQL
        database's with its timeouts and keepalive (:func:`bounded`)."""
        return bounded(uri or self.uri, self.patience_s)

    def _experiment(self, name: str) -> str:
        """The id of experiment ``name``, created (or restored) when missing; another
        driver creating it in the same instant is no failure (its lease decides which
        driver goes on: :mod:`sweeper.store.lock`)."""
        found = self.client.get_experiment_by_name(name)
        if found is None:
            try:
                created = self.client.create_experiment(
                    name, artifact_location=self._artifact_location(name)
                )
            except MlflowException as err:
                if err.error_code != "RESOURCE_ALREADY_EXISTS":
                    raise
                found = self.client.get_experiment_by_name(name)  # made by the other driver
                if found is None:
                    raise
            else:
                self.client.set_experiment_tag(created, *EXPERIMENT_KIND)
                return created
        if found.lifecycle_stage == "deleted":
            self.client.restore_experiment(found.experiment_id)
        if found.tags.get(EXPERIMENT_KIND[0]) != EXPERIMENT_KIND[1]:
            self.client.set_experiment_tag(found.experiment_id, *EXPERIMENT_KIND)
        return found.experiment_id

    def _artifact_location(self, experiment: str) -> str | None:
        """Beside a local sqlite store, artifacts go to ``mlartifacts/`` next to the file."""
        if self.uri.startswith("sqlite:///"):
            db = Path(self.uri.removeprefix("sqlite:///")).resolve()
            return (db.parent / "mlartifacts" / experiment).as_uri()
        return None

    # --- searches -------------------------------------------------------------------
    def runs(self, filter_string: str = "") -> list[Any]:
        return search_all(self.client, self.experiment_id, filter_string)

    @property
    def remote(self) -> bool:
        """True for a tracking server (HTTP): calls are round trips, worth doing in parallel."""
        return self.uri.split(":", 1)[0] in ("http", "https", "databricks")

    def sweep_parents(self) -> list[Any]:
        return self.runs("tags.role = 'sweep'")

    def table(self, run_id: str) -> CellTable:
        """The sweep table of parent run ``run_id`` (:mod:`sweeper.store.table`)."""
        if run_id not in self._tables:
            uri = self.client.get_run(run_id).info.artifact_uri
            io_ = ArtifactIO(self.client, lambda _: self.artifact_dir(run_id, uri))
            self._tables[run_id] = CellTable(io_, run_id)
        return self._tables[run_id]

    def artifact_dir(self, run_id: str, artifact_uri: str | None = None) -> Path | None:
        """The run's artifact directory when it is on this file system (a local store, or a
        server's artifact destination given as ``artifacts_destination``)."""
        uri = artifact_uri or self.client.get_run(run_id).info.artifact_uri
        if self.artifacts_destination is not None and uri.startswith("mlflow-artifacts:"):
            return self.artifacts_destination / urlparse(uri).path.lstrip("/")
        return local_artifact_dir(uri)

    @property
    def artifact_root(self) -> Path | None:
        """The experiment's artifact directory when it is on this file system (its runs'
        directories are ``<it>/<run id>``), else None."""
        location = self.artifact_location
        if self.artifacts_destination is not None and location.startswith("mlflow-artifacts:"):
            return self.artifacts_destination / urlparse(location).path.lstrip("/")
        return local_artifact_dir(location)

    def write_artifact(
        self, run_id: str, name: str, data: bytes, artifact_uri: str | None = None
    ) -> None:
        """Write ``data`` as artifact ``name`` of run ``run_id`` (whose artifact directory is
        ``artifact_uri``, when known): straight into a local artifact directory (atomically,
        by rename), else through the MLflow client."""
        local = self.artifact_dir(run_id, artifact_uri)
        if local is not None:
            local.mkdir(parents=True, exist_ok=True)
            partial = local / f".{name}.partial"
            partial.write_bytes(data)
            partial.replace(local / name)
            return
        with tempfile.TemporaryDirectory() as tmp:
            path = Path(tmp) / name
            path.write_bytes(data)
            self.client.log_artifact(run_id, str(path))

    @property
    def artifact_location(self) -> str:
        """The experiment's artifact location (a run's is ``<it>/<run id>/artifacts``)."""
        return self.client.get_experiment(self.experiment_id).artifact_location

    def check_artifacts_reachable(self) -> None:
        """Refuse (SweepError) an experiment whose artifacts only its tracking server can
        reach (``mlflow-artifacts:``, the location of an experiment made through a server)
        when this driver is on the database directly and was not told where the server keeps
        them: its tables and curves could not be read, nor new ones written."""
        if self.remote or self.artifacts_destination is not None:
            return
        location = self.artifact_location  # a store call, made only when it can matter
        if location.startswith("mlflow-artifacts:"):
            raise SweepError(
                f"experiment {self.experiment_name!r} was made through a tracking server: "
                f"its artifacts ({location}) are kept by that server, and a driver on the "
                f"database {redact(self.uri)} directly cannot reach them. Run through the "
                f"server (tracking.uri=http://HOST:PORT), or give the server's "
                f"--artifacts-destination as this machine sees it "
                f"(tracking.artifacts_destination=DIR)"
            )

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def number_or_none(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or not a number (MLflow tags)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(number) else number
