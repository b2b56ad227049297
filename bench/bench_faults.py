"""Fault injection: exactly once under every fault (issue #17; docs/faults.md).

    .venv/bin/python bench/bench_faults.py [--kills 30] [--seed 0] [--out bench/results/faults.md]

``make test-faults`` runs the same trials as a slow test (tests/test_faults_injection.py)
and writes the same file. Every trial drives real processes: ``python -m sweeper`` on a
toy sweep (:data:`ARGS`: 16 cells of 0.6 s with a batched form, so the launcher sends them
in batches of a few seeds, the table flushed every 3 cells) joining one Ray instance, then
injects a fault, then runs the same command again to the end. Trials:

- ``kill``: ``kill -9`` of the driver's process group at a moment drawn uniformly over a
  whole uninterrupted run on a *new* store (so about a third land while Python imports,
  a third while the store is created, a third while cells run and are logged);
- ``kill-rerun``: the same during ``rerun=true`` of a complete store, resumed by a plain run;
- ``double-sigint``: two SIGINTs 20 ms apart once a few cells have finished;
- ``two-drivers``: two drivers started in the same instant on an interrupted store (the
  same sweep), on a new store, and two different sweeps sharing 8 cells (``seeds=16`` and
  ``seeds=8``): exactly one may run, the other exits 4 naming it;
- ``poller``: a script polling the new store with ``MlflowClient.search_runs`` while the
  driver creates it (as ``mlflow ui`` or a report would);
- ``worker-kill``: ``kill -9`` of the Ray worker running a batch, at a moment drawn
  uniformly over the batch's cells (their process id tells which worker runs them), while
  the driver goes on: the batch's cells not yet returned run again one at a time, and the
  sweep ends by itself (no resume).

After each trial, checked (:func:`violations`): the resume exits 0; every cell has exactly
one FINISHED run not tagged ``superseded_by`` (a ``rerun=true`` leaves tagged older ones),
and no FINISHED run besides those unless tagged; nothing is RUNNING (cell or sweep runs);
the sweep's ``cells.parquet`` rows are exactly those runs (cell key and run id); the
report and the resume index pick the same run of every cell (sweeper/store/result.py).
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from harness import Bench, measure

NAME = "faults"
CELLS, SLEEP_S, BATCH = 16, 0.6, 3
ARGS = [
    "task=toy",
    "cell=sweeper.toy.batched_toy_cell",
    "horizon=50",
    f"seeds={CELLS}",
    f"+toy.sleep_s={SLEEP_S}",
    f"tracking.batch_size={BATCH}",
    f"experiment.name={NAME}",
]
LIMIT_S = 300.0
RESULTS = Path(__file__).resolve().parent / "results" / "faults.md"


@dataclass
class Trial:
    """One fault and its resume: what was done, what the store held, what was checked."""

    kind: str
    moment_s: float | None = None
    exit_codes: list[int] = field(default_factory=list)
    finished_before: int = 0
    store_before: str = ""
    resume_notes: list[str] = field(default_factory=list)
    violations: list[str] = field(default_factory=list)
    wall_s: float = 0.0


def _env() -> dict[str, str]:
    drop = ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "HYDRA_FULL_ERROR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def spawn(args: list[str], cwd: Path, tag: str) -> subprocess.Popen:
    """``python -m sweeper ARGS`` in its own process group, output into ``cwd/tag.out``."""
    log = open(cwd / f"{tag}.out", "w")  # noqa: SIM115 - closed with the process
    return subprocess.Popen(
        [sys.executable, "-u", "-m", "sweeper", *args],
        cwd=cwd,
        env=_env(),
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )


def finish(proc: subprocess.Popen, limit_s: float = LIMIT_S) -> int:
    try:
        return proc.wait(timeout=limit_s)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        return proc.wait()


def finished_runs(db: Path) -> int:
    """FINISHED cell runs in the store, read with sqlite alone (never creating the file)."""
    try:
        with sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5) as con:
            return con.execute(
                "select count(*) from runs r join tags t on t.run_uuid = r.run_uuid "
                "where r.status = 'FINISHED' and t.key = 'cell_key'"
            ).fetchone()[0]
    except sqlite3.Error:  # absent, or being created
        return 0


def store_state(db: Path) -> str:
    if not db.exists():
        return "absent"
    from sweeper.store.lock import schema_state

    try:
        state = schema_state(db)
    except sqlite3.Error as err:
        return f"unreadable ({err})"
    return "whole" if state["whole"] else f"half-built ({state['tables']} tables)"


def wait_finished(proc: subprocess.Popen, db: Path, count: int, limit_s: float = 120) -> None:
    deadline = time.time() + limit_s
    while time.time() < deadline and proc.poll() is None:
        if finished_runs(db) >= count:
            return
        time.sleep(0.1)


def violations(uri: str, cells: int = CELLS) -> list[str]:
    """What breaks "exactly once" in the store (see the module docstring); [] when none."""
    from mlflow import MlflowClient

    from sweeper.store.tracking import Tracker

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(NAME)
    if experiment is None:
        return ["no experiment"]
    runs = client.search_runs([experiment.experiment_id], max_results=5000)
    bad = []
    running = [r for r in runs if r.info.status == "RUNNING" and r.data.tags.get("role") != "lease"]
    if running:
        bad.append(f"{len(running)} run(s) RUNNING")
    cell_runs = [r for r in runs if "cell_key" in r.data.tags]
    current = Counter(
        r.data.tags["cell_key"]
        for r in cell_runs
        if r.info.status == "FINISHED" and "superseded_by" not in r.data.tags
    )
    if len(current) != cells or set(current.values()) != {1}:
        bad.append(f"current FINISHED runs per cell: {sorted(current.values())} ({len(current)})")
    results = {
        (r.data.tags["cell_key"], r.info.run_id)
        for r in cell_runs
        if r.info.status == "FINISHED" and "superseded_by" not in r.data.tags
    }
    tracker = Tracker(uri, NAME)
    parents = tracker.sweep_parents()
    newest = max(parents, key=lambda p: p.info.end_time or 0, default=None)
    # The table holds every run it recorded (a rerun adds rows); its current view is one
    # row per cell: the newest FINISHED (sweeper/store/table.py).
    table = None if newest is None else tracker.table(newest.info.run_id).current()
    if table is None or set(zip(table["cell_key"], table["run_id"], strict=True)) != results:
        bad.append("the newest sweep table's rows differ from the cells' current runs")
    bad += _disagreements(tracker, uri)
    return bad


def _disagreements(tracker, uri: str) -> list[str]:
    """The resume index and the report must pick the same run of every cell (issue #26)."""
    from sweeper.report.load import load_experiment
    from sweeper.store.index import read_index

    index = {k: e.run_id for k, e in read_index(tracker).finished.items()}
    cells = load_experiment(NAME, uri).cells
    finished = cells[cells["status"] == "FINISHED"]
    report = dict(zip(finished["cell_key"], finished["run_id"], strict=True))
    differ = {k for k in index.keys() | report.keys() if index.get(k) != report.get(k)}
    return [f"the report and the resume index differ on {len(differ)} cell(s)"] if differ else []


def _resume(
    args: list[str], cwd: Path, trial: Trial, uri: str, tag: str = "resume", check: bool = True
) -> None:
    """Run ``args`` to the end; record its notes, exit code and (``check``) violations."""
    code = finish(spawn(args, cwd, tag))
    trial.exit_codes.append(code)
    out = (cwd / f"{tag}.out").read_text()
    trial.resume_notes += [
        line.strip()
        for line in out.splitlines()
        if "set to KILLED" in line or "rebuilt" in line or "re-tagged" in line
    ]
    if code != 0:
        trial.violations.append(f"the resume exited {code}: {out[-400:]}")
    if check:
        trial.violations += violations(uri)


def _store(workdir: Path, index: int, address: str) -> tuple[Path, str, list[str]]:
    """A trial's directory: its store's path and URI, and the sweep's command line."""
    cwd = workdir / f"trial{index:02d}"
    cwd.mkdir(parents=True, exist_ok=True)
    db = cwd / "mlflow.db"
    return (
        db,
        f"sqlite:///{db}",
        [*ARGS, f"tracking.uri=sqlite:///{db}", f"launcher.address={address}"],
    )


def clean_run(workdir: Path, address: str) -> float:
    """Wall time of one uninterrupted run on a new store: the span kill moments cover."""
    db, uri, args = _store(workdir, 0, address)
    run = measure(lambda: finish(spawn(args, db.parent, "clean")))
    if run.value != 0 or violations(uri):
        raise RuntimeError(f"the clean run failed: {(db.parent / 'clean.out').read_text()}")
    return run.wall


def kill_trial(workdir: Path, index: int, address: str, moment: float, rerun: bool) -> Trial:
    db, uri, args = _store(workdir, index, address)
    trial = Trial("kill-rerun" if rerun else "kill", moment)
    if rerun:  # a complete store first, then kill rerun=true
        finish(spawn(args, db.parent, "first"))
    proc = spawn([*args, "rerun=true"] if rerun else args, db.parent, "killed")
    time.sleep(moment)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    trial.finished_before, trial.store_before = finished_runs(db), store_state(db)
    _resume(args, db.parent, trial, uri)
    return trial


def double_sigint_trial(workdir: Path, index: int, address: str) -> Trial:
    db, uri, args = _store(workdir, index, address)
    trial = Trial("double-sigint")
    proc = spawn(args, db.parent, "interrupted")
    wait_finished(proc, db, 3)

    def interrupt() -> int:
        os.killpg(proc.pid, signal.SIGINT)
        time.sleep(0.02)
        os.killpg(proc.pid, signal.SIGINT)
        return finish(proc)

    stopped = measure(interrupt)
    trial.exit_codes.append(stopped.value)
    trial.resume_notes = [f"it exited {stopped.wall:.1f} s after the SIGINTs"]
    trial.finished_before, trial.store_before = finished_runs(db), store_state(db)
    _resume(args, db.parent, trial, uri)
    return trial


def two_drivers_trial(workdir: Path, index: int, address: str, variant: str) -> Trial:
    """Two drivers at once: ``interrupted`` (the same sweep, on a store killed after 3
    cells), ``new`` (the same sweep on a new store), ``overlap`` (seeds=16 and seeds=8)."""
    db, uri, args = _store(workdir, index, address)
    trial = Trial(f"two-drivers ({variant})")
    if variant == "interrupted":
        proc = spawn(args, db.parent, "first")
        wait_finished(proc, db, 3)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    second = [*args, "seeds=8"] if variant == "overlap" else args
    procs = [spawn(args, db.parent, "a"), spawn(second, db.parent, "b")]
    codes = [finish(p) for p in procs]
    trial.exit_codes += codes
    trial.finished_before, trial.store_before = finished_runs(db), store_state(db)
    outputs = [(db.parent / f"{t}.out").read_text() for t in "ab"]
    if sorted(codes) != [0, 4] and codes != [0, 0]:
        trial.violations.append(f"exit codes {codes}: {[o[-300:] for o in outputs]}")
    if 4 in codes and "another sweeper driver is writing" not in outputs[codes.index(4)]:
        trial.violations.append("the refused driver does not say who holds the store")
    if variant == "overlap":
        _resume(second, db.parent, trial, uri, "resume-b", check=False)
    _resume(args, db.parent, trial, uri)
    return trial


def poller_trial(workdir: Path, index: int, address: str) -> Trial:
    db, uri, args = _store(workdir, index, address)
    trial = Trial("poller")
    poll = (
        "import time, mlflow\n"
        "from mlflow import MlflowClient\n"
        "end = time.time() + 25\n"
        "while time.time() < end:\n"
        "    try:\n"
        f"        MlflowClient({uri!r}).search_experiments()\n"
        f"        mlflow.search_runs(search_all_experiments=True)\n"
        "    except Exception as err:\n"
        "        print('poller:', type(err).__name__, str(err)[:200], flush=True)\n"
        "    time.sleep(0.05)\n"
    )
    poller = subprocess.Popen(
        [sys.executable, "-c", poll],
        cwd=db.parent,
        env={**_env(), "MLFLOW_TRACKING_URI": uri},
        stdout=open(db.parent / "poller.out", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    time.sleep(1.0)  # the poller is importing MLflow while the driver starts
    driven = spawn(args, db.parent, "driven")
    return _to_the_end(driven, db, uri, trial, "beside a poller", then=lambda: finish(poller, 60))


def _to_the_end(proc, db: Path, uri: str, trial: Trial, what: str, then=None) -> Trial:
    """The driver ``proc`` (output ``driven.out``) run to its end: it must exit 0 and leave
    the store exactly once (``then``: what to wait for after it)."""
    code = finish(proc)
    trial.exit_codes.append(code)
    if then is not None:
        then()
    trial.store_before = store_state(db)
    if code != 0:
        out = (db.parent / "driven.out").read_text()
        trial.violations.append(f"the driver exited {code} {what}: {out[-400:]}")
    trial.violations += violations(uri)
    return trial


def worker_kill_trial(workdir: Path, index: int, address: str, moment: float) -> Trial:
    """``kill -9`` of the worker running a batch, ``moment`` seconds after its first cell
    started; the driver runs on to the end."""
    db, uri, args = _store(workdir, index, address)
    pids = db.parent / "pids"
    pids.mkdir()
    trial = Trial("worker-kill", moment)
    proc = spawn([*args, f"+toy.pid_dir={pids}"], db.parent, "driven")
    deadline = time.time() + 120
    while time.time() < deadline and proc.poll() is None and not any(pids.iterdir()):
        time.sleep(0.02)
    time.sleep(moment)
    first = min(pids.iterdir(), key=lambda p: p.stat().st_mtime, default=None)
    if first is not None:
        try:
            os.kill(int(first.read_text()), signal.SIGKILL)
        except (ProcessLookupError, ValueError):
            trial.resume_notes.append("the worker had already ended")
    trial.finished_before = finished_runs(db)
    return _to_the_end(proc, db, uri, trial, "after a worker died")


def run_trials(workdir: Path, address: str, kills: int = 30, seed: int = 0, log=print):
    """Every trial of the module docstring; returns (trials, the clean run's wall time)."""
    rng = np.random.default_rng(seed)
    clean_s = clean_run(workdir, address)
    log(f"clean run: {clean_s:.1f} s")
    plan: list[tuple[str, object]] = [("kill", float(m)) for m in rng.uniform(0, clean_s, kills)]
    plan += [("kill-rerun", float(m)) for m in rng.uniform(0, clean_s, 2)]
    plan += [("double-sigint", None)] * 3
    plan += [("two-drivers", v) for v in ("interrupted", "new", "overlap")]
    plan += [("poller", None)]
    batch_s = SLEEP_S * (CELLS // (2 * 2))  # one batch: CELLS // (2 tasks x 2 CPUs) cells
    plan += [("worker-kill", float(m)) for m in rng.uniform(0, batch_s, 5)]
    trials = []
    for index, (kind, arg) in enumerate(plan, start=1):
        run = measure(
            lambda index=index, kind=kind, arg=arg: _trial(workdir, index, address, kind, arg)
        )
        trial = run.value
        trial.wall_s = run.wall
        trials.append(trial)
        log(f"{index:2d} {trial.kind} {trial.moment_s} -> {trial.violations or 'ok'}")
    return trials, clean_s


def _trial(workdir: Path, index: int, address: str, kind: str, arg: object) -> Trial:
    if kind in ("kill", "kill-rerun"):
        return kill_trial(workdir, index, address, arg, rerun=kind == "kill-rerun")
    if kind == "double-sigint":
        return double_sigint_trial(workdir, index, address)
    if kind == "two-drivers":
        return two_drivers_trial(workdir, index, address, arg)
    if kind == "worker-kill":
        return worker_kill_trial(workdir, index, address, arg)
    return poller_trial(workdir, index, address)


def _phase(trial: Trial) -> str:
    if trial.store_before == "absent":
        return "before the store existed (Python starting, the store being built)"
    if trial.finished_before == 0:
        return "store whole, no cell logged yet"
    if trial.finished_before < CELLS:
        return "while cells ran and were logged"
    return "after the last cell was logged (table, parent run, exit)"


def started(command: str | None = None) -> Bench:
    """The header's record of this run, from now (the Ray instance keeps the CPUs busy)."""
    return Bench(libraries=("mlflow", "ray"), busy=os.cpu_count() or 1, command=command)


def write_results(trials: list[Trial], clean_s: float, bench: Bench, out: Path) -> None:
    """``out``: the header of ``bench``, then every trial and its outcome."""
    import ray

    ok = sum(not t.violations for t in trials)
    ray_cpus = ray.cluster_resources().get("CPU", 0)
    lines = [
        "Trials in `bench/bench_faults.py`. Every trial drives real `python -m sweeper` "
        f"processes on a toy sweep of {CELLS} cells ({SLEEP_S} s each, sent in batches of "
        f"seeds, the table flushed every {BATCH} cells) joining one Ray instance of "
        f"{ray_cpus:g} CPUs; faults are sent to the driver's process group (a worker-kill "
        "to the worker running a batch). An uninterrupted run on a new store took "
        f"{clean_s:.1f} s (imports, store creation, cells); kill moments are uniform over it.",
        "",
        f"**{ok} of {len(trials)} trials ended with exactly one current FINISHED run per "
        "cell, nothing RUNNING and the table's rows equal to the runs.**",
        "",
        "| # | fault | moment (s) | exit codes | store after the fault | FINISHED before resume "
        "| the resume said | outcome | trial s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for i, t in enumerate(trials, start=1):
        moment = "" if t.moment_s is None else f"{t.moment_s:.2f}"
        notes = "; ".join(t.resume_notes) or "-"
        outcome = "ok" if not t.violations else "**" + "; ".join(t.violations)[:300] + "**"
        lines.append(
            f"| {i} | {t.kind} | {moment} | {json.dumps(t.exit_codes)} | {t.store_before} | "
            f"{t.finished_before} | {notes} | {outcome} | {t.wall_s:.0f} |"
        )
    counts = Counter(_phase(t) for t in trials if t.kind == "kill")
    lines += [
        "",
        f"Where the {counts.total()} kills landed (from the store right after `kill -9`): "
        + ", ".join(f"{k}: {v}" for k, v in counts.items())
        + ". A kill while the store is created leaves no store (it is built under a "
        "temporary name and linked into place when whole); exit code 4 is a driver refused "
        "because another one holds the store.",
    ]
    bench.write(out, "# Fault injection: exactly once under every fault", lines)


def main() -> None:
    import ray

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=30)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", default=str(RESULTS))
    parser.add_argument("--workdir", default=None)
    options = parser.parse_args()
    import tempfile

    bench = started()
    ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
    address = ray.get_runtime_context().gcs_address
    with tempfile.TemporaryDirectory() as tmp:
        workdir = Path(options.workdir or tmp)
        trials, clean_s = run_trials(workdir, address, options.kills, options.seed)
    write_results(trials, clean_s, bench, Path(options.out))
    ray.shutdown()


if __name__ == "__main__":
    main()
