"""Tracking servers on this machine, as teams run them: an ``mlflow server`` whose backend
store is a sqlite file or a PostgreSQL database, listening on 127.0.0.1 only.

For tests, benches (``bench/bench_scale.py``) and trying the cluster setup on one machine::

    python -m sweeper.servers --postgres --dir /tmp/tracking   # prints the URI; Ctrl-C stops

PostgreSQL is Debian's ``postgresql-15`` package (its server binaries live outside PATH,
under ``/usr/lib/postgresql/<version>/bin``; ``$PG_BIN`` names another directory). Run as
root, the cluster is initialised and run as the ``postgres`` user, as PostgreSQL requires.
Everything started here is stopped by its process id (the server's whole process group),
also when the caller fails.
"""

from __future__ import annotations

import argparse
import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

START_TIMEOUT_S = 180.0


class ServerError(RuntimeError):
    """A server that could not be started, with what to do."""


def free_port() -> int:
    """A TCP port on 127.0.0.1 nobody listens on now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def pg_bin() -> Path:
    """The directory of PostgreSQL's ``initdb`` and ``pg_ctl``."""
    candidates = [os.environ.get("PG_BIN", "")] + sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), reverse=True
    )
    for directory in candidates:
        if directory and (Path(directory) / "pg_ctl").exists():
            return Path(directory)
    if shutil.which("pg_ctl"):
        return Path(shutil.which("pg_ctl")).parent
    raise ServerError(
        "PostgreSQL's server binaries were not found: install Debian's postgresql package "
        "(apt-get install postgresql-15) or set $PG_BIN to the directory of pg_ctl"
    )


def _as_postgres(command: list[str]) -> list[str]:
    """Run as the ``postgres`` user when we are root (PostgreSQL refuses to run as root)."""
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", "postgres", "--", *command]


def _run(command: list[str], what: str) -> None:
    done = subprocess.run(command, capture_output=True, text=True)
    if done.returncode != 0:
        raise ServerError(f"{what} failed: {(done.stderr or done.stdout).strip()[-800:]}")


def _reachable_by_postgres(directory: Path) -> None:
    """Run as root, PostgreSQL runs as ``postgres``: give it ``directory`` and check that
    it can reach it (a private temporary directory's parents may not let it)."""
    user = pwd.getpwnam("postgres")
    directory.chmod(0o755)
    os.chown(directory, user.pw_uid, user.pw_gid)
    for parent in directory.parents:
        if not parent.stat().st_mode & 0o001:
            raise ServerError(
                f"PostgreSQL runs as the postgres user, which cannot enter {parent}: put its "
                "directory where every user can reach it (e.g. under /tmp)"
            )


def pg_start(directory: Path, port: int) -> str:
    """Start (initialising it the first time) the PostgreSQL cluster in ``directory/pgdata``
    on 127.0.0.1:``port`` with a database ``mlflow``; its SQLAlchemy URI. Started again on
    the same directory, it keeps its data (a restart, as in a fault test)."""
    binaries = pg_bin()
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        _reachable_by_postgres(directory)
    data = directory / "pgdata"
    if not (data / "PG_VERSION").exists():
        _run(_as_postgres([str(binaries / "initdb"), "-D", str(data), "-U", "postgres",
                           "--auth=trust", "--no-sync"]), "initdb")  # fmt: skip
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {data} -c fsync=off"
    _run(_as_postgres([*_pg_ctl(directory), "-o", options, "-w", "start"]), "pg_ctl start")
    createdb = [str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U",
                "postgres", "mlflow"]  # fmt: skip
    subprocess.run(_as_postgres(createdb), capture_output=True)  # exists after a restart
    return f"postgresql+psycopg://postgres@127.0.0.1:{port}/mlflow"


def pg_stop(directory: Path) -> None:
    """Stop the cluster in ``directory/pgdata`` (fast shutdown: open connections are cut)."""
    stop_ = [*_pg_ctl(Path(directory).resolve()), "-m", "fast", "-w", "stop"]
    subprocess.run(_as_postgres(stop_), capture_output=True)


def pg_restart(directory: Path, database: str, down_s: float = 3.0) -> None:
    """Stop the cluster in ``directory/pgdata`` and start it again ``down_s`` seconds later
    on the port of its URI ``database`` (a fault test's restart)."""
    pg_stop(directory)
    time.sleep(down_s)
    pg_start(directory, int(database.rsplit(":", 1)[1].split("/")[0]))


def _pg_ctl(directory: Path) -> list[str]:
    data = directory / "pgdata"
    return [str(pg_bin() / "pg_ctl"), "-D", str(data), "-l", str(directory / "postgres.log")]


