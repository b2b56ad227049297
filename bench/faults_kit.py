"""What the fault trials share (bench/bench_faults.py, bench/faults_stores.py): the toy
sweep they drive, spawning ``python -m sweeper`` in its own process group, and the check of
"exactly once" a trial ends with (:func:`violations`)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

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


def env() -> dict[str, str]:
    drop = ("MLFLOW_TRACKING_URI", "RAY_ADDRESS", "HYDRA_FULL_ERROR")
    return {k: v for k, v in os.environ.items() if k not in drop}


def spawn(
    args: list[str], cwd: Path, tag: str, host: str | None = None, extra: dict | None = None
) -> subprocess.Popen:
    """``python -m sweeper ARGS`` in its own process group, output into ``cwd/tag.out``;
    ``host``: under that host name (a UTS namespace, as root), a driver of another host;
    ``extra``: variables added to its environment."""
    log = open(cwd / f"{tag}.out", "w")  # noqa: SIM115 - closed with the process
    command = [sys.executable, "-u", "-m", "sweeper", *args]
    if host is not None:
        command = ["unshare", "-u", "sh", "-c", f'hostname {host} && exec "$@"', "sh", *command]
    return subprocess.Popen(
        command,
        cwd=cwd,
        env={**env(), **(extra or {})},
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


def violations(uri: str, cells: int = CELLS, args: list[str] | None = None) -> list[str]:
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
    bad += _disagreements(tracker, uri, ARGS if args is None else args)
    return bad


def _disagreements(tracker, uri: str, args: list[str]) -> list[str]:
    """The resume index, the dry run, the report and ``sweeper.load`` must pick the same run
    of every cell (issues #26 and #38: one reader, sweeper/store/reader.py)."""
    import sweeper
    from sweeper.report.load import load_experiment
    from sweeper.store.index import read_index

    index = {k: e.run_id for k, e in read_index(tracker).finished.items()}
    views = {
        "the dry run": _dry_run_view(uri, args),
        "the report": _finished(load_experiment(NAME, uri).cells),
        "sweeper.load": _finished(sweeper.load(NAME, tracking_uri=uri).cells),
    }
    bad = []
    for name, view in views.items():
        differ = {k for k in index.keys() | view.keys() if index.get(k) != view.get(k)}
        if differ:
            bad.append(f"{name} and the resume index differ on {len(differ)} cell(s)")
    return bad


def _finished(cells) -> dict[str, str]:
    finished = cells[cells["status"] == "FINISHED"]
    return dict(zip(finished["cell_key"], finished["run_id"], strict=True))


def _dry_run_view(uri: str, args: list[str]) -> dict[str, str]:
    """cell key -> run of the cells the dry run of the sweep's command line ``args`` counts
    done (in process: the grid composed as the command line composes it)."""
    from sweeper.api import hydra_app
    from sweeper.configs import compose
    from sweeper.dryrun import _finished_runs
    from sweeper.grid import expand

    with hydra_app([]):
        overrides = [*(a for a in args if not a.startswith("tracking.uri=")), f"tracking.uri={uri}"]
        cells = expand(compose(overrides), compose, overrides)
    return {k: c.run_id for k, c in _finished_runs(uri, NAME, cells).items()}


def resume(
    args: list[str],
    cwd: Path,
    trial: Trial,
    uri: str,
    tag: str = "resume",
    check: bool = True,
    cells: int = CELLS,
) -> None:
    """Run ``args`` to the end; record its notes, exit code and (``check``) violations."""
    code = finish(spawn(args, cwd, tag))
    trial.exit_codes.append(code)
    out = (cwd / f"{tag}.out").read_text()
    said = ("set to KILLED", "rebuilt", "re-tagged", "retracted")
    trial.resume_notes += [
        line.strip() for line in out.splitlines() if any(word in line for word in said)
    ]
    if code != 0:
        trial.violations.append(f"the resume exited {code}: {out[-400:]}")
    if check:
        trial.violations += violations(uri, cells, args)


def wait_for(path: Path, text: str, proc: subprocess.Popen, limit_s: float = 120) -> bool:
    """Wait until the output file ``path`` holds ``text`` (False: the process ended first,
    or ``limit_s`` passed)."""
    deadline = time.time() + limit_s
    while time.time() < deadline and proc.poll() is None:
        if path.exists() and text in path.read_text(errors="replace"):
            return True
        time.sleep(0.05)
    return False


def parents(uri: str) -> list[str]:
    """The statuses of the experiment's sweep runs (none: no store, or no sweep yet)."""
    from mlflow import MlflowClient

    if uri.startswith("sqlite:///") and not Path(uri.removeprefix("sqlite:///")).exists():
        return []  # never create a store to look into it
    try:
        client = MlflowClient(uri)
        experiment = client.get_experiment_by_name(NAME)
        if experiment is None:
            return []
        runs = client.search_runs([experiment.experiment_id], "tags.role = 'sweep'")
    except Exception:  # noqa: BLE001 - an absent or half-built store: no sweep
        return []
    return [r.info.status for r in runs]


def store(workdir: Path, index: int, address: str) -> tuple[Path, str, list[str]]:
    """A trial's directory: its store's path and URI, and the sweep's command line."""
    cwd = workdir / f"trial{index:02d}"
    cwd.mkdir(parents=True, exist_ok=True)
    db = cwd / "mlflow.db"
    return (
        db,
        f"sqlite:///{db}",
        [*ARGS, f"tracking.uri=sqlite:///{db}", f"launcher.address={address}"],
    )
