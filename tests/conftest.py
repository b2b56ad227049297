"""Shared fixtures: Hydra composition of the real conf/, a temporary MLflow store, Ray."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from sweeper.paths import CONF_DIR
from sweeper.store.parent import SweepRun


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
