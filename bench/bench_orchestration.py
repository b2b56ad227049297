"""Orchestration overhead: how many trivial cells per second the driver dispatches and logs.

    .venv/bin/python bench/bench_orchestration.py [--cells 1000] [--sample 8]

A sweep of ``--cells`` toy cells (``sweeper.toy.toy_cell``: microseconds of work, a
``horizon``-round curve downsampled to 500 points, one ``cell.npz`` artifact each) runs on
embedded Ray into a fresh sqlite store, exactly as ``python -m sweeper`` would. Measured:

1. the full sweep (Ray dispatch + one MLflow run per cell + periodic cells.parquet), in
   cells per second: the orchestration overhead per cell;
2. the same cells through the Ray launcher alone (no MLflow), to split that overhead;
3. logging alone: the tracking calls per cell, the artifact written in place vs through
   ``MlflowClient.log_artifact``;
4. the resume check of the same command started again (every cell skipped): the lean
   index (the sweep's cells.parquet plus a search of runs after its last flush) vs one
   search of every cell run.

Then, for every experiment of conf/exp/, ``--sample`` of its full-size cells (a fixed
pseudo-random choice) run one by one in this process; their mean time, the logging
overhead and the cell count give the expected wall time of the full experiment on this
machine's 2 cores. The numbers depend on the machine's load; they are written to ``--out``.
"""

from __future__ import annotations

import argparse
import io
import os
import platform
import statistics
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
from hydra import compose, initialize_config_dir

from sweeper.cells import Cell
from sweeper.execute import execute
from sweeper.grid import expand
from sweeper.launch import init_ray, launch
from sweeper.paths import CONF_DIR
from sweeper.store.cellruns import log_cell
from sweeper.store.index import read_index
from sweeper.store.tracking import Tracker
from sweeper.sweep import run_sweep

PAPER_LINUCB_CELL_S = 1.0  # a paper-scale LinUCB cell (T=14000, K=120, d=25), issue #3's bound


def _compose(overrides: list[str]):
    return compose(config_name="config", overrides=list(overrides))


