"""Every private MLflow name sweeper uses is found in the installed MLflow (issue #26,
item 3); a missing one is one paragraph naming it and the MLflow version, and the driver's
import touches none of them."""

from __future__ import annotations

import subprocess
import sys

import mlflow
import pytest

from sweeper.store import mlflow_private
from sweeper.store.bulk import COLUMNS, MODELS, check_columns


@pytest.mark.parametrize("name", sorted(mlflow_private.NAMES))
def test_each_private_name_is_in_this_mlflow(name):
    try:
        mlflow_private.get(name)
    except mlflow_private.MlflowChanged as err:
        pytest.fail(f"MLflow {mlflow.__version__}: {err}")


def test_the_store_class_keeps_its_cache_of_engines():
    store = mlflow_private.get("SqlAlchemyStore")
    assert isinstance(getattr(store, mlflow_private.ENGINE_MAP, None), dict), (
        f"MLflow {mlflow.__version__}: SqlAlchemyStore.{mlflow_private.ENGINE_MAP} is gone"
    )


def test_the_direct_writes_match_mlflows_tables():
    check_columns()
    assert set(MODELS) == set(COLUMNS)


def test_a_missing_name_says_which_mlflow_and_what_to_do(monkeypatch):
    monkeypatch.setitem(
        mlflow_private.NAMES,
        "SqlRun",
        ("mlflow.store.tracking.dbmodels.models", "Gone", "direct writes"),
    )
    with pytest.raises(mlflow_private.MlflowChanged) as raised:
        check_columns()
    message = str(raised.value)
    assert f"this MLflow ({mlflow.__version__}) has no mlflow.store" in message
    assert "tracking.direct_writes=false" in message and "\n" not in message


def test_the_driver_imports_no_private_mlflow_module():
    code = (
        "import sys, sweeper.sweep, sweeper.report.load\n"
        "print([m for m in sys.modules if 'dbmodels' in m or m.endswith('sqlalchemy_store')])"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"


def _store_at(tmp_path, revision_of):
    """A sqlite store holding one run whose schema revision is ``revision_of(head)``."""
    import shutil
    import sqlite3

    from mlflow import MlflowClient

    path = tmp_path / "old.db"
    MlflowClient(f"sqlite:///{path}").create_run("0")
    with sqlite3.connect(path) as db:
        head = db.execute("select version_num from alembic_version").fetchone()[0]
        db.execute("update alembic_version set version_num = ?", (revision_of(head),))
    copy = tmp_path / "store.db"  # a file this process never opened through MLflow
    shutil.copyfile(path, copy)
    return copy


def test_a_store_from_a_newer_mlflow_is_not_called_older(tmp_path):
    from sweeper.store.lock import StoreDamaged, prepare_sqlite_store

    path = _store_at(tmp_path, lambda head: "ffffffffffff")
    with pytest.raises(StoreDamaged, match=r"made by a newer MLflow than this one") as raised:
        prepare_sqlite_store(path, settle_s=0.1)
    assert "cannot take a schema back" in str(raised.value)


def test_a_store_from_an_older_mlflow_is_told_to_upgrade(tmp_path):
    from alembic.script import ScriptDirectory

    from sweeper.store.lock import StoreDamaged, prepare_sqlite_store

    config = mlflow_private.get("alembic_config")(db_url="")
    script = ScriptDirectory.from_config(config)
    path = _store_at(tmp_path, lambda head: script.get_revision(head).down_revision)
    with pytest.raises(StoreDamaged, match=r"older than this MLflow's .*`mlflow db upgrade"):
        prepare_sqlite_store(path, settle_s=0.1)
