"""Who may write into a store, and how a new sqlite store comes to exist (docs/faults.md).

**One driver at a time.** Two drivers writing into the same cells compute them twice, and
two sweeps of one experiment share cells (``+exp=smoke`` and ``+exp=smoke algorithm=linucb``
share the LinUCB cells), so the lock is taken for the store or the experiment, never for
one sweep only:

- a local sqlite store: an OS file lock (``fcntl.flock``) on ``<store>.lock`` beside the
  file, held for the driver's whole life. Taking it is atomic, and the OS drops it when the
  process dies, ``kill -9`` included: there is nothing to expire. The file holds the holder's
  pid, host, start time and command, for the refusal message.
- a PostgreSQL tracking store: a session-level advisory lock per experiment
  (:class:`AdvisoryLock`), dropped by PostgreSQL when the driver dies.
- every store, besides: a lease per experiment recorded in the store itself, a run tagged
  ``role=lease`` carrying the driver's id and a heartbeat (``sweeper.heartbeat``, ms)
  renewed every :data:`HEARTBEAT_S` (:class:`Lease`). It is what a driver through a
  tracking server sees (no file lock or advisory lock reaches it), so one lock serves
  every way into one database: a sqlite file used directly and through ``mlflow server
  --backend-store-uri sqlite:///same.db``, a PostgreSQL database used directly and through
  a server (issue #41). A driver creates its lease run first and then looks for the others'
  live leases: it proceeds only when a look taken after its own lease existed finds none.
  When two start in the same instant and see each other, the one whose lease is later
  (start time, then run id) withdraws at once and the earliest one waits up to
  :data:`CONTEND_S` for it to, so exactly one proceeds. A lease is dead when its driver's
  process is gone (same host) or its heartbeat is older than :data:`LEASE_EXPIRY_S` (another
  host: clocks must agree to well within that).

A second driver refuses at once (:class:`StoreBusy`, exit status 4) with the other one's pid
and command; it never waits.

**A new sqlite store exists whole or not at all.** MLflow builds its schema the first time
a store is opened, in dozens of separately committed migration steps; a kill in between
leaves a file every later run fails on (``table _alembic_tmp_experiments already exists``).
The driver builds a new store under a temporary name beside the target and links it into
place when complete (:func:`prepare_sqlite_store`). A half-built store found at the target
(from an older sweeper, or from another program that was creating it and was killed) is
rebuilt when it holds no runs; one with runs is explained in one paragraph (:class:`StoreDamaged`).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket
import sqlite3
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any

from sweeper.errors import StoreBusy, StoreFailed, SweepError
from sweeper.process import driver_alive, now_ms, pid_alive
from sweeper.store import mlflow_private
from sweeper.store.failures import STORE_ERRORS

HEARTBEAT_S = 10.0
LEASE_EXPIRY_S = 60.0
CONTEND_S = 5.0
"""How long the earliest of drivers that started together waits for the others to withdraw."""
SETTLE_S = 5.0
"""A half-built store that has not changed for this long has no live builder."""
BUILDING = ".creating-"


class StoreDamaged(SweepError):
    """The store's schema is incomplete and it holds runs: said in one paragraph."""


def sqlite_path(uri: str) -> Path | None:
    """The file of a local ``sqlite:///`` store, else None."""
    return Path(uri.removeprefix("sqlite:///")) if uri.startswith("sqlite:///") else None


def holder_text(command: str) -> str:
    """What the lock file says about its holder (JSON: pid, host, since, command)."""
    since = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime())
    return json.dumps(
        {"pid": os.getpid(), "host": socket.gethostname(), "since": since, "command": command}
    )


def describe_holder(text: str) -> str:
    """``process PID on HOST (since ..., running: COMMAND)`` from a holder's JSON."""
    try:
        info = json.loads(text)
    except ValueError:
        return "another process (it is starting; its details are not written yet)"
    return (
        f"process {info.get('pid')} on {info.get('host')} (since {info.get('since')}, "
        f"running: {info.get('command')})"
    )


