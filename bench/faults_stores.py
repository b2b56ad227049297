"""Fault trials of the stores and ways into them (issue #41; bench/bench_faults.py runs them).

Each drives real ``python -m sweeper`` processes against a real tracking server
(``mlflow server`` on the trial's sqlite file, or on PostgreSQL 15) and ends, like every
trial, with the same command run to its end and the check of "exactly once"
(:func:`faults_kit.violations`):

- ``api-stall``: a driver of another host (a UTS namespace) writing through the server's
  API, no ``tracking.database``, behind a proxy that stalls every byte for
  ``LEASE_EXPIRY_S + 3`` s in the middle of a batch; a second driver takes the experiment
  over, and once it holds it the proxy delivers the stalled calls, late, while the second
  runs the sweep. The first must stop with exit status 4 and commit nothing more;
- ``sqlite-and-server``: one driver on ``sqlite:///D/mlflow.db``, another through
  ``mlflow server --backend-store-uri sqlite:///D/mlflow.db``, in the same instant: one
  runs, the other exits 4 naming it;
- ``new-experiment``: two drivers through a server, in the same instant, on an experiment
  that does not exist yet: one runs, the other exits 4 (not 3);
- ``silent-server``: a tracking URI whose server accepts connections and never answers:
  exit 2 after ``SERVER_PATIENCE_S``, saying so;
- ``unreachable-postgresql``: ``postgresql+psycopg://u:pw@127.0.0.1:1/db``: exit 2 within
  seconds, the password never printed;
- ``silent-postgresql``: a sweep on a PostgreSQL ``tracking.uri`` behind a proxy that drops
  every answer once cells are recorded (the connections stay open): exit 3 within
  ``tracking.patience_s`` plus the clean-up time, with the resume line;
- ``advisory-vs-lease``: a driver through a server on PostgreSQL (a lease), then a driver
  on the same database directly (the advisory lock): the second exits 4 naming the first,
  which runs to its end.
"""

from __future__ import annotations

import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

import sqlalchemy as sa
from faults_kit import NAME, Trial, env, finish, finished_runs, resume, spawn, store, wait_for
from tcp_proxy import Proxy

from sweeper import servers
from sweeper.servers import free_port, pg_start, pg_stop, start_mlflow_server, stop
from sweeper.store import CLEANUP_S
from sweeper.store.lock import LEASE_EXPIRY_S
from sweeper.store.tracking import SERVER_PATIENCE_S

API_CELLS = 120
API_ARGS = ["task=toy", "horizon=20", f"seeds={API_CELLS}", "+toy.sleep_s=0.01",
            "tracking.batch_size=40", "tracking.log_threads=1", f"experiment.name={NAME}",
            "launcher.name=local"]  # fmt: skip
"""The sweep of ``api-stall``: cells of 10 ms run in the driver, so that its writer is
always in the middle of a batch of runs written one call at a time."""
servers.START_TIMEOUT_S = max(servers.START_TIMEOUT_S, 900.0)
"""A server's start (its import of MLflow, its workers) takes minutes on a loaded machine."""
WAITS = {"MLFLOW_HTTP_REQUEST_TIMEOUT": "900"}
"""The stalled driver waits for its calls' answers (MLflow's own limit is 120 s) instead of
retrying them: each stalled call is answered, late."""
PATIENCE_S = 20
BUSY = "another sweeper driver is writing"
START_S = 60.0
"""What a refused driver's wall time may hold besides the refusal: Python's start."""


def _server_uri(args: list[str], uri: str) -> list[str]:
    return [a for a in args if not a.startswith("tracking.uri=")] + [f"tracking.uri={uri}"]


def _refused(trial: Trial, codes: list[int], outputs: list[str]) -> None:
    """One of two drivers ran, the other exited 4 naming it (or both ran, one after the
    other)."""
    if sorted(codes) != [0, 4] and codes != [0, 0]:
        trial.violations.append(f"exit codes {codes}: {[o[-300:] for o in outputs]}")
    elif 4 in codes and BUSY not in outputs[codes.index(4)]:
        trial.violations.append(f"the refused driver does not say who holds the experiment: "
                                f"{outputs[codes.index(4)][-300:]}")  # fmt: skip


