"""Shared fixtures: Hydra composition of the real conf/, a temporary MLflow store, Ray."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hydra import compose, initialize_config_dir
from omegaconf import DictConfig

from sweeper.grid import CONF_DIR


@pytest.fixture
def composer() -> Iterator:
    """compose(overrides) over the project's conf/, as the CLI does."""
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):

        def _compose(overrides: list[str]) -> DictConfig:
            return compose(config_name="config", overrides=list(overrides))

        yield _compose


@pytest.fixture
def tracking_uri(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
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