def busy_message(where: str, holder: str, pid: Any) -> str:
    return (
        f"another sweeper driver is writing into {where}: {holder}. One driver writes into a "
        "store at a time (two sweeps of one experiment share cells and would compute them "
        f"twice). Wait for it to finish or stop it (kill -INT {pid}), then run this command "
        "again: it resumes and skips every cell the other driver finished"
    )


class StoreLock:
    """An exclusive ``fcntl.flock`` on ``<store>.lock`` beside a local sqlite store.

    Parameters
    ----------
    path : Path
        The store's file (it need not exist yet).
    command : str
        The command this driver runs, written into the lock file for the other drivers.
    """

    def __init__(self, path: Path, command: str) -> None:
        self.path = Path(path).resolve()
        self.lock_path = self.path.with_name(self.path.name + ".lock")
        self.command = command
        self.fd: int | None = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`StoreBusy` naming the holder."""
        try:
            fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError:  # a read-only directory: lock the store file itself
            fd = os.open(self.path, os.O_RDWR)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            text = os.pread(fd, 65536, 0).decode(errors="replace")
            os.close(fd)
            try:
                pid = json.loads(text).get("pid", "PID")
            except ValueError:
                pid = "PID"
            message = busy_message(f"the store {self.path}", describe_holder(text), pid)
            raise StoreBusy(message) from None
        self.fd = fd
        if self.lock_path.exists() and os.path.samestat(os.fstat(fd), self.lock_path.stat()):
            os.ftruncate(fd, 0)
            os.pwrite(fd, holder_text(self.command).encode(), 0)

    def release(self) -> None:
        """Drop the lock (the file stays: removing it would race with a waiting opener)."""
        if self.fd is not None:
            with suppress(OSError):
                os.ftruncate(self.fd, 0)
            os.close(self.fd)  # closing the descriptor releases the flock
            self.fd = None


class Lease:
    """A driver's lease on one experiment, recorded in the store (see the module docstring).

    Parameters
    ----------
    client : MlflowClient
        A client of the store.
    experiment_id : str
        The experiment the lease covers.
    driver : str
        This driver's id (``host:pid:start``, :func:`sweeper.process.driver_id`).
    command : str
        The command this driver runs, shown to a refused driver.
    heartbeat_s, expiry_s : float
        How often the lease is renewed, and after how long without renewal it is dead.
    where : str
        The store as a refused driver's message names it (no password).
    """

    def __init__(
        self,
        client: Any,
        experiment_id: str,
        driver: str,
        command: str,
        heartbeat_s: float = HEARTBEAT_S,
        expiry_s: float = LEASE_EXPIRY_S,
        where: str = "",
    ) -> None:
        self.client, self.experiment_id = client, experiment_id
        self.driver, self.command = driver, command
        self.where = where or "the store"
        self.heartbeat_s, self.expiry_s = heartbeat_s, expiry_s
        self.run_id: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.beaten = time.monotonic()  # the last heartbeat the store took
        self.margin_s = max(expiry_s - heartbeat_s, expiry_s / 2)
        """Silent this long, the driver counts its lease lost (before others may take it)."""

    def _leases(self) -> list[Any]:
        return self.client.search_runs(
            [self.experiment_id],
            "tags.role = 'lease' and attributes.status = 'RUNNING'",
            max_results=1000,
        )

    def live(self, run: Any) -> bool:
        """True unless the lease's driver is gone or its heartbeat expired."""
        alive = driver_alive(run.data.tags.get("sweeper.driver"))
        if alive is not None:
            return alive
        beat = int(run.data.tags.get("sweeper.heartbeat") or run.info.start_time)
        return now_ms() - beat < self.expiry_s * 1000

    def acquire(self) -> None:
        """Create this driver's lease, then proceed only once no other live lease is left
        (:class:`StoreBusy` naming the first other one otherwise): see the module docstring."""
        run = self.client.create_run(
            self.experiment_id,
            run_name="sweeper-lease",
            tags={
                "role": "lease",
                "sweeper.driver": self.driver,
                "sweeper.command": self.command,
                "sweeper.heartbeat": str(now_ms()),
            },
        )
        self.run_id = run.info.run_id
        deadline = time.monotonic() + CONTEND_S
        while live := self._others():
            first = min([*live, run], key=_order)
            if first.info.run_id != self.run_id or time.monotonic() > deadline:
                self._refuse(live)
            time.sleep(0.25)  # the earliest: the later ones withdraw (module docstring)
        self.beaten = time.monotonic()
        self._thread = threading.Thread(target=self._beat, name="sweeper-lease", daemon=True)
        self._thread.start()

    def _others(self) -> list[Any]:
        """The other drivers' live leases, after ending this driver's earlier attempts (an
        answer lost) and the leases of dead drivers."""
        others = [r for r in self._leases() if r.info.run_id != self.run_id]
        gone = [r for r in others if r.data.tags.get("sweeper.driver") == self.driver]
        others = [r for r in others if r.data.tags.get("sweeper.driver") != self.driver]
        gone += [r for r in others if not self.live(r)]
        for run in gone:
            with suppress(*STORE_ERRORS):  # another driver may be clearing it too
                self.client.set_terminated(run.info.run_id, "KILLED")
                self.client.delete_run(run.info.run_id)
        return [r for r in others if self.live(r)]

    def _refuse(self, live: list[Any]) -> None:
        self._drop()
        other = min(live, key=_order).data.tags
        pid = (other.get("sweeper.driver") or "").split(":")[1:2] or ["PID"]
        holder = f"driver {other.get('sweeper.driver')} (running: {other.get('sweeper.command')})"
        raise StoreBusy(busy_message(f"this experiment of {self.where}", holder, pid[0]))

    def _beat(self) -> None:
        while not self._stop.wait(self.heartbeat_s):
            with suppress(*STORE_ERRORS):  # a store that fails is the driver's to report
                sent = time.monotonic()
                self.client.set_tag(self.run_id, "sweeper.heartbeat", str(now_ms()))
                self.beaten = sent  # a lease another driver took is deleted: no tag set

    def check(self) -> None:
        """After a silence past the lease's margin (the driver was paused, or the server
        away), make sure the lease is still this driver's before going on: its run still
        RUNNING and not deleted (a driver that takes a dead lease over ends and deletes it),
        then renew it; else :class:`LeaseLost`. A store that is away raises its own error
        (waited for by the caller)."""
        silent = time.monotonic() - self.beaten
        if self._thread is None or silent < self.margin_s:
            return
        run = self.client.get_run(self.run_id)
        if run.info.status != "RUNNING" or run.info.lifecycle_stage != "active":
            raise LeaseLost(lost_message(None, "expired", silent, self.expiry_s))
        self.client.set_tag(self.run_id, "sweeper.heartbeat", str(now_ms()))
        self.beaten = time.monotonic()

    def _drop(self) -> None:
        with suppress(*STORE_ERRORS):  # best effort: a lease left behind expires
            self.client.set_terminated(self.run_id, "FINISHED")
            self.client.delete_run(self.run_id)

    def release(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)
        if self.run_id is not None:
            self._drop()
            self.run_id = None