def api_stall_trial(workdir: Path, index: int) -> Trial:
    db, uri, _ = store(workdir, index, "")
    trial = Trial("API calls stalled past the lease (server, no tracking.database)")
    server, server_uri = start_mlflow_server(uri, db.parent / "artifacts", workers=2)
    try:
        with Proxy("127.0.0.1", urlparse(server_uri).port) as proxy:
            stalled = _server_uri(API_ARGS, f"http://127.0.0.1:{proxy.port}")
            first = spawn(stalled, db.parent, "stalled", host="elsewhere", extra=WAITS)
            while finished_runs(db) < 20 and first.poll() is None:
                time.sleep(0.05)
            proxy.stall()
            trial.finished_before = finished_runs(db)
            time.sleep(LEASE_EXPIRY_S + 3)
            second = spawn(_server_uri(API_ARGS, server_uri), db.parent, "took")
            wait_for(db.parent / "took.out", "results go to", second, 600)
            proxy.resume()  # the stalled calls arrive once the second driver holds it
            codes = [finish(first), finish(second)]
        trial.exit_codes += codes
        out = (db.parent / "stalled.out").read_text()
        took = (db.parent / "took.out").read_text()
        trial.resume_notes += [line.strip() for line in took.splitlines() if "retracted" in line]
        lost = [line for line in out.splitlines() if "lost the experiment" in line]
        for line in lost[:1]:
            trial.resume_notes.append(line.removeprefix("Stopped: ").split(" (the process")[0])
        if codes != [4, 0] or "lost the experiment" not in out:
            trial.violations.append(f"exit codes {codes}, not [4, 0]: {out[-400:]}")
        resume(_server_uri(API_ARGS, server_uri), db.parent, trial, server_uri, cells=API_CELLS)
    finally:
        stop(server)
    return trial


def sqlite_and_server_trial(workdir: Path, index: int, address: str) -> Trial:
    return _two_drivers_and_a_server(workdir, index, address, new=False)


def new_experiment_trial(workdir: Path, index: int, address: str) -> Trial:
    return _two_drivers_and_a_server(workdir, index, address, new=True)


def _two_drivers_and_a_server(workdir: Path, index: int, address: str, new: bool) -> Trial:
    """Two drivers in the same instant: ``new``, both through a server on an experiment
    that does not exist yet; else one on the sqlite file, one through a server on it."""
    from sweeper.store.tracking import Tracker

    db, uri, args = store(workdir, index, address)
    what = "new experiment (server)" if new else "sqlite file and a server on it"
    trial = Trial(f"two drivers, same instant, {what}")
    if not new:
        Tracker(uri, NAME)  # the store and experiment exist (artifacts beside the file)
    server, server_uri = start_mlflow_server(uri, db.parent / "artifacts", workers=2)
    try:
        through = _server_uri(args, server_uri)
        procs = [spawn(through if new else args, db.parent, "a"), spawn(through, db.parent, "b")]
        codes = [finish(p) for p in procs]
        trial.exit_codes += codes
        _refused(trial, codes, [(db.parent / f"{t}.out").read_text() for t in "ab"])
        resume(through if new else args, db.parent, trial, server_uri if new else uri)
    finally:
        stop(server)
    return trial


def silent_server_trial(workdir: Path, index: int, address: str) -> Trial:
    """A server that accepts connections (the kernel does) and never answers."""
    db, _, args = store(workdir, index, address)
    trial = Trial("a server that accepts and never answers")
    with socket.create_server(("127.0.0.1", 0), backlog=64) as listener:
        silent = f"http://127.0.0.1:{listener.getsockname()[1]}"
        started = time.monotonic()
        code = finish(spawn(_server_uri(args, silent), db.parent, "silent"))
        wall = time.monotonic() - started
    trial.exit_codes.append(code)
    out = (db.parent / "silent.out").read_text()
    trial.resume_notes.append(f"exit {code} after {wall:.0f} s, Python's start included")
    said = f"did not answer for {SERVER_PATIENCE_S:.0f} s"
    if code != 2 or said not in out or wall > SERVER_PATIENCE_S + START_S:
        trial.violations.append(f"exit {code} after {wall:.0f} s: {out[-400:]}")
    return trial


def unreachable_postgresql_trial(workdir: Path, index: int, address: str) -> Trial:
    db, _, args = store(workdir, index, address)
    trial = Trial("a PostgreSQL URI nobody listens at")
    started = time.monotonic()
    nobody = "postgresql+psycopg://u:secretpw@127.0.0.1:1/db"
    code = finish(spawn(_server_uri(args, nobody), db.parent, "unreachable"))
    wall = time.monotonic() - started
    trial.exit_codes.append(code)
    out = (db.parent / "unreachable.out").read_text()
    trial.resume_notes.append(f"exit {code} after {wall:.0f} s, Python's start included")
    if code != 2 or "no database answers at 127.0.0.1:1" not in out or wall > START_S:
        trial.violations.append(f"exit {code} after {wall:.0f} s: {out[-400:]}")
    if "secretpw" in out:
        trial.violations.append("the password was printed")
    return trial


@contextmanager
def postgresql() -> Iterator[tuple[str, int]]:
    """A PostgreSQL 15 cluster for the trials that need one: its URI (database ``mlflow``,
    password included) and port."""
    with tempfile.TemporaryDirectory(prefix="sweeper-faults-pg-") as tmp:
        Path(tmp).chmod(0o755)  # PostgreSQL's user must reach its directory
        port = free_port()
        uri = pg_start(Path(tmp) / "pg", port)
        try:
            _with_schema(uri)
            yield uri, port
        finally:
            pg_stop(Path(tmp) / "pg")