def _timed(fn, *args, **kwargs):
    started = time.perf_counter()
    value = fn(*args, **kwargs)
    return value, time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=1000)
    parser.add_argument("--horizon", type=int, default=2000)
    parser.add_argument("--log-sample", type=int, default=200)
    parser.add_argument("--sample", type=int, default=8, help="cells timed per experiment")
    parser.add_argument("--experiments", nargs="*", default=None, help="default: all")
    parser.add_argument("--out", default="bench/results/orchestration.md")
    args = parser.parse_args()
    load_before = os.getloadavg()[0]

    work = Path(tempfile.mkdtemp(prefix="bench-orchestration-"))
    uri = f"sqlite:///{work}/mlflow.db"
    overrides = [
        "task=toy",
        f"horizon={args.horizon}",
        f"seeds={args.cells}",
        "experiment.name=bench",
        f"tracking.uri={uri}",
        "launcher.num_cpus=2",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        cfg = _compose(overrides)
        cells = expand(cfg, _compose, overrides)
        init_ray(cfg.launcher)

        # 2. Ray alone: the same cells, no tracking.
        def _ray_only() -> int:
            return sum(e.kind == "finished" for e in launch(cells, cfg.launcher))

        _ray_only()  # warm the worker pool
        finished, ray_s = _timed(_ray_only)
        assert finished == len(cells)

        # 1. The full sweep, as the command line runs it.
        sweep, _ = _timed(run_sweep, cfg, _compose, overrides, out=io.StringIO())
        assert sweep.ok and sweep.finished == len(cells)

        # 4. Resume: the same command again skips every cell.
        again, resume_s = _timed(run_sweep, cfg, _compose, overrides, out=io.StringIO())
        assert again.skipped == len(cells) and again.finished == 0
        tracker = Tracker(uri, "bench")
        lean, lean_s = _timed(read_index, tracker)
        assert len(lean.finished) == len(cells)
        everything, full_s = _timed(tracker.runs, "tags.cell_key != ''")

    # 3. Logging alone, per cell, on a fresh store: artifact in place vs log_artifact.
    sample = cells[: args.log_sample]
    outcomes = [execute(c.function, c.config) for c in sample]
    per_cell_direct = _log_rate(work / "direct.db", sample, outcomes, in_place=True)
    per_cell_client = _log_rate(work / "client.db", sample, outcomes, in_place=False)
    cell_s = np.median([o.wall_s for o in outcomes])

    overhead = 1.0 / sweep.cells_per_s
    lines = [
        "# Orchestration overhead",
        "",
        f"Measured {datetime.now(UTC):%Y-%m-%d %H:%M} UTC by "
        "`bench/bench_orchestration.py` on this machine "
        f"({platform.machine()}, 2 cores, Python {platform.python_version()}); load average "
        f"{load_before:.2f} when it started (well below 2: it had the machine to itself; near "
        "or above 2: other work shared the cores and inflated the times).",
        "",
        f"Sweep: {len(cells)} toy cells (`sweeper.toy.toy_cell`, {cell_s * 1e3:.2f} ms of work "
        f"each, a {args.horizon}-round regret curve logged as 500 points, one `cell.npz`), "
        "embedded Ray with 2 CPUs, a fresh sqlite MLflow store.",
        "",
        "| what | result |",
        "|---|---|",
        f"| full sweep: Ray + one MLflow run per cell + cells.parquet every 50 cells | "
        f"**{sweep.cells_per_s:.1f} cells/s** ({sweep.dispatch_s:.1f} s for {len(cells)} "
        f"cells; {overhead * 1e3:.0f} ms per cell) |",
        f"| Ray launcher alone (no tracking) | {len(cells) / ray_s:.1f} cells/s "
        f"({ray_s / len(cells) * 1e3:.1f} ms per cell) |",
        f"| logging one cell (4 tracking calls; artifact written in place) | "
        f"{per_cell_direct * 1e3:.0f} ms per cell ({1 / per_cell_direct:.1f} cells/s) |",
        f"| logging one cell with `MlflowClient.log_artifact` instead | "
        f"{per_cell_client * 1e3:.0f} ms per cell ({1 / per_cell_client:.1f} cells/s) |",
        f"| resume: the same command again, {len(cells)} cells skipped (whole command) | "
        f"{resume_s:.1f} s |",
        f"| resume index: sweep tables + runs after the last flush | "
        f"{lean_s:.2f} s ({lean.searched_runs} runs searched, {lean.tables} table) |",
        f"| resume index the naive way: search every cell run | {full_s:.2f} s "
        f"({len(everything)} runs) |",
        "",
        f"Overhead per cell: {overhead * 1e3:.0f} ms, i.e. "
        f"{overhead / PAPER_LINUCB_CELL_S:.0%} of a paper-scale LinUCB cell "
        f"(~{PAPER_LINUCB_CELL_S:.0f} s) and less of any GLM cell; the driver logs while "
        "Ray computes, so with real cells the overhead overlaps the work and only bounds "
        f"throughput at about {sweep.cells_per_s:.0f} cells/s.",
        "",
    ]
    lines += _server_rates(work, sample, outcomes)
    lines += _experiment_estimates(args, per_cell_direct)
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines))
    print("\n".join(lines))