def _order(run: Any) -> tuple[int, str]:
    """Which of two leases came first: by start time, then run id (the same for every
    driver that sees both)."""
    return int(run.info.start_time or 0), run.info.run_id


class LeaseLost(StoreFailed):
    """This driver no longer holds the experiment (another driver took its lease, or its
    lock): it stops at once, writing nothing more (the other driver owns the sweep now)."""


HOLDER = "sweeper.holder"
"""The experiment's tag naming the driver that holds it: the fencing token each batch checks
in its own transaction (:meth:`Fence.check_in`)."""


class Fence:
    """The fencing token of a driver that holds an experiment (its lease, and the advisory
    lock on a PostgreSQL store): its id in the experiment's tag :data:`HOLDER`.

    A driver that takes the experiment over writes its own id there before it reads what
    the experiment holds; every batch of runs checks the tag still names its driver, in the
    batch's own transaction when it is written into the database (:meth:`check_in`: an
    update of the tag's row, which locks it, so a takeover waits for a batch in flight and
    then sees it), else before the batch's runs are committed and again after
    (:meth:`check`, :mod:`sweeper.store.record`). A driver that lost it stops
    (:class:`LeaseLost`, saying what happened).

    Parameters
    ----------
    client : MlflowClient
    experiment_id : str
    driver : str
        This driver's id (:func:`sweeper.process.driver_id`).
    lease : Lease or None
        Its lease, whose own heartbeat tells a driver paused past the lease's expiry.
    lock : AdvisoryLock or None
        Its advisory lock (a PostgreSQL tracking store).
    """

    def __init__(
        self,
        client: Any,
        experiment_id: str,
        driver: str,
        lease: Lease | None = None,
        lock: AdvisoryLock | None = None,
    ) -> None:
        self.client, self.experiment_id, self.driver = client, experiment_id, driver
        self.lease, self.lock = lease, lock

    def before_batch(self, api: bool) -> None:
        """Before a batch is written: the lock's session taken again if a database restart
        ended it, and (``api``: runs through MLflow's API, no transaction to check in) the
        token checked."""
        if self.lock is not None:
            try:
                self.lock.check()
            except StoreBusy:
                raise LeaseLost(lost_message(self._holder(), "session")) from None
        if api:
            self.check()

    def claim(self) -> None:
        self.client.set_experiment_tag(self.experiment_id, HOLDER, self.driver)

    def check(self) -> None:
        """Raise :class:`LeaseLost` unless this driver still holds the experiment."""
        if self.lease is not None:
            try:
                self.lease.check()
            except LeaseLost:  # its lease was taken over: say by whom
                raise self._lost(self._holder(), None) from None
        holder = self._holder()
        if holder != self.driver:
            raise self._lost(holder, self._lease_state())

    def check_in(self, connection: Any) -> None:
        """The token checked inside a batch's transaction (``connection``, SQLAlchemy): the
        one check that holds however long the driver was paused or the server away. The
        tag's row is updated to itself: a write, so it is locked until the batch commits
        (PostgreSQL's row lock, SQLite's write lock)."""
        import sqlalchemy as sa

        where = "experiment_id = :experiment and key = :key"
        values = {"experiment": int(self.experiment_id), "key": HOLDER}
        held = connection.execute(
            sa.text(f"update experiment_tags set value = value where {where} and value = :me"),
            {**values, "me": self.driver},
        ).rowcount
        if held == 1:
            return
        found = connection.execute(
            sa.text(f"select value from experiment_tags where {where}"), values
        ).first()
        state = None
        if self.lease is not None and self.lease.run_id is not None:
            state = connection.execute(
                sa.text("select status, lifecycle_stage from runs where run_uuid = :run"),
                {"run": self.lease.run_id},
            ).first()
        raise self._lost(found[0] if found else None, state)

    def _holder(self) -> str | None:
        return self.client.get_experiment(self.experiment_id).tags.get(HOLDER)

    def _lease_state(self) -> tuple[str, str] | None:
        if self.lease is None or self.lease.run_id is None:
            return None
        try:
            run = self.client.get_run(self.lease.run_id)
        except STORE_ERRORS:  # deleted for good, or the store is away: say what is known
            return None
        return run.info.status, run.info.lifecycle_stage

    def _lost(self, holder: str | None, state: Any) -> LeaseLost:
        """The error of a driver whose token names ``holder``; ``state`` (status, lifecycle
        stage) of its lease run tells how it lost the experiment."""
        if self.lease is None:
            return LeaseLost(lost_message(holder, "session"))
        if state is None or tuple(state) != ("RUNNING", "active"):
            silent = time.monotonic() - self.lease.beaten
            return LeaseLost(lost_message(holder, "expired", silent, self.lease.expiry_s))
        return LeaseLost(lost_message(holder, "claimed"))


