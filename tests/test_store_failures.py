"""Which store failures are waited for (sweeper/store/failures.py): judged by the exception's
class, PostgreSQL's SQLSTATE, SQLite's result code and the HTTP status, never by the words
of the message (PostgreSQL translates them). The errors are the real objects the libraries
raise, provoked where that is cheap (a locked sqlite file, a port nobody listens on, a
server answering 503), else built as the driver builds them."""

from __future__ import annotations

import errno
import sqlite3
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import psycopg
import psycopg.errors
import pytest
import requests
import sqlalchemy as sa
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import TEMPORARILY_UNAVAILABLE

from sweeper.store.failures import transient


def _raised(action) -> BaseException:
    with pytest.raises(Exception) as caught:
        action()
    return caught.value


def _as_mlflow_wraps(err: BaseException) -> MlflowException:
    """What MLflow's SQLAlchemy store raises for a database error (mlflow/store/db/utils.py:
    every OperationalError as TEMPORARILY_UNAVAILABLE, HTTP 503, whatever its cause)."""
    try:
        raise MlflowException(message=str(err), error_code=TEMPORARILY_UNAVAILABLE) from err
    except MlflowException as wrapped:
        return wrapped


def _through_sqlalchemy(orig: BaseException) -> sa.exc.OperationalError:
    return sa.exc.OperationalError("insert into runs ...", {}, orig)


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


# --- SQLite -----------------------------------------------------------------------------
@pytest.fixture
def locked_sqlite(tmp_path) -> Iterator[str]:
    """A sqlite file another connection holds an exclusive lock on."""
    path = tmp_path / "locked.db"
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("create table t (x)")
    holder.execute("begin exclusive")
    yield f"sqlite:///{path}"
    holder.close()


def test_a_locked_sqlite_file_is_waited_for_through_sqlalchemy_and_mlflow(locked_sqlite):
    engine = sa.create_engine(locked_sqlite, connect_args={"timeout": 0})
    with engine.connect() as connection:
        err = _raised(lambda: connection.execute(sa.text("select * from t")))
    engine.dispose()
    assert isinstance(err, sa.exc.OperationalError)
    assert err.orig.sqlite_errorcode == sqlite3.SQLITE_BUSY
    assert transient(err.orig) and transient(err) and transient(_as_mlflow_wraps(err))


def test_a_missing_table_is_not_waited_for_though_mlflow_calls_it_unavailable(tmp_path):
    engine = sa.create_engine(f"sqlite:///{tmp_path}/empty.db")
    with engine.connect() as connection:
        err = _raised(lambda: connection.execute(sa.text("select * from runs")))
    engine.dispose()
    wrapped = _as_mlflow_wraps(err)
    assert wrapped.get_http_status_code() == 503  # what its error code alone would say
    assert not transient(err) and not transient(wrapped)


def test_a_sqlite_error_without_its_code_is_not_guessed_from_its_words():
    assert not transient(sqlite3.OperationalError("database is locked"))


# --- PostgreSQL -------------------------------------------------------------------------
@pytest.mark.parametrize(
    "sqlstate",
    ["08006", "08001", "57P01", "57P02", "57P03", "53300", "53200", "40001", "40P01"],
)
def test_the_sqlstates_of_a_restarting_or_busy_database_are_waited_for(sqlstate):
    err = psycopg.errors.lookup(sqlstate)("le système de bases de données s'arrête")
    assert err.sqlstate == sqlstate
    assert transient(err) and transient(_as_mlflow_wraps(_through_sqlalchemy(err)))


@pytest.mark.parametrize("sqlstate", ["53100", "42P01", "28P01", "3D000", "23505", "42501"])
def test_a_full_disk_a_bad_schema_or_a_refusal_is_not_waited_for(sqlstate):
    """Disk full, undefined table, wrong password, no such database, a duplicate key, no
    privilege: the words say "connection" or not, no restart changes them."""
    err = psycopg.errors.lookup(sqlstate)("could not connect: connection lost")
    assert not transient(err) and not transient(_as_mlflow_wraps(_through_sqlalchemy(err)))