def _with_schema(cluster: str) -> None:
    """MLflow's schema in the cluster's database ``mlflow``, made by MLflow in a process of
    its own (which leaves no connection open): the template of every trial's database."""
    make = f"from mlflow import MlflowClient; MlflowClient({cluster!r}).search_experiments()"
    subprocess.run([sys.executable, "-c", make], check=True, capture_output=True, env=env())


def database(cluster: str, index: int) -> str:
    """A new database of the cluster for trial ``index``, a copy of MLflow's empty schema
    (a server started on it has no migration to run: minutes on a loaded machine)."""
    name = f"trial{index:02d}"
    template = sa.engine.make_url(cluster).database
    engine = sa.create_engine(
        sa.engine.make_url(cluster).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    with engine.connect() as connection:
        connection.execute(sa.text(f"drop database if exists {name}"))
        connection.execute(sa.text(f"create database {name} template {template}"))
    engine.dispose()
    return sa.engine.make_url(cluster).set(database=name).render_as_string(hide_password=False)


def finished_cells(uri: str) -> int:
    """FINISHED cell runs in an MLflow database (0 while it cannot be read)."""
    engine = sa.create_engine(uri)
    query = ("select count(*) from runs r join tags t on t.run_uuid = r.run_uuid "
             "where r.status = 'FINISHED' and t.key = 'cell_key'")  # fmt: skip
    try:
        with engine.connect() as connection:
            return int(connection.execute(sa.text(query)).scalar())
    except sa.exc.SQLAlchemyError:
        return 0
    finally:
        engine.dispose()


def _with_port(uri: str, port: int) -> str:
    return sa.engine.make_url(uri).set(port=port).render_as_string(hide_password=False)


def silent_postgresql_trial(workdir: Path, index: int, address: str, cluster: str) -> Trial:
    db, _, args = store(workdir, index, address)
    trial = Trial(f"PostgreSQL silent mid-sweep (its answers dropped), patience {PATIENCE_S} s")
    uri = database(cluster, index)
    with Proxy("127.0.0.1", sa.engine.make_url(uri).port) as proxy:
        proxied = _server_uri(args, _with_port(uri, proxy.port))
        proxied.append(f"tracking.patience_s={PATIENCE_S}")
        proc = spawn(proxied, db.parent, "silenced")
        while finished_cells(uri) < 3 and proc.poll() is None:
            time.sleep(0.05)
        proxy.mute()
        muted = time.monotonic()
        trial.finished_before = finished_cells(uri)
        code = finish(proc)
        waited = time.monotonic() - muted
    trial.exit_codes.append(code)
    out = (db.parent / "silenced.out").read_text()
    trial.resume_notes.append(f"exit {code} {waited:.0f} s after the store fell silent")
    if code != 3 or "then resume" not in out or waited > PATIENCE_S + CLEANUP_S + 15:
        trial.violations.append(f"exit {code} {waited:.0f} s after the silence: {out[-400:]}")
    resume(_server_uri(args, uri), db.parent, trial, uri)
    return trial


LEASED_CELLS = 120
"""The sweep of ``advisory-vs-lease``: 120 cells of 0.6 s, over half a minute on two CPUs,
so that the lease is still held when the second driver (Python's start, then Hydra's
composition, minutes on a loaded machine) reaches it; with 16 cells the first could end
before, and the trial then tested nothing."""


def advisory_vs_lease_trial(workdir: Path, index: int, address: str, cluster: str) -> Trial:
    db, _, args = store(workdir, index, address)
    trial = Trial("PostgreSQL directly (advisory lock) while a driver holds a lease (server)")
    uri = database(cluster, index)
    args = [a for a in args if not a.startswith("seeds=")] + [f"seeds={LEASED_CELLS}"]
    server, server_uri = start_mlflow_server(uri, db.parent / "artifacts", workers=2)
    try:
        leased = _server_uri(args, server_uri)
        first = spawn(leased, db.parent, "lease")
        while finished_cells(uri) < 3 and first.poll() is None:
            time.sleep(0.05)
        trial.finished_before = finished_cells(uri)
        second = spawn(_server_uri(args, uri), db.parent, "advisory")
        codes = [0, finish(second)]
        ended_first = first.poll() is not None  # before the second was answered
        codes[0] = finish(first)
        trial.exit_codes += codes
        out = (db.parent / "advisory.out").read_text()
        if codes != [0, 4] or BUSY not in out:
            why = " (the leased sweep had ended first)" if ended_first else ""
            trial.violations.append(f"exit codes {codes}, not [0, 4]{why}: {out[-400:]}")
        resume(leased, db.parent, trial, server_uri, cells=LEASED_CELLS)
    finally:
        stop(server)
    return trial
