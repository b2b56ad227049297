"""The sweep's own settings (``rerun``, ``experiment``, ``tracking``), checked before anything
runs (docs/faults.md, "Bad input"): what their types (sweeper/schema.py, checked while Hydra
composes the config) cannot say, such as ranges, a URI's kind, a name's characters and the
relations between settings.

Each mistake is one paragraph naming the setting and the fix (:class:`SweepError`, exit
status 2), raised before the store is opened, Ray started or a parent run created, so a
bad setting leaves nothing behind (nothing RUNNING, no lock file, no directory).
"""

from __future__ import annotations

import string
import sys
import unicodedata
from pathlib import Path
from typing import Any

from omegaconf import DictConfig
from omegaconf.errors import OmegaConfBaseException

from sweeper import schema
from sweeper.errors import SweepError, at_least
from sweeper.uri import redact, scheme

MAX_NAME = 200
"""The longest experiment name: it is a directory of the artifact root (255 bytes at most on
most file systems) and a column of 256 characters in MLflow's database."""
MAX_CELLS = 100_000
"""The default of ``sweep.max_cells`` (bench/bench_scale.py measured up to 50,000 cells)."""
NAME_CHARACTERS = frozenset(string.ascii_letters + string.digits + " _-./+=@,:")
"""The characters of an experiment name: ASCII letters, digits and a few marks (no quote,
no control character, no letter outside ASCII)."""
DATABASES = ("sqlite", "postgresql", "mysql", "mssql")
"""The SQL databases MLflow stores runs in (a ``tracking.uri`` of these is its own database)."""
SERVERS = ("http", "https")


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
    """``rerun`` (a boolean by its type: ``rerun=no`` is false)."""
    return bool(cfg.get("rerun"))


def check(cfg: DictConfig, uri: str) -> None:
    """Refuse a sweep setting that cannot work (see the module docstring); a password in a
    URI never appears in the message."""
    try:
        _check(cfg, uri)
    except SweepError as err:
        raise SweepError(redact(str(err))) from None


def _check(cfg: DictConfig, uri: str) -> None:
    schema.check(cfg)
    experiment_name(cfg.experiment.get("name"))
    check_tracking(cfg.tracking)
    limit = max_cells(cfg)
    seeds = cfg.get("seeds")
    if isinstance(seeds, int) and not isinstance(seeds, bool) and seeds > limit:
        raise too_many(f"seeds={seeds} alone makes {seeds:,} cells", limit)
    check_uri(uri)
    check_driver(uri, "tracking.uri")
    check_database(uri, cfg.tracking.get("database"))
    if cfg.tracking.get("database"):
        check_driver(str(cfg.tracking.database), "tracking.database")


def check_tracking(tracking: Any) -> None:
    """The ranges of the ``tracking`` settings, before the store is opened (a refused
    setting leaves no store and no lock file behind)."""
    for key, minimum in (("batch_size", 1), ("log_threads", 1)):
        if tracking.get(key) is not None:
            at_least(tracking[key], f"tracking.{key}", minimum)
    for key in ("batch_s", "patience_s"):
        if not tracking.get(key, 1.0) > 0:
            raise SweepError(
                f"tracking.{key} must be a positive number of seconds, got {tracking.get(key)!r}"
            )


def max_cells(cfg: DictConfig) -> int:
    """``sweep.max_cells``: the most cells a sweep may have (a typo such as ``seeds=10000000``
    would otherwise expand for minutes and gigabytes before anything is said)."""
    sweep = cfg.get("sweep") or {}
    return int(at_least(sweep.get("max_cells", MAX_CELLS), "sweep.max_cells", 1))


def too_many(what: str, limit: int) -> SweepError:
    return SweepError(
        f"{what}, more than sweep.max_cells={limit:,}. If you mean it, raise the limit "
        f"(sweep.max_cells=N); else fix seeds or sweep.grid"
    )


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


PACKAGES = {"MySQLdb": "mysqlclient", "psycopg2": "psycopg2-binary", "psycopg": "psycopg[binary]"}
"""The pip name of a database driver's module, where it is not the module's own name."""


def check_driver(uri: str, key: str) -> None:
    """A database URI whose SQLAlchemy driver is installed (``mysql://`` needs MySQLdb,
    ``postgresql+pg8000://`` pg8000): else one paragraph naming what to install, before the
    store is opened (MLflow would fail with an ImportError traceback)."""
    kind = scheme(uri)
    if kind not in DATABASES or kind == "sqlite":
        return
    from sqlalchemy.engine import make_url
    from sqlalchemy.exc import ArgumentError, NoSuchModuleError

    try:
        make_url(uri).get_dialect().import_dbapi()
    except (ArgumentError, ValueError) as err:
        raise SweepError(f"{key}={uri} is not a database URI SQLAlchemy reads: {err}") from None
    except NoSuchModuleError:
        raise SweepError(
            f"{key}={uri}: SQLAlchemy has no driver '{uri.partition('://')[0]}'. Write "
            "DATABASE+DRIVER://..., e.g. postgresql+psycopg://USER@HOST/DB"
        ) from None
    except ImportError as err:
        module = (err.name or "").split(".")[0]
        package = PACKAGES.get(module, module)
        raise SweepError(
            f"{key}={uri} needs the database driver '{module}', which is not installed in "
            f"{sys.prefix}: pip install '{package}', or name an installed driver (for "
            "PostgreSQL, pip install 'sweeper[postgres]' and postgresql+psycopg://USER@HOST/DB)"
        ) from None


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


def _character(c: str) -> str:
    """``'é' (U+00E9 LATIN SMALL LETTER E WITH ACUTE)``: a character said so it can be seen."""
    return f"{c!r} (U+{ord(c):04X} {unicodedata.name(c, 'a control character')})"


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
    characters of :data:`NAME_CHARACTERS`, and never a path that leaves the artifact root
    (``..``, a leading ``/``)."""
    fix = "set experiment.name=NAME (letters, digits, '_', '-', '.')"
    if name is None or not str(name).strip():
        raise SweepError(f"experiment.name is {'null' if name is None else 'empty'}: {fix}")
    text = str(name)
    if len(text) > MAX_NAME:
        raise SweepError(
            f"experiment.name is {len(text)} characters long, more than {MAX_NAME} (it names "
            f"a directory of the artifact store): {fix}"
        )
    odd = next((c for c in text if c not in NAME_CHARACTERS), None)
    if odd is not None:
        raise SweepError(
            f"experiment.name={text!r} holds {_character(odd)}, which a name may not hold "
            "(it names a directory of the artifact store, a part of the UI's address and of "
            f"the resume command): {fix}; spaces and '/+=@,:' are allowed too"
        )
    if text.startswith("/") or any(p in (".", "..") for p in text.split("/")):
        raise SweepError(
            f"experiment.name={text!r} is a path out of the artifact store (its artifacts "
            f"would land outside it): {fix}"
        )
    return text