def test_a_database_nobody_listens_on_is_waited_for():
    """A real connection attempt to a stopped server: psycopg's OperationalError without a
    SQLSTATE (libpq gives none), through SQLAlchemy as the bulk writer meets it."""
    uri = f"postgresql+psycopg://nobody@127.0.0.1:{_free_port()}/mlflow?connect_timeout=5"
    engine = sa.create_engine(uri)
    err = _raised(engine.connect)
    engine.dispose()
    assert isinstance(err, sa.exc.OperationalError) and err.orig.sqlstate is None
    assert transient(err) and transient(_as_mlflow_wraps(err))


def test_a_connection_the_server_refused_after_asking_a_password_is_not_waited_for():
    """The server asked for a password (none was given, or it refused the one given): it
    is up, and says no whatever the language of its message."""
    finished = psycopg.errors.FinishedPGconn
    lost = psycopg.OperationalError("consuming input failed")
    assert transient(lost)
    for attempt in (finished(needs_password=True), finished(used_password=True)):
        refused = psycopg.OperationalError("connection failed: FATAL: ...", pgconn=attempt)
        assert not transient(refused) and not transient(_through_sqlalchemy(refused))
    starting = psycopg.OperationalError("connection failed: FATAL: ...", pgconn=finished())
    assert transient(starting)


def test_a_connection_sqlalchemy_saw_drop_is_waited_for():
    err = sa.exc.OperationalError("select 1", {}, RuntimeError("?"), connection_invalidated=True)
    assert transient(err)
    assert not transient(sa.exc.OperationalError("select 1", {}, RuntimeError("?")))


# --- a tracking server ------------------------------------------------------------------
@pytest.fixture
def answering(monkeypatch) -> Iterator:
    """``answering(status, body)``: the URI of a server that answers every request so."""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    servers = []

    def serve(status: int, body: bytes = b"") -> str:
        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_GET = do_POST = _answer

            def log_message(self, *args) -> None:
                pass

        server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=server.serve_forever, args=(0.05,), daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield serve
    for server in servers:
        server.shutdown()
        server.server_close()


def _ask(uri: str) -> BaseException:
    return _raised(lambda: MlflowClient(uri).get_experiment("1"))


@pytest.mark.parametrize("status", [502, 503, 504, 429])
def test_a_server_restarting_behind_a_proxy_or_overloaded_is_waited_for(answering, status):
    err = _ask(answering(status))
    assert isinstance(err, MlflowException) and transient(err)


@pytest.mark.parametrize(
    ("status", "body"),
    [(500, b"Internal Server Error"), (404, b'{"error_code": "RESOURCE_DOES_NOT_EXIST"}')],
)
def test_a_server_that_fails_or_refuses_a_request_is_not_waited_for(answering, status, body):
    assert not transient(_ask(answering(status, body)))


def test_a_tracking_server_nobody_listens_on_is_waited_for(monkeypatch):
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")
    err = _ask(f"http://127.0.0.1:{_free_port()}")
    assert isinstance(err, MlflowException) and transient(err)


def test_an_artifact_upload_is_judged_by_its_status_and_a_certificate_never_waited_for():
    answer = requests.Response()
    answer.status_code = 503
    assert transient(requests.HTTPError("503 Server Error", response=answer))
    answer.status_code = 403
    assert not transient(requests.HTTPError("403 Forbidden", response=answer))
    assert not transient(requests.exceptions.SSLError("certificate verify failed"))


def test_python_s_connection_errors_are_waited_for_a_full_local_disk_is_not():
    assert transient(ConnectionRefusedError(errno.ECONNREFUSED, "Connection refused"))
    assert transient(ConnectionResetError(errno.ECONNRESET, "Connection reset by peer"))
    assert not transient(OSError(errno.ENOSPC, "No space left on device"))