def lost_message(
    holder: str | None, how: str, silent_s: float | None = None, expiry_s: float = LEASE_EXPIRY_S
) -> str:
    """What a driver that lost the experiment to ``holder`` says: ``how`` it lost it
    (``expired``: its lease went without a heartbeat past its expiry and was taken over;
    ``claimed``: another driver claimed it while the lease was live; ``session``: its
    PostgreSQL session ended and another driver took the experiment meanwhile)."""
    other = f"to another driver ({holder or 'unknown'})"
    silent = f" (silent {silent_s:.0f} s)" if silent_s is not None else ""
    why = {
        "expired": (
            f"its lease went without a heartbeat for longer than {expiry_s:g} s"
            f"{silent} (the process was paused, or its calls to the store did not get "
            "through), so that driver took the experiment over"
        ),
        "claimed": (
            "that driver claimed the experiment although this driver's lease was live "
            "(a sweeper that does not see leases, older than this one)"
        ),
        "session": (
            "this driver's session with the PostgreSQL database ended (a restart, or a "
            "dropped connection) and that driver took the experiment meanwhile"
        ),
    }[how]
    return (
        f"this driver lost the experiment {other}: {why}. This driver stopped; what it "
        "recorded before is kept and nothing it wrote after losing the experiment counts. "
        "The other driver runs the cells that are left; run this command again once it "
        "is done if cells remain"
    )


