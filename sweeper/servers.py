"""Tracking servers on this machine, as teams run them: an ``mlflow server`` whose backend
store is a sqlite file or a PostgreSQL database, listening on 127.0.0.1 only.

For tests, benches (``bench/bench_scale.py``) and trying the cluster setup on one machine::

    python -m sweeper.servers --postgres --dir /tmp/tracking   # prints the URI; Ctrl-C stops

PostgreSQL is Debian's ``postgresql-15`` package (its server binaries live outside PATH,
under ``/usr/lib/postgresql/<version>/bin``; ``$PG_BIN`` names another directory). Run as
root, the cluster is initialised and run as the ``postgres`` user, as PostgreSQL requires.
Its role ``postgres`` logs in with a password (SCRAM-SHA-256, also over the local socket):
``$PGPASSWORD`` when the cluster is first made, else a random one, kept in ``DIR/pgpass``
(libpq's password file, mode 0600, beside ``DIR/pgdata``). ``mlflow server`` gets the
password in its environment, never on its command line (which every local user can read),
and ``python -m sweeper.servers`` prints the database URI without it, to be used with
``PGPASSFILE=DIR/pgpass``. A cluster an older sweeper made with trust authentication gets
the password and loses trust when it is next started.
``python -m sweeper.servers`` also locks its server (MLflow's basic authentication,
:mod:`sweeper.server_auth`) and holds ``DIR/server.pid`` locked for its whole life: started
again on the same directory while it runs (a recipe run twice), it starts nothing and says
which process serves it. The server process runs with umask 077, so what it creates (the
users' database, a sqlite store, uploaded artifacts) only its user can read. PostgreSQL runs
with its defaults for durability (``fsync`` on: a committed batch survives a power cut).
Everything started here is stopped by its process id (the server's whole process group),
also when the caller fails.
"""

from __future__ import annotations

import argparse
import fcntl
import glob
import os
import pwd
import re
import secrets
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
from urllib.parse import quote, unquote, urlparse

from sweeper.server_auth import ServerAuth, install_credentials, server_auth
from sweeper.uri import CREDENTIALS

