"""The sweep's own settings (``rerun``, ``experiment``, ``tracking``), checked before anything
runs (docs/faults.md, "Bad input").

Each mistake is one paragraph naming the setting and the fix (:class:`SweepError`, exit
status 2), raised before the store is opened, Ray started or a parent run created, so a
bad setting leaves nothing behind (nothing RUNNING, no lock file, no directory).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from sweeper.errors import SweepError, boolean, whole_number

MAX_NAME = 200
"""The longest experiment name: it is a directory of the artifact root (255 bytes at most on
most file systems) and a column of 256 characters in MLflow's database."""
MAX_CELLS = 100_000
"""The default of ``sweep.max_cells`` (bench/bench_scale.py measured up to 50,000 cells)."""
DATABASES = ("sqlite", "postgresql", "mysql", "mssql")
"""The SQL databases MLflow stores runs in (a ``tracking.uri`` of these is its own database)."""
SERVERS = ("http", "https")


CREDENTIALS = re.compile(r"(?P<head>\b[A-Za-z][\w+.-]*://[^\s:/@'\"]*):(?P<secret>[^\s@'\"]+)@")
"""``scheme://user:password@`` in any text (a URI of a database or a server)."""
SECRET_WORDS = r"(?:password|passwd|pwd|secret|token|api_?key|access_?key|credentials?)"
SECRET_PARAMETER = re.compile(
    rf"(?P<head>[?&;]\w*{SECRET_WORDS}=)(?P<secret>[^&;#\s'\"]+)", re.IGNORECASE
)
"""A query parameter holding a secret: ``?password=``, ``&sslpassword=``, ``?token=``, ..."""
SECRET_VARIABLE = re.compile(
    r"(?P<head>\b[A-Z][A-Z0-9_]*(?:PASSWORD|PASSWD|SECRET|TOKEN|API_?KEY|ACCESS_?KEY)"
    r"[A-Z0-9_]*=)(?P<secret>[^\s'\"]+)"
)
"""An environment variable given on a command line: ``PGPASSWORD=...``,
``MLFLOW_TRACKING_PASSWORD=...``, ``RAY_AUTH_TOKEN=...``."""
SECRET_KEY = re.compile(
    rf"(?P<head>^\s*[\"']?\w*{SECRET_WORDS}[\"']?\s*:\s+)(?P<secret>\S.*)$",
    re.IGNORECASE | re.MULTILINE,
)
"""A YAML key naming a secret (``password: ...``, ``auth_token: ...``), its whole value."""
REDACTED = "***"


def redact(text: str) -> str:
    """``text`` with every credential replaced by ``***`` (what is recorded or printed: a
    parent run's config.yaml, the lease's and the sweep's command, the resume command, Hydra's
    files): a URI's password (``scheme://user:password@``), a secret query parameter
    (``?password=``, ``&sslpassword=``, ``?token=``), a secret variable on a command line
    (``PGPASSWORD=``, ``MLFLOW_TRACKING_PASSWORD=``, ``RAY_AUTH_TOKEN=``) and a YAML key
    naming one (``password: ...``)."""
    text = CREDENTIALS.sub(rf"\g<head>:{REDACTED}@", text)
    for pattern in (SECRET_PARAMETER, SECRET_VARIABLE, SECRET_KEY):
        text = pattern.sub(rf"\g<head>{REDACTED}", text)
    return text


def redact_hydra_files() -> None:
    """Redact the copies of the config Hydra wrote into its output directory (``.hydra/``)."""
    try:
        from hydra.core.hydra_config import HydraConfig

        if not HydraConfig.initialized():
            return
        hydra = HydraConfig.get()
        folder = Path(hydra.runtime.output_dir) / str(hydra.output_subdir or "")
    except (ValueError, OmegaConfBaseException):  # no Hydra run (tests, the API)
        return
    if not hydra.output_subdir or not folder.is_dir():
        return
    for path in folder.glob("*.yaml"):
        text = path.read_text()
        if redact(text) != text:
            path.write_text(redact(text))


def rerun(cfg: DictConfig) -> bool:
    """``rerun`` as a boolean (``rerun=no`` is false)."""
    return boolean(cfg.get("rerun"), "rerun")


def direct_writes(cfg: DictConfig) -> bool:
    return boolean(cfg.tracking.get("direct_writes", True), "tracking.direct_writes", True)


def check(cfg: DictConfig, uri: str) -> None:
    """Refuse a sweep setting that cannot work (see the module docstring); a password in a
    URI never appears in the message."""
    try:
        _check(cfg, uri)
    except SweepError as err:
        raise SweepError(redact(str(err))) from None


def _check(cfg: DictConfig, uri: str) -> None:
    rerun(cfg)
    direct_writes(cfg)
    experiment_name(cfg.experiment.get("name"))
    limit = max_cells(cfg)
    seeds = cfg.get("seeds")
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > limit:
        raise too_many(f"seeds={seeds} alone makes {seeds:,} cells", limit)
    check_uri(uri)
    check_database(uri, cfg.tracking.get("database"))


