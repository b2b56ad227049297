"""Shared fixtures: Hydra composition of the real conf/, a temporary MLflow store, Ray; and a
test session that does not depend on the shell it runs in (:func:`pytest_configure`)."""

from __future__ import annotations

import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from sweeper import command
from sweeper.paths import CONF_DIR
from sweeper.store.parent import SweepRun

SHELL_PREFIXES = ("MLFLOW_", "RAY_")
"""Variables a researcher's shell sets for MLflow and Ray (``MLFLOW_TRACKING_URI``,
``MLFLOW_EXPERIMENT_NAME``, ``MLFLOW_RUN_ID``, ``RAY_ADDRESS``, ``RAY_AUTH_MODE``, ...)."""
SHELL_VARIABLES = ("SWEEPER_DATA_DIR", "PYTHONPATH", "HYDRA_FULL_ERROR")
"""And the tool's, Python's and Hydra's own (a data directory, a research repository on the
path, tracebacks instead of the one-paragraph errors the tests read)."""


def pytest_configure(config: pytest.Config) -> None:  # noqa: ARG001 - pytest's hook
    """Make the session hermetic (issue #37, item 3): the variables of
    :data:`SHELL_PREFIXES` and :data:`SHELL_VARIABLES` are removed from this process's
    environment, which every subprocess of a test inherits, and ``$PYTHONPATH``'s entries from
    ``sys.path``; a test that needs one sets it itself. ``make test`` runs the suite
    (tests/hermetic.py) with each set to a hostile value, from a directory holding a
    ``tasks.py`` and a ``tasks/`` package."""
    path = os.environ.get("PYTHONPATH", "")
    for name in [n for n in os.environ if n.startswith(SHELL_PREFIXES) or n in SHELL_VARIABLES]:
        del os.environ[name]
    entries = {os.path.abspath(p) for p in path.split(os.pathsep) if p}
    sys.path[:] = [p for p in sys.path if not p or os.path.abspath(p) not in entries]


@pytest.fixture(autouse=True)
def _no_recorded_command() -> Iterator[None]:
    """A command line run in this process (``sweeper.__main__.entry``) records pytest's own
    argv as the sweep's command; the sweeps of later tests must not repeat it."""
    yield
    command.forget()


@pytest.fixture
def composer() -> Iterator:
    """compose(overrides) over the project's conf/, as the CLI does."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):

        def _compose(overrides: list[str]) -> DictConfig:
            return compose(config_name="config", overrides=list(overrides))

        yield _compose


@pytest.fixture(scope="session")
def _empty_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow sqlite store with its tables created (seconds of migrations), made once."""
    from mlflow import MlflowClient

    path = tmp_path_factory.mktemp("store") / "mlflow.db"
    MlflowClient(f"sqlite:///{path}").search_experiments()
    return path


@pytest.fixture
def tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, _empty_store: Path) -> str:
    """A fresh, empty MLflow store for one test (a copy of the session's empty store)."""
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    shutil.copyfile(_empty_store, tmp_path / "mlflow.db")
    return f"sqlite:///{tmp_path}/mlflow.db"


@pytest.fixture(scope="session")
def ray_local() -> Iterator[None]:
    """One embedded Ray instance for the session (never a stale cluster on disk)."""
    import ray

    if not ray.is_initialized():
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    os.environ.pop("RAY_ADDRESS", None)
    yield
    ray.shutdown()


@pytest.fixture(scope="session")
def ray_address(ray_local) -> str:
    """The session's Ray instance, for a sweep driven from a subprocess to join by address."""
    import ray

    return ray.get_runtime_context().gcs_address


@pytest.fixture
def replace_table():
    """``replace_table(tracker, parent, rows)``: make a (local) sweep table hold exactly
    ``rows``, as a driver killed before its last table part leaves it."""

    def replace(tracker, parent: str, rows) -> None:
        local = tracker.artifact_dir(parent)
        (local / "cells.parquet").unlink(missing_ok=True)
        shutil.rmtree(local / "cells", ignore_errors=True)
        SweepRun(tracker, parent).append(rows)

    return replace
