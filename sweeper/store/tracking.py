"""The connection to an MLflow experiment: the store behind a tracking URI, checked before
use, and the experiment the driver writes into (docs/architecture.md, "The MLflow layout").

Only the driver writes into the store. What it writes lives beside this module: the runs of
cells (:mod:`~sweeper.store.cellruns`), a sweep's parent run and table
(:mod:`~sweeper.store.parent`, :mod:`~sweeper.store.table`), the resume index
(:mod:`~sweeper.store.index`) and the settling of what killed drivers left
(:mod:`~sweeper.store.settle`); :mod:`sweeper.store` is the interface the driver uses.
"""

from __future__ import annotations

import logging
import os
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlparse
from urllib.request import urlopen

import numpy as np
from mlflow import MlflowClient
from mlflow.entities import RunTag, ViewType

from sweeper.errors import StoreFailed, SweepError
from sweeper.process import driver_id
from sweeper.store.failures import STORE_ERRORS
from sweeper.store.lock import prepare_sqlite_store, sqlite_path
from sweeper.store.table import ArtifactIO, CellTable, local_artifact_dir

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
SERVER_PATIENCE_S = 30.0


def check_store(uri: str) -> None:
    """Refuse in seconds a store that cannot be used (minutes of retries otherwise): an
    MLflow server that does not answer, a sqlite file in a directory that is missing or
    cannot be written."""
    scheme = uri.split(":", 1)[0]
    if scheme in ("http", "https"):
        _check_server(uri)
        return
    if scheme != "sqlite" or not uri.startswith("sqlite:///"):
        return
    path = Path(uri.removeprefix("sqlite:///"))
    if path.exists():
        if not os.access(path, os.R_OK | os.W_OK):
            raise SweepError(f"the MLflow store {path} (tracking.uri) cannot be read and written")
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
    one that accepts it but is slow to answer (a loaded machine) gets SERVER_PATIENCE_S."""
    deadline = time.monotonic() + SERVER_PATIENCE_S
    while True:
        try:
            with urlopen(f"{uri.rstrip('/')}/health", timeout=SERVER_TIMEOUT_S):
                return
        except (OSError, ValueError) as err:
            slow = isinstance(getattr(err, "reason", err), TimeoutError)
            if slow and time.monotonic() < deadline:
                continue
            raise SweepError(
                f"no MLflow tracking server answers at {uri} (tracking.uri): {err}. Start it "
                "(mlflow server --host HOST --port PORT ...), fix tracking.uri, or use a local "
                "store (tracking.uri=sqlite:///mlflow.db)"
            ) from None


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
    """

    def __init__(
        self,
        uri: str | None,
        experiment: str,
        task: Vocabulary = NoCurves(),
        artifacts_destination: str | None = None,
    ) -> None:
        self.artifacts_destination = Path(artifacts_destination) if artifacts_destination else None
        self.uri = resolve_uri(uri)
        check_store(self.uri)
        path = sqlite_path(self.uri)
        self.store_note = "" if path is None else prepare_sqlite_store(path)
        self.client = MlflowClient(tracking_uri=self.uri)
        self.experiment_name = experiment
        self.task = task
        self.metric_points = METRIC_POINTS
        self._tables: dict[str, CellTable] = {}
        self.driver = driver_id()
        found = self.client.get_experiment_by_name(experiment)
        if found is None:
            self.experiment_id = self.client.create_experiment(
                experiment, artifact_location=self._artifact_location(experiment)
            )
        else:
            if found.lifecycle_stage == "deleted":
                self.client.restore_experiment(found.experiment_id)
            self.experiment_id = found.experiment_id
        if found is None or found.tags.get(EXPERIMENT_KIND[0]) != EXPERIMENT_KIND[1]:
            self.client.set_experiment_tag(self.experiment_id, *EXPERIMENT_KIND)

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

    def set_tags(self, run_id: str, tags: Mapping[str, str]) -> None:
        self.client.log_batch(run_id, tags=[RunTag(k, v) for k, v in tags.items()])


def number_or_none(value: Any) -> float | None:
    """``value`` as a float, or None when it is missing, NaN or not a number (MLflow tags)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return None if np.isnan(number) else number