def max_cells(cfg: DictConfig) -> int:
    """``sweep.max_cells``: the most cells a sweep may have (a typo such as ``seeds=10000000``
    would otherwise expand for minutes and gigabytes before anything is said)."""
    sweep = cfg.get("sweep") or {}
    return whole_number(sweep.get("max_cells", MAX_CELLS), "sweep.max_cells", 1)


def too_many(what: str, limit: int) -> SweepError:
    return SweepError(
        f"{what}, more than sweep.max_cells={limit:,}. If you mean it, raise the limit "
        f"(sweep.max_cells=N); else fix seeds or sweep.grid"
    )


def scheme(uri: str) -> str:
    """``postgresql`` of ``postgresql+psycopg://...``; ``""`` for a plain path."""
    head, sep, _ = uri.partition("://")
    if not sep:
        head, sep, _ = uri.partition(":")
        if not sep or "/" in head:
            return ""
    return head.split("+", 1)[0].lower()


def check_uri(uri: str) -> None:
    """A tracking URI sweeper can write into: a local sqlite file (``sqlite:///PATH``), a SQL
    database MLflow supports, or a tracking server (``http(s)://HOST:PORT``)."""
    kind = scheme(uri)
    fix = (
        "Use tracking.uri=sqlite:///mlflow.db (a local file), a database "
        "(postgresql+psycopg://USER@HOST/DB) or a tracking server (http://HOST:PORT)"
    )
    if kind == "sqlite":
        if not uri.startswith("sqlite:///") or uri == "sqlite:///":
            raise SweepError(
                f"tracking.uri={uri} names no sqlite file (an in-memory store would lose every "
                f"run): write sqlite:///RELATIVE/PATH or sqlite:////ABSOLUTE/PATH. {fix}"
            )
        return
    if kind in DATABASES:
        return
    if kind in SERVERS:
        if not uri.partition("://")[2].strip("/"):
            raise SweepError(f"tracking.uri={uri} names no server host. {fix}")
        return
    if kind == "":
        raise SweepError(
            f"tracking.uri={uri} is a path, not a URI: a sqlite store is "
            f"tracking.uri=sqlite:///{uri} (three slashes, then the path). {fix}"
        )
    if kind == "file":
        raise SweepError(
            f"tracking.uri={uri} is MLflow's file store, which sweeper does not write into "
            f"(its sweep tables, locks and batches need a database or a server). {fix}"
        )
    raise SweepError(f"tracking.uri={uri}: '{kind}' is not a kind of MLflow store. {fix}")


def check_database(uri: str, database: Any) -> None:
    """``tracking.database`` is the SQL database behind a tracking server; with a database
    ``tracking.uri`` (sqlite, PostgreSQL, ...) it must be that database or null, or the runs
    would go into another store under this one's experiment id."""
    if database is None or database == "":
        return
    database = str(database)
    check_uri(database)
    if scheme(database) not in DATABASES:
        raise SweepError(
            f"tracking.database={database} is not a SQL database: it is the "
            "--backend-store-uri of the tracking server at tracking.uri "
            "(sqlite:///PATH or postgresql+psycopg://USER@HOST/DB), or null"
        )
    if scheme(uri) in DATABASES and not same_database(uri, database):
        raise SweepError(
            f"tracking.database={database} is not the tracking store's own database "
            f"(tracking.uri={uri} is a database itself, and its runs are written into it): "
            "runs would go into another store under this store's experiment id. Remove "
            "tracking.database (null), or set tracking.uri to the store you mean"
        )


def same_database(a: str, b: str) -> bool:
    """Whether two SQLAlchemy URIs name one database (drivers and passwords aside; a sqlite
    file by its resolved path)."""
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError

    try:
        x, y = make_url(a), make_url(b)
    except (ArgumentError, ValueError):  # a malformed URI (or port) is another database
        return a == b
    if x.get_backend_name() != y.get_backend_name():
        return False
    if x.get_backend_name() == "sqlite":
        return (
            bool(x.database and y.database)
            and Path(x.database).resolve() == Path(y.database).resolve()
        )
    return (x.host, x.port, x.database, x.username) == (y.host, y.port, y.database, y.username)


def experiment_name(name: Any) -> str:
    """The MLflow experiment's name: not empty, not null, at most :data:`MAX_NAME`
    characters, and never a path that leaves the artifact root (``..``, a leading ``/``)."""
    fix = "set experiment.name=NAME (letters, digits, '_', '-', '.')"
    if name is None or not str(name).strip():
        raise SweepError(f"experiment.name is {'null' if name is None else 'empty'}: {fix}")
    text = str(name)
    if len(text) > MAX_NAME:
        raise SweepError(
            f"experiment.name is {len(text)} characters long, more than {MAX_NAME} (it names "
            f"a directory of the artifact store): {fix}"
        )
    parts = text.replace("\\", "/").split("/")
    if text.startswith(("/", "\\")) or any(p in (".", "..") for p in parts) or "\x00" in text:
        raise SweepError(
            f"experiment.name={text!r} is a path out of the artifact store (its artifacts "
            f"would land outside it): {fix}"
        )
    if any(len(p.encode()) > 255 for p in parts):
        raise SweepError(f"experiment.name={text!r} cannot name a directory: {fix}")
    return text