def _experiment_estimates(args, overhead_s: float) -> list[str]:
    """Expected full-size wall time of every experiment, from a sample of its cells."""
    from sweeper.grid import group_options
    from sweeper.sweep import validate

    names = args.experiments or group_options("exp")
    rows = [
        "## Experiments at full size on this machine",
        "",
        f"Each experiment's mean cell time is measured on {args.sample} of its cells (the same "
        "pseudo-random choice every run), one at a time in one process; the expected wall "
        f"time is cells x (mean cell time + {overhead_s * 1e3:.0f} ms of driver logging) / 2 "
        "cores. A loaded machine inflates both.",
        "",
        "| experiment | cells | sampled cells: mean s (min-max) | expected wall time |",
        "|---|---|---|---|",
    ]
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for name in names:
            overrides = [f"+exp={name}"]
            try:
                cells = expand(_compose(overrides), _compose, overrides)
                sample = sorted(cells, key=lambda c: c.key)[: args.sample]
                validate(sample)
            except Exception as err:  # a tuner, an algorithm or a data set that is missing
                reason = str(err).splitlines()[0][:160]
                rows.append(f"| {name} | ? | not measurable here: {reason} | ? |")
                continue
            seconds = []
            for cell in sample:
                outcome = execute(cell.function, cell.config)
                if outcome.status != "FINISHED":
                    raise RuntimeError(f"{name}: {cell.label} failed: {outcome.error}")
                seconds.append(outcome.wall_s)
            mean = statistics.fmean(seconds)
            wall = len(cells) * (mean + overhead_s) / 2
            rows.append(
                f"| {name} | {len(cells)} | {mean:.2f} ({min(seconds):.2f}-{max(seconds):.2f}) "
                f"| {_duration(wall)} |"
            )
            print(rows[-1], flush=True)
    return [*rows, ""]


def _duration(seconds: float) -> str:
    minutes = seconds / 60
    return f"{minutes / 60:.1f} h" if minutes >= 90 else f"{minutes:.0f} min"


def _server_rates(work: Path, cells: list[Cell], outcomes: list) -> list[str]:
    """Cells per second logged to an ``mlflow server`` on the loopback, by 1 and 4 writers."""
    import os
    import signal
    import socket
    import subprocess
    import sys
    import urllib.request

    from sweeper.sweep import _CellLogger

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    uri = f"http://127.0.0.1:{port}"
    server = subprocess.Popen(
        [sys.executable, "-m", "mlflow", "server", "--host", "127.0.0.1", "--port", str(port),
         "--backend-store-uri", f"sqlite:///{work}/server.db",
         "--artifacts-destination", str(work / "server-artifacts")],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    rows = []
    try:
        deadline = time.time() + 180
        while True:
            try:
                urllib.request.urlopen(f"{uri}/health", timeout=2)
                break
            except OSError:
                if server.poll() is not None or time.time() > deadline:
                    return ["(mlflow server did not start: no server figures)", ""]
                time.sleep(0.5)
        warm = Tracker(uri, "warm-up")
        for cell, outcome in list(zip(cells, outcomes, strict=True))[:3]:
            log_cell(warm, cell, outcome, None)
        for threads in (1, 4):
            tracker = Tracker(uri, f"server-{threads}")
            logger = _CellLogger(tracker, None, threads)
            started = time.perf_counter()
            for cell, outcome in zip(cells, outcomes, strict=True):
                logger.submit(cell, outcome, [])
            logger.collect(everything=True)
            logger.close()
            rate = len(cells) / (time.perf_counter() - started)
            rows.append(f"| {threads} | {rate:.1f} cells/s ({1 / rate * 1e3:.0f} ms per cell) |")
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=30)
    return [
        "## Logging to a tracking server",
        "",
        f"The same {len(cells)} cells logged to an `mlflow server` (sqlite backend, artifacts "
        "served through it) on this machine's loopback, as the driver on a cluster logs to the "
        "head's server: each tracking call is a round trip, so parallel writers "
        "(`tracking.log_threads`, 4 by default for a server) pay off.",
        "",
        "| writers | logged |",
        "|---|---|",
        *rows,
        "",
    ]


def _log_rate(db: Path, cells: list[Cell], outcomes: list, in_place: bool) -> float:
    tracker = Tracker(f"sqlite:///{db}", "logging")
    if not in_place:
        tracker.artifact_dir = lambda run_id, artifact_uri=None: None  # type: ignore[method-assign]
    times = []
    for cell, outcome in zip(cells, outcomes, strict=True):
        _, seconds = _timed(log_cell, tracker, cell, outcome, None)
        times.append(seconds)
    return statistics.median(times)


if __name__ == "__main__":
    main()