class AdvisoryLock:
    """One driver per experiment of a PostgreSQL tracking store (``tracking.uri=postgresql
    ...``): a session-level ``pg_try_advisory_lock`` on the experiment, held on a connection
    of its own for the driver's whole life. PostgreSQL drops it when the session ends (the
    driver dies, ``kill -9`` included), so there is nothing to expire; a paused driver keeps
    it. A connection lost while the database restarts is reopened and the lock taken again,
    and the experiment's :data:`HOLDER` tag tells whether another driver held it meanwhile.

    Parameters
    ----------
    database : str
        The store's SQLAlchemy URI.
    experiment_id : str
    driver, command : str
        This driver's id and command (``application_name``, for a refused driver's message).
    """

    def __init__(self, database: str, experiment_id: str, driver: str, command: str) -> None:
        self.database, self.experiment_id = database, experiment_id
        self.driver, self.command = driver, command
        self.key = advisory_key(experiment_id)
        self.connection: Any = None
        self.engine: Any = None

    def acquire(self) -> None:
        """Take the lock or raise :class:`StoreBusy` naming the session that holds it."""
        import sqlalchemy as sa
        from sqlalchemy.pool import NullPool

        name = f"sweeper {self.driver}"[:63]
        self.engine = sa.create_engine(
            self.database, poolclass=NullPool, connect_args={"application_name": name}
        )
        self.connection = self.engine.connect()
        took = self.connection.execute(
            sa.text("select pg_try_advisory_lock(:key)"), {"key": self.key}
        ).scalar()
        self.connection.commit()
        if not took:
            holder = self._holder()
            self.release()
            pid = holder.split(":")[1] if holder.count(":") >= 2 else "PID"
            raise StoreBusy(busy_message("this experiment of the PostgreSQL store", holder, pid))

    def _holder(self) -> str:
        import sqlalchemy as sa

        high, low = (self.key >> 32) & 0xFFFFFFFF, self.key & 0xFFFFFFFF
        row = self.connection.execute(
            sa.text(
                "select a.application_name, a.client_addr from pg_locks l join "
                "pg_stat_activity a on a.pid = l.pid where l.locktype = 'advisory' and "
                "l.granted and l.classid = :high and l.objid = :low and l.objsubid = 1"
            ),
            {"high": high, "low": low},
        ).first()
        if row is None:
            return "another driver (it has just ended)"
        return f"driver {str(row[0]).removeprefix('sweeper ')} (from {row[1] or 'this host'})"

    def check(self) -> None:
        """Before a batch: the lock's session is alive; one lost (a database restart) is
        taken again, unless another driver held the experiment meanwhile."""
        import sqlalchemy as sa

        try:
            self.connection.execute(sa.text("select 1")).scalar()
            self.connection.commit()
            return
        except sa.exc.SQLAlchemyError:  # the session is gone: take the lock again
            self.release()
        self.acquire()  # a store that is away raises here: the caller waits for it

    def release(self) -> None:
        import sqlalchemy as sa

        if self.connection is not None:
            with suppress(sa.exc.SQLAlchemyError):  # a session the server dropped already
                self.connection.close()
            self.connection = None
        if self.engine is not None:
            self.engine.dispose()
            self.engine = None


