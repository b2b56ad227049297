"""A sweep into an MLflow tracking server backed by PostgreSQL, the way teams run MLflow
(sweeper/servers.py starts PostgreSQL 15 and the server on 127.0.0.1). Slow: PostgreSQL's
initdb and the server's start take about half a minute here."""

from __future__ import annotations

import io
import os
import signal
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path
from urllib.parse import urlparse

import pytest
from mlflow import MlflowClient

from sweeper.servers import mlflow_server, postgres
from sweeper.sweep import run_sweep

pytestmark = pytest.mark.slow


def test_a_sweep_into_a_postgresql_backed_server_records_each_cell_once_and_resumes(
    composer, tmp_path, ray_local
):
    with (
        tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg,  # reachable by postgres
        postgres(Path(pg)) as backend,
        mlflow_server(backend, tmp_path / "art") as uri,
    ):
        overrides = ["task=toy", "horizon=200", "seeds=12", f"tracking.uri={uri}",
                     "experiment.name=pg"]  # fmt: skip
        first = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
        again = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
        client = MlflowClient(uri)
        runs = client.search_runs([client.get_experiment_by_name("pg").experiment_id])
    cells = [r for r in runs if "cell_key" in r.data.tags]
    assert first.finished == 12 and again.skipped == 12 and again.finished == 0
    assert Counter(r.info.status for r in cells) == {"FINISHED": 12}
    assert len({r.data.tags["cell_key"] for r in cells}) == 12
    assert {len(r.data.metrics) > 2 for r in cells} == {True}  # summary and curve logged


def _connects(uri: str, **connect_args) -> str:
    """``ok``, or the reason PostgreSQL gave for refusing the connection."""
    import sqlalchemy as sa

    engine = sa.create_engine(uri, connect_args=connect_args)
    try:
        with engine.connect() as connection:
            connection.execute(sa.text("select 1"))
        return "ok"
    except sa.exc.OperationalError as err:
        return str(err.orig)
    finally:
        engine.dispose()


def test_the_database_lets_in_only_who_holds_its_password():
    """Issue #27, item 4: the cluster was initialised with trust authentication, so any local
    process (a cell on the head included) was a superuser. Now its role has a password,
    kept 0600 beside the data, asked over TCP and over the socket alike."""
    import stat

    from sweeper.servers import pg_passfile, pg_password, without_password

    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg, postgres(Path(pg)) as uri:
        bare, password = without_password(uri)
        port = urlparse(uri).port
        socket = f"postgresql+psycopg://postgres@/mlflow?host={pg}/pgdata&port={port}"
        assert password == pg_password(Path(pg)) and password not in bare
        assert stat.S_IMODE(pg_passfile(Path(pg)).stat().st_mode) == 0o600
        assert _connects(uri) == "ok"
        assert _connects(bare, passfile=str(pg_passfile(Path(pg)))) == "ok"
        assert "no password supplied" in _connects(bare)
        assert "no password supplied" in _connects(socket)
        wrong = uri.replace(password, "guess")
        assert "password authentication failed" in _connects(wrong)


def test_a_real_server_s_failures_are_judged_by_their_codes_not_their_words():
    """sweeper/store/failures.py against a real PostgreSQL: a session cut by a shutdown
    (SQLSTATE 57P01) and a connection to the stopped server (no SQLSTATE) are waited for, a
    wrong password (asked and refused) is not; no word of a message is read."""
    import sqlalchemy as sa

    from sweeper.servers import pg_stop, without_password
    from sweeper.store.failures import transient

    def failure(uri: str, *statements: str) -> BaseException:
        engine = sa.create_engine(uri)
        try:
            with engine.connect() as connection:
                for statement in statements:
                    connection.execute(sa.text(statement))
        except sa.exc.SQLAlchemyError as err:
            return err
        finally:
            engine.dispose()
        raise AssertionError("no failure")

    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg, postgres(Path(pg)) as uri:
        wrong = failure(uri.replace(without_password(uri)[1], "guess"))
        assert not transient(wrong), wrong
        engine = sa.create_engine(uri)
        with engine.connect() as connection:
            pg_stop(Path(pg))
            with pytest.raises(sa.exc.SQLAlchemyError) as cut:
                connection.execute(sa.text("select 1"))
        engine.dispose()
        assert getattr(cut.value.orig, "sqlstate", None) in ("57P01", None)
        assert transient(cut.value), cut.value
        assert transient(failure(uri)), "the stopped server"


def test_a_cluster_made_with_trust_authentication_requires_a_password_once_started():
    """A data directory an older sweeper initialised with --auth=trust keeps its runs and
    loses trust the next time it is started."""
    from sweeper.servers import _as_postgres, _reachable_by_postgres, pg_bin, without_password

    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg:
        if os.geteuid() == 0:
            _reachable_by_postgres(Path(pg))
        initdb = [str(pg_bin() / "initdb"), "-D", f"{pg}/pgdata", "-U", "postgres",
                  "--auth=trust", "--no-sync"]  # fmt: skip
        subprocess.run(_as_postgres(initdb), check=True, capture_output=True)
        with postgres(Path(pg)) as uri:
            assert _connects(uri) == "ok"
            assert "no password supplied" in _connects(without_password(uri)[0])


def test_the_tracking_server_command_prints_no_password_and_its_settings_work(
    tmp_path, monkeypatch
):
    """`make tracking-server` (python -m sweeper.servers --postgres): the settings it prints
    reach the database with PGPASSFILE, the password is in neither its output nor any
    process's command line (the mlflow server's included), and SIGTERM stops it. Its
    MLflow credentials (basic auth) go into this test's own $HOME/.mlflow."""
    from mlflow import MlflowClient

    from sweeper.server_auth import read_credentials
    from sweeper.servers import pg_password

    env = {**os.environ, "HOME": str(tmp_path)}
    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as pg:
        server = subprocess.Popen(
            [sys.executable, "-m", "sweeper.servers", "--postgres", "--dir", pg],
            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True,
            env=env,
        )  # fmt: skip
        try:
            printed = [server.stdout.readline(), server.stdout.readline()]
            settings = dict(
                word.split("=", 1) for word in printed[1].split() if word.count("=") == 1
            )
            password = pg_password(Path(pg))
            lines = _command_lines()
            assert any("mlflow server" in line or "mlflow.server" in line for line in lines)
            assert not [line for line in lines if password in line]
            assert password not in "".join(printed), printed
            assert settings["PGPASSFILE"] == f"{Path(pg).resolve()}/pgpass"
            database = settings["tracking.database"]
            assert "no password supplied" in _connects(database)
            assert _connects(database, passfile=settings["PGPASSFILE"]) == "ok"
            user, secret = read_credentials(tmp_path / ".mlflow" / "credentials")
            monkeypatch.setenv("MLFLOW_TRACKING_USERNAME", user)
            monkeypatch.setenv("MLFLOW_TRACKING_PASSWORD", secret)
            client = MlflowClient(settings["tracking.uri"])  # the server reaches the database
            assert client.get_experiment(client.create_experiment("reached")).name == "reached"
        finally:
            server.send_signal(signal.SIGTERM)
            assert server.wait(timeout=60) == 0


def _command_lines() -> list[str]:
    """The command line of every process on this machine (what any local user can read)."""
    lines = []
    for proc in Path("/proc").glob("[0-9]*"):
        try:
            lines.append((proc / "cmdline").read_bytes().replace(b"\0", b" ").decode())
        except OSError:  # ended meanwhile
            continue
    return lines