START_TIMEOUT_S = 180.0
PASSFILE = "pgpass"
ROLE = "postgres"


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
    on 127.0.0.1:``port`` with a database ``mlflow``; its SQLAlchemy URI, password included
    (``postgresql+psycopg://postgres:PASSWORD@127.0.0.1:PORT/mlflow``: :func:`without_password`
    before it is shown). Started again on the same directory, it keeps its data and its
    password (a restart, as in a fault test)."""
    binaries = pg_bin()
    directory = Path(directory).resolve()
    directory.mkdir(parents=True, exist_ok=True)
    if os.geteuid() == 0:
        _reachable_by_postgres(directory)
    data = directory / "pgdata"
    password = pg_password(directory)
    if not (data / "PG_VERSION").exists():
        _initdb(binaries, data, password)
    options = f"-c listen_addresses=127.0.0.1 -p {port} -k {data}"
    _run(_as_postgres([*_pg_ctl(directory), "-o", options, "-w", "start"]), "pg_ctl start")
    client = {**os.environ, "PGPASSFILE": str(pg_passfile(directory))}
    client.pop("PGPASSWORD", None)  # the file is what the URI gives everyone else too
    if _trusting(data):
        _require_password(directory, binaries, port, password, client)
    createdb = [str(binaries / "createdb"), "-h", "127.0.0.1", "-p", str(port), "-U",
                ROLE, "mlflow"]  # fmt: skip
    subprocess.run(createdb, capture_output=True, env=client)  # exists after a restart
    return f"postgresql+psycopg://{ROLE}:{quote(password, safe='')}@127.0.0.1:{port}/mlflow"


def without_password(uri: str) -> tuple[str, str | None]:
    """A database URI without its password, and the password (None when it has none)."""
    found = CREDENTIALS.search(uri)
    if found is None:
        return uri, None
    return CREDENTIALS.sub(r"\g<head>@", uri, count=1), unquote(found["secret"])


def pg_passfile(directory: Path) -> Path:
    """The password file of the cluster in ``directory/pgdata`` (libpq's format, 0600)."""
    return Path(directory).resolve() / PASSFILE


def pg_password(directory: Path) -> str:
    """The password of the cluster's role: the one its password file holds, else (a new
    cluster) ``$PGPASSWORD`` or a random one, written into a new password file (0600)."""
    file = pg_passfile(directory)
    if file.exists():
        fields = re.split(r"(?<!\\):", file.read_text().strip().split("\n")[0], maxsplit=4)
        if len(fields) != 5:
            raise ServerError(f"{file} is not a password file (host:port:db:user:password)")
        return re.sub(r"\\(.)", r"\1", fields[4])
    password = os.environ.get("PGPASSWORD") or secrets.token_urlsafe(24)
    escaped = password.replace("\\", "\\\\").replace(":", "\\:")
    with os.fdopen(os.open(file, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600), "w") as out:
        out.write(f"127.0.0.1:*:*:{ROLE}:{escaped}\n")
    return password


def _initdb(binaries: Path, data: Path, password: str) -> None:
    """A new cluster whose role logs in with ``password`` over TCP and the socket alike."""
    pwfile = data.parent / ".initdb-password"  # read by initdb (as postgres when root)
    with os.fdopen(os.open(pwfile, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "w") as out:
        out.write(password + "\n")
    try:
        if os.geteuid() == 0:
            user = pwd.getpwnam("postgres")
            os.chown(pwfile, user.pw_uid, user.pw_gid)
        _run(_as_postgres([str(binaries / "initdb"), "-D", str(data), "-U", ROLE,
                           "--auth=scram-sha-256", f"--pwfile={pwfile}"]),
             "initdb")  # fmt: skip
    finally:
        pwfile.unlink(missing_ok=True)


def _without_trust(rule: str) -> str:
    """A line of pg_hba.conf whose method ``trust`` (its last field) is ``scram-sha-256``."""
    if rule.lstrip().startswith("#"):
        return rule
    return re.sub(r"(\s)trust(\s*(#.*)?)$", r"\1scram-sha-256\2", rule)


def _trusting(data: Path) -> bool:
    """Whether the cluster's pg_hba.conf lets anyone in without a password (``trust``)."""
    rules = [line.split("#")[0].split() for line in (data / "pg_hba.conf").read_text().splitlines()]
    return any(len(rule) >= 4 and rule[-1] == "trust" for rule in rules)


def _require_password(
    directory: Path, binaries: Path, port: int, password: str, client: dict[str, str]
) -> None:
    """Give a cluster made with trust authentication its password, then require it: every
    ``trust`` rule of pg_hba.conf becomes ``scram-sha-256`` and the server reloads."""
    literal = password.replace("'", "''")
    psql = [str(binaries / "psql"), "-h", "127.0.0.1", "-p", str(port), "-U", ROLE, "-d",
            "postgres", "-v", "ON_ERROR_STOP=1", "-q"]  # fmt: skip
    done = subprocess.run(  # the password on stdin, never on a command line
        psql, input=f"ALTER ROLE {ROLE} PASSWORD '{literal}';", capture_output=True, text=True,
        env=client,
    )  # fmt: skip
    if done.returncode != 0:
        raise ServerError(f"setting the password of {directory / 'pgdata'} failed: {done.stderr}")
    hba = directory / "pgdata" / "pg_hba.conf"
    rules = hba.read_text().splitlines(keepends=True)
    hba.write_text("".join(map(_without_trust, rules)))
    _run(_as_postgres([*_pg_ctl(directory), "reload"]), "pg_ctl reload")


def pg_stop(directory: Path) -> None:
    """Stop the cluster in ``directory/pgdata`` (fast shutdown: open connections are cut)."""
    stop_ = [*_pg_ctl(Path(directory).resolve()), "-m", "fast", "-w", "stop"]
    subprocess.run(_as_postgres(stop_), capture_output=True)


def pg_restart(directory: Path, database: str, down_s: float = 3.0) -> None:
    """Stop the cluster in ``directory/pgdata`` and start it again ``down_s`` seconds later
    on the port of its URI ``database`` (a fault test's restart)."""
    pg_stop(directory)
    time.sleep(down_s)
    pg_start(directory, urlparse(database).port)


def _pg_ctl(directory: Path) -> list[str]:
    data = directory / "pgdata"
    return [str(pg_bin() / "pg_ctl"), "-D", str(data), "-l", str(directory / "postgres.log")]


@contextmanager
def postgres(directory: Path, port: int | None = None) -> Iterator[str]:
    """A PostgreSQL cluster (:func:`pg_start`) for the ``with`` block; yields its URI
    (``postgresql+psycopg://postgres:PASSWORD@127.0.0.1:PORT/mlflow``)."""
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
    backend_uri: str,
    artifacts: Path,
    port: int | None = None,
    workers: int = 4,
    auth: ServerAuth | None = None,
) -> tuple[subprocess.Popen, str]:
    """Start ``mlflow server`` on 127.0.0.1 (artifacts served through it); the process
    (leader of its own group, umask 077) and its URI, once it answers. A password in
    ``backend_uri`` goes to the server in its environment (``PGPASSWORD``), not on its
    command line; so does ``auth`` (MLflow's basic authentication), when given."""
    port = port or free_port()
    backend_uri, password = without_password(backend_uri)
    env = {**os.environ, **({"PGPASSWORD": password} if password is not None else {})}
    app = []
    if auth is not None:
        env.update(auth.server_env())
        app = ["--app-name", "basic-auth"]
    process = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--workers", str(workers), "--backend-store-uri", backend_uri,
         "--artifacts-destination", str(artifacts), *app],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True, env=env,
        umask=0o077,
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
    backend_uri: str,
    artifacts: Path,
    workers: int = 4,
    port: int | None = None,
    auth: ServerAuth | None = None,
) -> Iterator[str]:
    """An ``mlflow server`` for the ``with`` block; yields its URI."""
    process, uri = start_mlflow_server(backend_uri, artifacts, port, workers, auth)
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
    holder = hold_pid_file(args.dir)
    if isinstance(holder, str):
        print(f"a tracking server of {args.dir} already runs ({holder}): nothing started")
        return 0
    try:
        auth = server_auth(args.dir)
        with (
            postgres(args.dir, args.pg_port) if args.postgres else _sqlite(args.dir) as backend,
            mlflow_server(backend, args.dir / "artifacts", args.workers, args.port, auth) as uri,
        ):
            database, password = without_password(backend)
            passfile = f"PGPASSFILE={pg_passfile(args.dir)} " if password is not None else ""
            print(
                f"MLFLOW_TRACKING_URI={uri}   (backend {database}); Ctrl-C stops\n"
                f"sweep into it with: {passfile}python -m sweeper ... tracking.uri={uri} "
                f"tracking.database={database} "
                f"tracking.artifacts_destination={(args.dir / 'artifacts').resolve()}\n"
                f"{install_credentials(auth)}",
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


PID_FILE = "server.pid"


def hold_pid_file(directory: Path) -> int | str:
    """Lock ``directory/server.pid`` for this process's life (``fcntl.flock``, dropped by the
    OS when it dies, ``kill -9`` included) and write this process's id into it; the open
    descriptor, or, when another process holds it, what the file says of that process."""
    path = Path(directory) / PID_FILE
    descriptor = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        found = os.pread(descriptor, 64, 0).decode(errors="replace").strip()
        os.close(descriptor)
        return f"process {found or '(starting)'}, {path}"
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, f"{os.getpid()}\n".encode(), 0)
    return descriptor


@contextmanager
def _sqlite(directory: Path) -> Iterator[str]:
    yield f"sqlite:///{directory.resolve()}/mlflow.db"


if __name__ == "__main__":
    sys.exit(main())