def advisory_key(experiment_id: str) -> int:
    """The advisory lock's 64-bit key of an experiment (a hash: no other program's key)."""
    import hashlib

    digest = hashlib.sha256(f"sweeper/experiment/{experiment_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") & 0x7FFFFFFFFFFFFFFF


@contextmanager
def store_lock(uri: str, command: str) -> Iterator[StoreLock | None]:
    """Hold the file lock of a local sqlite store for the ``with`` block (None otherwise)."""
    path = sqlite_path(uri)
    if path is None:
        yield None
        return
    lock = StoreLock(path, command)
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


# --- whole-or-nothing creation of a sqlite store ----------------------------------------


def schema_state(path: Path) -> dict[str, Any]:
    """What the sqlite file at ``path`` holds: ``whole`` (every MLflow table, the newest
    schema revision, no table of an interrupted migration), ``runs``, ``revision``, ``head``
    and ``leftovers`` (the ``_alembic_tmp_*`` tables)."""
    head = mlflow_private.get("latest_revision")()
    with closing_connection(path) as db:
        tables = {row[0] for row in db.execute("select name from sqlite_master where type='table'")}
        revision = None
        if "alembic_version" in tables:
            row = db.execute("select version_num from alembic_version").fetchone()
            revision = row[0] if row else None
        runs = db.execute("select count(*) from runs").fetchone()[0] if "runs" in tables else 0
    leftovers = sorted(t for t in tables if t.startswith("_alembic_tmp_"))
    whole = (
        set(mlflow_private.get("Base").metadata.tables) <= tables
        and revision == head
        and not leftovers
    )
    return {
        "whole": whole,
        "runs": runs,
        "revision": revision,
        "head": head,
        "leftovers": leftovers,
        "tables": len(tables),
    }


@contextmanager
def closing_connection(path: Path) -> Iterator[sqlite3.Connection]:
    db = sqlite3.connect(path, timeout=20)
    try:
        yield db
    finally:
        db.close()


def _fingerprint(path: Path) -> tuple:
    marks = []
    for name in (path, path.with_name(path.name + "-journal")):
        try:
            stat = name.stat()
            marks.append((stat.st_size, stat.st_mtime_ns))
        except OSError:
            marks.append(None)
    return tuple(marks)


def _build(path: Path) -> Path:
    """A complete MLflow store under a temporary name beside ``path``; return its path."""
    temporary = path.with_name(f".{path.name}{BUILDING}{os.getpid()}")
    for stale in (temporary, temporary.with_name(temporary.name + "-journal")):
        stale.unlink(missing_ok=True)
    uri = f"sqlite:///{temporary}"
    store = mlflow_private.get("SqlAlchemyStore")(uri, mlflow_private.get("default_artifacts"))
    store.engine.dispose()
    mlflow_private.engine_map().pop(uri, None)
    with open(temporary, "rb") as handle:
        os.fsync(handle.fileno())
    return temporary


def _remove_stale_builds(path: Path) -> None:
    """Delete temporary stores of builders that died (their pid is gone)."""
    for stale in path.parent.glob(f".{path.name}{BUILDING}*"):
        pid = stale.name.rsplit(BUILDING, 1)[1].split("-", 1)[0]
        if pid.isdigit() and int(pid) != os.getpid() and not pid_alive(int(pid)):
            stale.unlink(missing_ok=True)


