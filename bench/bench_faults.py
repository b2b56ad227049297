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
  sweep ends by itself (no resume);
- ``signal``: SIGTERM while Python starts, SIGTERM and two SIGINTs while an embedded Ray
  starts, SIGTERM once every cell is recorded (the last batch, the table, the parent's end):
  each must exit 130 with the resume line and leave no sweep RUNNING (issue #41, item 3);
- the trials of stores and ways into them (bench/faults_stores.py, issue #41): a driver
  through a server's API stalled past its lease, a sqlite file used directly and through a
  server, two drivers on a new experiment of a server, a server or a PostgreSQL that does
  not answer, PostgreSQL's advisory lock against a server's lease.

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
import subprocess
import sys
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import faults_stores
import numpy as np
from faults_kit import (
    BATCH,
    CELLS,
    SLEEP_S,
    Trial,
    env,
    finish,
    finished_runs,
    parents,
    resume,
    spawn,
    store,
    store_state,
    violations,
    wait_finished,
    wait_for,
)
from harness import Bench, measure

RESULTS = Path(__file__).resolve().parent / "results" / "faults.md"


def clean_run(workdir: Path, address: str) -> float:
    """Wall time of one uninterrupted run on a new store: the span kill moments cover."""
    db, uri, args = store(workdir, 0, address)
    run = measure(lambda: finish(spawn(args, db.parent, "clean")))
    if run.value != 0 or violations(uri):
        raise RuntimeError(f"the clean run failed: {(db.parent / 'clean.out').read_text()}")
    return run.wall


def kill_trial(workdir: Path, index: int, address: str, moment: float, rerun: bool) -> Trial:
    db, uri, args = store(workdir, index, address)
    trial = Trial("kill-rerun" if rerun else "kill", moment)
    if rerun:  # a complete store first, then kill rerun=true
        finish(spawn(args, db.parent, "first"))
    proc = spawn([*args, "rerun=true"] if rerun else args, db.parent, "killed")
    time.sleep(moment)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    trial.finished_before, trial.store_before = finished_runs(db), store_state(db)
    resume(args, db.parent, trial, uri)
    return trial


def double_sigint_trial(workdir: Path, index: int, address: str) -> Trial:
    db, uri, args = store(workdir, index, address)
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
    resume(args, db.parent, trial, uri)
    return trial


def two_drivers_trial(workdir: Path, index: int, address: str, variant: str) -> Trial:
    """Two drivers at once: ``interrupted`` (the same sweep, on a store killed after 3
    cells), ``new`` (the same sweep on a new store), ``overlap`` (seeds=16 and seeds=8)."""
    db, uri, args = store(workdir, index, address)
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
        resume(second, db.parent, trial, uri, "resume-b", check=False)
    resume(args, db.parent, trial, uri)
    return trial


def poller_trial(workdir: Path, index: int, address: str) -> Trial:
    db, uri, args = store(workdir, index, address)
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
        env={**env(), "MLFLOW_TRACKING_URI": uri},
        stdout=open(db.parent / "poller.out", "w"),  # noqa: SIM115
        stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    time.sleep(1.0)  # the poller is importing MLflow while the driver starts
    driven = spawn(args, db.parent, "driven")
    return _to_the_end(
        driven, db, uri, trial, "beside a poller", then=lambda: finish(poller, 60), args=args
    )


def _to_the_end(
    proc, db: Path, uri: str, trial: Trial, what: str, then=None, args: list[str] | None = None
) -> Trial:
    """The driver ``proc`` (output ``driven.out``, the command line ``args``) run to its end:
    it must exit 0 and leave the store exactly once (``then``: what to wait for after it)."""
    code = finish(proc)
    trial.exit_codes.append(code)
    if then is not None:
        then()
    trial.store_before = store_state(db)
    if code != 0:
        out = (db.parent / "driven.out").read_text()
        trial.violations.append(f"the driver exited {code} {what}: {out[-400:]}")
    trial.violations += violations(uri, args=args)
    return trial


def worker_kill_trial(workdir: Path, index: int, address: str, moment: float) -> Trial:
    """``kill -9`` of the worker running a batch, ``moment`` seconds after its first cell
    started; the driver runs on to the end."""
    db, uri, args = store(workdir, index, address)
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
    return _to_the_end(
        proc, db, uri, trial, "after a worker died", args=[*args, f"+toy.pid_dir={pids}"]
    )


SIGNALS = {
    "python": "SIGTERM while Python starts",
    "ray-start": "SIGTERM while Ray starts",
    "ray-start-sigint": "2 x SIGINT while Ray starts",
    "last-batch": "SIGTERM after the last cell",
}
"""The moments of the signal trials (issue #41, item 3): each must end with exit status 130,
the resume line, no parent run left RUNNING, and the resume exactly once."""
RESUME_LINES = ("Resume (only the missing cells run)", "Run the same command again")


def signal_trial(workdir: Path, index: int, address: str, moment: str) -> Trial:
    """A signal at ``moment`` (:data:`SIGNALS`); while Ray starts means an embedded Ray."""
    db, uri, args = store(workdir, index, address)
    trial = Trial(SIGNALS[moment])
    driven = args
    if moment.startswith("ray-start"):
        driven = [a for a in args if not a.startswith("launcher.address=")]
        driven.append("launcher.num_cpus=1")
    proc = spawn(driven, db.parent, "signalled")
    out = db.parent / "signalled.out"
    landed = _signal(moment, proc, out, db)
    code = finish(proc)
    with suppress(ProcessLookupError):  # an embedded Ray's processes left behind, if any
        os.killpg(proc.pid, signal.SIGKILL)
    trial.exit_codes.append(code)
    text = out.read_text(errors="replace")
    if moment.startswith("ray-start") and "to run (ray launcher)" in text:
        landed += " (after Ray had started)"
    statuses = parents(uri)
    trial.resume_notes.append(f"the signal came {landed}; sweep runs: {statuses or 'none'}")
    trial.finished_before, trial.store_before = finished_runs(db), store_state(db)
    if code != 130 and not landed.startswith("after the driver"):
        trial.violations.append(f"exit status {code}, not 130: {text[-400:]}")
    if code == 130 and not any(line in text for line in RESUME_LINES):
        trial.violations.append(f"no resume line: {text[-400:]}")
    if "Traceback" in text or "RUNNING" in statuses:
        trial.violations.append(f"a traceback, or a sweep left RUNNING ({statuses})")
    resume(args, db.parent, trial, uri)
    return trial


def _signal(moment: str, proc: subprocess.Popen, out: Path, db: Path) -> str:
    """Send the trial's signal at its moment; where it landed, in words."""
    if moment == "python":
        time.sleep(0.2)
        os.kill(proc.pid, signal.SIGTERM)
        return "0.2 s after the start"
    if moment == "last-batch":
        while finished_runs(db) < CELLS and proc.poll() is None:
            time.sleep(0.02)
        if proc.poll() is not None:
            return "after the driver exited"
        os.kill(proc.pid, signal.SIGTERM)
        return "once every cell was recorded"
    if not wait_for(out, "results go to", proc):
        return "after the driver exited"
    if moment == "ray-start":
        time.sleep(0.5)
        os.kill(proc.pid, signal.SIGTERM)
        return "0.5 s into Ray's start"
    time.sleep(1.5)
    os.killpg(proc.pid, signal.SIGINT)
    time.sleep(0.02)
    os.killpg(proc.pid, signal.SIGINT)
    return "1.5 s into Ray's start"


STORES = ("sqlite-and-server", "new-experiment", "silent-server", "unreachable-postgresql",
          "silent-postgresql", "advisory-vs-lease", "api-stall")  # fmt: skip
"""The trials of stores and ways into them (bench/faults_stores.py)."""


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
    plan += [("signal", moment) for moment in SIGNALS]
    plan += [("store", kind) for kind in STORES]
    trials = []
    with faults_stores.postgresql() as (cluster, _):
        for index, (kind, arg) in enumerate(plan, start=1):
            run = measure(
                lambda index=index, kind=kind, arg=arg: _trial(
                    workdir, index, address, kind, arg, cluster
                )
            )
            trial = run.value
            trial.wall_s = run.wall
            trials.append(trial)
            log(f"{index:2d} {trial.kind} {trial.moment_s} -> {trial.violations or 'ok'}")
    return trials, clean_s


def _trial(workdir: Path, index: int, address: str, kind: str, arg: object, cluster: str) -> Trial:
    if kind in ("kill", "kill-rerun"):
        return kill_trial(workdir, index, address, arg, rerun=kind == "kill-rerun")
    if kind == "double-sigint":
        return double_sigint_trial(workdir, index, address)
    if kind == "two-drivers":
        return two_drivers_trial(workdir, index, address, arg)
    if kind == "signal":
        return signal_trial(workdir, index, address, arg)
    if kind == "store":
        return _store_trial(workdir, index, address, arg, cluster)
    if kind == "worker-kill":
        return worker_kill_trial(workdir, index, address, arg)
    return poller_trial(workdir, index, address)


def _store_trial(workdir: Path, index: int, address: str, kind: str, cluster: str) -> Trial:
    if kind == "api-stall":
        return faults_stores.api_stall_trial(workdir, index)
    if kind in ("silent-postgresql", "advisory-vs-lease"):
        trial = getattr(faults_stores, f"{kind.replace('-', '_')}_trial")
        return trial(workdir, index, address, cluster)
    return getattr(faults_stores, f"{kind.replace('-', '_')}_trial")(workdir, index, address)


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