@contextmanager
def postgres(directory: Path, port: int | None = None) -> Iterator[str]:
    """A PostgreSQL cluster (:func:`pg_start`) for the ``with`` block; yields its URI
    (``postgresql+psycopg://postgres@127.0.0.1:PORT/mlflow``)."""
    uri = pg_start(directory, port or free_port())
    try:
        yield uri
    finally:
        pg_stop(directory)


def finished_runs(database: str) -> int:
    """FINISHED runs in an MLflow database, read straight from it (0 while it is down): how
    a fault test or bench follows a sweep while its server may be away."""
    import sqlalchemy as sa

    engine = sa.create_engine(database)
    try:
        with engine.connect() as connection:
            query = "select count(*) from runs where status = 'FINISHED'"
            return int(connection.execute(sa.text(query)).scalar())
    except sa.exc.SQLAlchemyError:
        return 0
    finally:
        engine.dispose()


def wait_until_healthy(uri: str, process: subprocess.Popen, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            urllib.request.urlopen(f"{uri}/health", timeout=2)
            return
        except OSError:
            if process.poll() is not None:
                message = f"mlflow server exited with code {process.returncode}"
            elif time.monotonic() > deadline:
                message = f"mlflow server did not answer within {timeout_s:.0f} s"
            else:
                time.sleep(0.3)
                continue
        raise ServerError(message)


def start_mlflow_server(
    backend_uri: str, artifacts: Path, port: int | None = None, workers: int = 4
) -> tuple[subprocess.Popen, str]:
    """Start ``mlflow server`` on 127.0.0.1 (artifacts served through it); the process
    (leader of its own group) and its URI, once it answers."""
    port = port or free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers), "--backend-store-uri", backend_uri,
         "--artifacts-destination", str(artifacts)],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    uri = f"http://127.0.0.1:{port}"
    try:
        wait_until_healthy(uri, process, START_TIMEOUT_S)
    except BaseException:
        stop(process)
        raise
    return process, uri


def mlflow_restart(
    process: subprocess.Popen, backend_uri: str, artifacts: Path, port: int, down_s: float = 3.0
) -> subprocess.Popen:
    """Stop the server ``process`` and start it again ``down_s`` seconds later on the same
    port (a fault test's restart); the new process."""
    stop(process)
    time.sleep(down_s)
    return start_mlflow_server(backend_uri, artifacts, port=port)[0]


def stop(process: subprocess.Popen, timeout_s: float = 20) -> None:
    """Stop a server and its workers (its process group): SIGTERM, then SIGKILL."""
    if process.poll() is not None:
        return
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
    except ProcessLookupError:
        pass


@contextmanager
def mlflow_server(
    backend_uri: str, artifacts: Path, workers: int = 4, port: int | None = None
) -> Iterator[str]:
    """An ``mlflow server`` for the ``with`` block; yields its URI."""
    process, uri = start_mlflow_server(backend_uri, artifacts, port=port, workers=workers)
    try:
        yield uri
    finally:
        stop(process)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m sweeper.servers", description=__doc__)
    parser.add_argument("--dir", type=Path, required=True, help="where the stores live")
    parser.add_argument("--postgres", action="store_true", help="PostgreSQL backend store")
    parser.add_argument("--workers", type=int, default=4, help="the server's web workers")
    parser.add_argument("--port", type=int, default=None, help="the server's port (default: free)")
    parser.add_argument("--pg-port", type=int, default=None, help="PostgreSQL's (default: free)")
    args = parser.parse_args(argv)
    args.dir.mkdir(parents=True, exist_ok=True)
    try:
        with (
            postgres(args.dir, args.pg_port) if args.postgres else _sqlite(args.dir) as backend,
            mlflow_server(backend, args.dir / "artifacts", args.workers, args.port) as uri,
        ):
            print(
                f"MLFLOW_TRACKING_URI={uri}   (backend {backend}); Ctrl-C stops\n"
                f"sweep into it with: python -m sweeper ... tracking.uri={uri} "
                f"tracking.database={backend} "
                f"tracking.artifacts_destination={(args.dir / 'artifacts').resolve()}",
                flush=True,
            )
            signal.signal(signal.SIGTERM, signal.default_int_handler)
            while True:
                time.sleep(3600)
    except KeyboardInterrupt:
        return 0
    except (ServerError, subprocess.CalledProcessError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


@contextmanager
def _sqlite(directory: Path) -> Iterator[str]:
    yield f"sqlite:///{directory.resolve()}/mlflow.db"


if __name__ == "__main__":
    sys.exit(main())