def prepare_sqlite_store(path: Path, settle_s: float = SETTLE_S) -> str:
    """Make sure the sqlite store at ``path`` is whole before MLflow opens it.

    Returns what was done: ``""`` (it was whole), ``"created"`` or ``"rebuilt"`` (a half-built
    store without runs was replaced). A missing store is built under a temporary name and
    hard-linked into place, which fails if another program created the file meanwhile: then
    that program's build is waited for (until it is whole, or unchanged for ``settle_s``).
    Raises :class:`StoreDamaged` for a half-built store that holds runs.
    """
    path = Path(path)
    _remove_stale_builds(path)
    if not path.exists():
        temporary = _build(path)
        try:
            os.link(temporary, path)  # fails if the file appeared meanwhile: never overwrites
            return "created"
        except FileExistsError:  # another program created it while we built ours
            pass
        except OSError:  # a file system without hard links
            if not path.exists():
                os.replace(temporary, path)
                return "created"
        finally:
            temporary.unlink(missing_ok=True)
    state = schema_state(path)
    mark, changed = _fingerprint(path), time.monotonic()
    while not state["whole"] and time.monotonic() - changed < settle_s:
        time.sleep(0.25)
        if _fingerprint(path) != mark:
            mark, changed = _fingerprint(path), time.monotonic()
        state = schema_state(path)
    if state["whole"]:
        return ""
    if state["runs"]:
        raise StoreDamaged(_damaged_message(path, state))
    temporary = _build(path)
    for journal in ("-journal", "-wal", "-shm"):  # never replayed into the new file
        path.with_name(path.name + journal).unlink(missing_ok=True)
    os.replace(temporary, path)
    _forget_engines(path)
    return "rebuilt"


def _forget_engines(path: Path) -> None:
    """Close the connections this process still holds to the file ``path`` replaced."""
    engines = mlflow_private.engine_map()
    for uri, engine in list(engines.items()):
        database = engine.url.database
        if database and Path(database).resolve() == path.resolve():
            engine.dispose()
            engines.pop(uri, None)


def _damaged_message(path: Path, state: dict[str, Any]) -> str:
    revision = state["revision"]
    if not state["leftovers"] and revision and not known_revision(revision):
        import mlflow

        return (
            f"the MLflow store {path} holds {state['runs']} run(s) and was made by a newer "
            f"MLflow than this one ({mlflow.__version__}): its schema revision {revision} is "
            f"not one this MLflow knows (its newest is {state['head']}), and `mlflow db "
            "upgrade` cannot take a schema back. Install the MLflow that made it (pip install "
            "-U mlflow), or point tracking.uri at another store (tracking.uri=sqlite:///new.db)"
        )
    if state["leftovers"]:
        what = (
            f"a schema migration was interrupted (it left the tables "
            f"{', '.join(state['leftovers'])})"
        )
    else:
        what = (
            f"its schema is at revision {revision}, older than this MLflow's "
            f"{state['head']} (made by an older MLflow, or a migration was interrupted)"
        )
    return (
        f"the MLflow store {path} holds {state['runs']} run(s) but its schema is incomplete: "
        f"{what}. Copy the file somewhere safe, then run `mlflow db upgrade sqlite:///{path}` "
        "with this environment's MLflow; if that fails, drop the _alembic_tmp_* tables in the "
        "copy (sqlite3 FILE 'drop table ...') and run it again, or move the file away and "
        "start with a new store (tracking.uri=sqlite:///new.db)"
    )


def known_revision(revision: str) -> bool:
    """Whether this MLflow's migrations know the schema revision ``revision`` (a store made
    by a newer MLflow has one they do not)."""
    from alembic.script import ScriptDirectory
    from alembic.util import CommandError

    config = mlflow_private.get("alembic_config")(db_url="")
    try:
        return ScriptDirectory.from_config(config).get_revision(revision) is not None
    except CommandError:  # "Can't locate revision identified by ..."
        return False
