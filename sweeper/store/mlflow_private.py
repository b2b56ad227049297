"""MLflow's private names sweeper relies on, in one place, looked up only when used
(issue #26, item 3).

Writing runs straight into MLflow's tables (:mod:`sweeper.store.bulk`) needs MLflow's table
definitions and its schema check; creating a sqlite store whole (:mod:`sweeper.store.lock`) needs
its schema revision and its store class. None of these is MLflow's public API, so a
release may rename one: then :func:`get` says which name, which MLflow and what to do, in
one paragraph, instead of ``python -m sweeper`` failing at import (``tracking.direct_writes
=false`` never looks up the names of direct writes). tests/test_mlflow_private.py checks
every name against the installed MLflow.
"""

from __future__ import annotations

import importlib
from typing import Any

from sweeper.errors import SweepError

TESTED = "3.17.2"
"""The MLflow version these names were checked against (tests/test_mlflow_private.py)."""

MODELS = "mlflow.store.tracking.dbmodels.models"
NAMES: dict[str, tuple[str, str, str]] = {
    "verify_schema": ("mlflow.store.db.utils", "_verify_schema", "direct writes"),
    "latest_revision": ("mlflow.store.db.utils", "_get_latest_schema_revision", "store creation"),
    "alembic_config": ("mlflow.store.db.utils", "_get_alembic_config", "store creation"),
    "Base": ("mlflow.store.db.base_sql_model", "Base", "store creation"),
    "SqlAlchemyStore": (
        "mlflow.store.tracking.sqlalchemy_store",
        "SqlAlchemyStore",
        "store creation",
    ),
    "default_artifacts": (
        "mlflow.tracking._tracking_service.utils",
        "DEFAULT_LOCAL_FILE_AND_ARTIFACT_PATH",
        "store creation",
    ),
    "validate_metric": ("mlflow.utils.validation", "_validate_metric", "direct writes"),
    "validate_param_name": ("mlflow.utils.validation", "_validate_param_name", "direct writes"),
    "SqlRun": (MODELS, "SqlRun", "direct writes"),
    "SqlTag": (MODELS, "SqlTag", "direct writes"),
    "SqlParam": (MODELS, "SqlParam", "direct writes"),
    "SqlMetric": (MODELS, "SqlMetric", "direct writes"),
    "SqlLatestMetric": (
        "mlflow.store.tracking.dbmodels.models",
        "SqlLatestMetric",
        "direct writes",
    ),
}
"""name -> (module, attribute, what sweeper uses it for)."""
ENGINE_MAP = "_engine_map"
"""``SqlAlchemyStore``'s cache of engines per URI (closed when a store file is replaced)."""


class MlflowChanged(SweepError):
    """This MLflow lacks a private name sweeper uses: said in one paragraph (exit 2)."""


def get(name: str) -> Any:
    """The private MLflow object ``name`` of :data:`NAMES`, or :class:`MlflowChanged`."""
    module, attribute, use = NAMES[name]
    try:
        return getattr(importlib.import_module(module), attribute)
    except (ImportError, AttributeError):
        raise MlflowChanged(missing(f"{module}.{attribute}", use)) from None


def engine_map() -> dict:
    """``SqlAlchemyStore._engine_map`` ({} when this MLflow has no such cache)."""
    return getattr(get("SqlAlchemyStore"), ENGINE_MAP, {})


def missing(what: str, use: str) -> str:
    import mlflow

    remedy = (
        "set tracking.direct_writes=false (runs through MLflow's API)"
        if use == "direct writes"
        else "create the store with this MLflow's own tools (mlflow db upgrade)"
    )
    return (
        f"this MLflow ({mlflow.__version__}) has no {what}, which sweeper's {use} use; "
        f"sweeper was checked against MLflow {TESTED}. Install it (pip install "
        f"'mlflow=={TESTED}'), or {remedy}"
    )
