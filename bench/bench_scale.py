"""The driver at scale (issue #15): cells per second into each store, the driver's peak
memory against the number of cells, and the resume check and report times.

    .venv/bin/python bench/bench_scale.py [--cells 2000] [--memory 1000,5000] [--repeats 3]

Each measurement runs ``python -m sweeper task=toy horizon=2000 seeds=N`` exactly as a user
would (a toy cell takes microseconds and returns a 2000-step curve, downsampled to 500
points, and a ``cell.npz``), on embedded Ray, into:

- the embedded sqlite store (the default), directly and through MLflow's API;
- an ``mlflow server`` on PostgreSQL (``sweeper/servers.py`` starts both on 127.0.0.1),
  directly and through the server's API with 4 and 16 writers.

Measured: cells/s of the whole sweep (Ray start excluded: the driver's own rate from its
summary line; for direct writes the median of ``--repeats`` sweeps), the driver process's
peak resident memory (the kernel's high-water mark, VmHWM; the median of ``--repeats``
sweeps) at each ``--memory`` size, the resume
check of the same command started again (every cell skipped), the report of the
experiment, and a sweep of ``--cells`` into the server on PostgreSQL during which the
server, then PostgreSQL, restart (is each cell recorded once?). Written to
``bench/results/scale.md`` after the header of bench/harness.py. The issue's targets:
>= 200 cells/s into PostgreSQL, >= 50 into sqlite, memory flat within 10% from 1,000 to
20,000 cells, resume of 50,000 cells < 1 s, report of 10,000 cells < 30 s.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import sqlalchemy as sa
from harness import Bench, measure

from sweeper.servers import (
    finished_runs,
    free_port,
    mlflow_restart,
    mlflow_server,
    pg_restart,
    pg_start,
    pg_stop,
    postgres,
    start_mlflow_server,
    stop,
)

ROOT = Path(__file__).resolve().parent.parent
RATE = re.compile(r"in [^(]*\(([\d.]+)s; ([\d.]+) cells/s\)")


RESUME = re.compile(r"resume check ([\d.]+) s")


def sweep(uri: str, cells: int, name: str, cwd: Path, *extra: str) -> dict[str, float]:
    """Run the toy sweep; its wall time, the driver's own cells/s, its resume check and
    peak RSS (MB)."""
    command = [sys.executable, "-m", "sweeper", "task=toy", "horizon=2000", f"seeds={cells}",
               f"tracking.uri={uri}", f"experiment.name={name}",
               f"hydra.run.dir={cwd}/hydra", *extra]  # fmt: skip
    run = measure(lambda: watched(command, cwd))
    code, output, samples, peak = run.value
    samples = [m for m in samples if m] or [0]
    late = statistics.median(samples[len(samples) // 2 :])
    found = RATE.search(output)
    if code != 0 or not found:
        raise RuntimeError(f"the sweep failed ({code}):\n{output[-2000:]}")
    resume = RESUME.search(output)
    return {"wall_s": run.wall, "rate": float(found.group(2)), "sweep_s": float(found.group(1)),
            "rss_mb": peak / 2**20, "late_rss_mb": late / 2**20,
            "resume_s": float(resume.group(1)) if resume else float("nan")}  # fmt: skip


def watched(command: list[str], cwd: Path) -> tuple[int, str, list[int], int]:
    """Run ``command`` to its end, sampling its resident memory every 0.2 s: its exit
    status, output, the samples and its peak (bytes)."""
    process = subprocess.Popen(command, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               text=True)  # fmt: skip
    samples, peak = [], 0
    while process.poll() is None:
        resident, high = memory_of(process.pid)
        samples.append(resident)
        peak = max(peak, high)
        time.sleep(0.2)
    return process.returncode, process.stdout.read(), samples, peak


def _peak(runs: list[dict[str, float]]) -> float:
    return statistics.median(r["rss_mb"] for r in runs)


def memory_of(pid: int) -> tuple[int, int]:
    """A process's resident memory and its peak so far (the kernel's high-water mark, which
    a sampler cannot miss), in bytes (Linux /proc); zeros once it is gone."""
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return 0, 0
    found = [re.search(rf"{field}:\s+(\d+) kB", status) for field in ("VmRSS", "VmHWM")]
    return tuple(int(f.group(1)) * 1024 if f else 0 for f in found)


def restarts(cells: int, work: Path) -> dict[str, float]:
    """A ``cells``-cell sweep into a server on PostgreSQL that restarts the server (killed,
    started again 3 s later) at a third of the cells and PostgreSQL at two thirds; the
    sweep's rate, the cells recorded when each restart began, FINISHED runs per cell."""
    database = pg_start(work / "pg-faults", free_port())
    port = free_port()
    server, uri = start_mlflow_server(database, work / "art-faults", port=port)
    command = [sys.executable, "-m", "sweeper", "task=toy", "horizon=2000", f"seeds={cells}",
               f"tracking.uri={uri}", f"tracking.database={database}",
               f"tracking.artifacts_destination={work / 'art-faults'}",
               "experiment.name=faults", f"hydra.run.dir={work}/hydra"]  # fmt: skip
    process = subprocess.Popen(command, cwd=work, stdout=subprocess.PIPE,
                               stderr=subprocess.STDOUT, text=True)  # fmt: skip
    at = []
    try:
        for fraction, restart in ((1 / 3, "server"), (2 / 3, "postgresql")):
            while finished_runs(database) < fraction * cells and process.poll() is None:
                time.sleep(0.2)
            at.append(finished_runs(database))
            if restart == "server":
                server = mlflow_restart(server, database, work / "art-faults", port)
            else:
                pg_restart(work / "pg-faults", database)
        output, _ = process.communicate(timeout=1800)
        engine = sa.create_engine(database)
        with engine.connect() as connection:
            per_cell = connection.execute(sa.text(
                "select count(*) from runs r join tags t on t.run_uuid = r.run_uuid "
                "and t.key = 'cell_key' where r.status = 'FINISHED' group by t.value"
            )).scalars().all()  # fmt: skip
            running = connection.execute(
                sa.text("select count(*) from runs where status = 'RUNNING'")
            ).scalar()
        engine.dispose()
    finally:
        if process.poll() is None:
            process.kill()
        stop(server)
        pg_stop(work / "pg-faults")
    found = RATE.search(output)
    return {"rate": float(found.group(2)) if found else float("nan"),
            "exit": process.returncode, "at": at, "cells": len(per_cell),
            "once": sum(1 for n in per_cell if n == 1), "running": int(running),
            "waited": output.count("the MLflow store does not answer"),
            "failed": next((line for line in output.splitlines()
                            if line.startswith("The MLflow store failed")), "")}  # fmt: skip


def fsync_cost(cells: int, repeats: int, work: Path) -> list[tuple[str, float]]:
    """Direct writes of ``cells`` toy cells into the server on PostgreSQL with ``fsync`` on
    (how sweeper.servers runs it) and off, alternated ``repeats`` times in one cluster
    (``ALTER SYSTEM`` and a reload, so both see the same machine and load): (setting, cells/s)
    of each sweep, in the order run."""
    rates = []
    with postgres(work / "pg-fsync") as backend, mlflow_server(backend, work / "art-fs") as uri:
        engine = sa.create_engine(backend, isolation_level="AUTOCOMMIT")
        direct = [f"tracking.database={backend}", f"tracking.artifacts_destination={work}/art-fs"]
        for i in range(repeats):
            for setting in ("on", "off"):
                with engine.connect() as connection:
                    connection.execute(sa.text(f"alter system set fsync = {setting}"))
                    connection.execute(sa.text("select pg_reload_conf()"))
                    time.sleep(1)
                    shown = connection.execute(sa.text("show fsync")).scalar()
                assert shown == setting, f"fsync is {shown}, not {setting}"
                run = sweep(uri, cells, f"fsync{setting}{i}", work, *direct)
                rates.append((setting, run["rate"]))
        engine.dispose()
    return rates


def fsync_text(cells: int, rates: list[tuple[str, float]]) -> list[str]:
    on = [r for s, r in rates if s == "on"]
    off = [r for s, r in rates if s == "off"]
    ratio = statistics.median(on) / statistics.median(off)
    return [
        f"Direct writes of {cells} toy cells into `mlflow server` on PostgreSQL, `fsync` on "
        "(sweeper.servers' setting) and off, alternated in one cluster (ALTER SYSTEM and a "
        "reload), the driver's own cells/s:",
        "",
        "| fsync | cells/s (median) | each sweep, in order |",
        "|---|---|---|",
        f"| on | {statistics.median(on):.1f} | {', '.join(f'{r:.0f}' for r in on)} |",
        f"| off | {statistics.median(off):.1f} | {', '.join(f'{r:.0f}' for r in off)} |",
        "",
        f"fsync on / off: {ratio:.2f}x the rate.",
    ]


def report_time(uri: str, name: str, cwd: Path) -> float:
    """Wall seconds of ``python -m sweeper.report`` on the experiment."""
    command = [sys.executable, "-m", "sweeper.report", name, "--tracking-uri", uri,
               "--out", str(cwd / f"report-{name}")]  # fmt: skip
    return measure(lambda: subprocess.run(command, cwd=cwd, check=True, capture_output=True)).wall


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--cells", type=int, default=10_000, help="cells per direct store")
    parser.add_argument("--api-cells", type=int, default=1000, help="cells through the API")
    parser.add_argument("--memory", default="1000,5000,20000", help="sizes for memory")
    parser.add_argument("--resume", type=int, default=50_000, help="cells of the resume check")
    parser.add_argument("--repeats", type=int, default=3, help="sweeps per direct-writes rate")
    parser.add_argument("--out", type=Path, default=ROOT / "bench" / "results" / "scale.md")
    parser.add_argument("--fsync", action="store_true",
                        help="only fsync's cost (bench/results/scale_fsync.md)")  # fmt: skip
    args = parser.parse_args()
    bench = Bench(libraries=("mlflow", "ray", "sqlalchemy", "psycopg"), busy=os.cpu_count() or 1)
    if args.fsync:
        with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as tmp:
            Path(tmp).chmod(0o755)  # PostgreSQL's user must reach its directory inside
            lines = fsync_text(args.cells, fsync_cost(args.cells, args.repeats, Path(tmp)))
        out = args.out.with_name("scale_fsync.md")
        bench.write(
            out, "# PostgreSQL's fsync and the driver's rate (bench_scale.py --fsync)", lines
        )
        print("\n".join(lines))
        return
    rows, memory, resumes = [], [], []
    with tempfile.TemporaryDirectory(prefix="sweeper-pg-") as tmp:  # postgres reaches it
        work = Path(tmp)
        work.chmod(0o755)  # PostgreSQL's user must reach its directory inside

        def measure(store: str, uri: str, cells: int, *extra: str, repeats: int = 1) -> None:
            """``repeats`` sweeps of ``cells`` into new experiments of the store (the rate
            is their median); the resume check and report of the first."""
            name = f"scale{len(rows)}"
            runs = [sweep(uri, cells, f"{name}r{i}" if i else name, work, *extra)
                    for i in range(repeats)]  # fmt: skip
            again = sweep(uri, cells, name, work, *extra)
            rows.append((store, cells, runs, again, report_time(uri, name, work)))

        direct_store = "embedded sqlite (direct writes)"
        measure(direct_store, f"sqlite:///{work}/local.db", args.cells, repeats=args.repeats)
        measure("embedded sqlite, MLflow API", f"sqlite:///{work}/api.db", args.api_cells,
                "tracking.direct_writes=false")  # fmt: skip
        with postgres(work / "pg") as backend, mlflow_server(backend, work / "art-pg") as uri:
            direct = [f"tracking.database={backend}",
                      f"tracking.artifacts_destination={work / 'art-pg'}"]  # fmt: skip
            measure("mlflow server on PostgreSQL (direct writes)", uri, args.cells, *direct,
                    repeats=args.repeats)  # fmt: skip
            for threads in (4, 16):
                measure(f"mlflow server on PostgreSQL, MLflow API, {threads} writers", uri,
                        args.api_cells, "tracking.direct_writes=false",
                        f"tracking.log_threads={threads}")  # fmt: skip
        faults = restarts(args.cells, work) if args.cells else None
        for size in (int(s) for s in args.memory.split(",")):
            memory.append((size, [sweep(f"sqlite:///{work}/mem{size}-{i}.db", size, "mem", work)
                                  for i in range(args.repeats)]))  # fmt: skip
        uri = f"sqlite:///{work}/resume.db"
        sweep(uri, args.resume, "resume", work)
        resumes.append((args.resume, sweep(uri, args.resume, "resume", work)))
    lines = text(args, rows, memory, resumes, faults)
    bench.write(args.out, "# The driver at scale (bench/bench_scale.py)", lines)
    print("\n".join(lines))


def text(args, rows, memory, resumes, faults) -> list[str]:
    lines = [
        "Toy cells (microseconds each, 2000-step curves), run as `python -m sweeper task=toy "
        "horizon=2000 seeds=N` on embedded Ray; cells/s is the driver's own figure (its "
        "summary line: cells recorded over the time from the first dispatch to the last "
        "record, Ray's start excluded); the resume check is the same command started again "
        "(every cell skipped): the driver's `resume check` line (reading the tables and the "
        "runs after their last part, and the cells left), and the whole command (Python, "
        "Hydra, the grid's expansion).",
        "",
        "A direct-writes rate is the median of several sweeps of the same size, each into a "
        "new experiment of the same store (all of them in brackets).",
        "",
        "| store | cells | cells/s | sweep (s) | resume check (s) | resume command (s) | "
        "report (s) | driver peak RSS (MB) |",
        "|---|---|---|---|---|---|---|---|",
    ]  # fmt: skip
    for store, cells, runs, again, report_s in rows:
        rates = sorted(r["rate"] for r in runs)
        rate = f"{statistics.median(rates):.1f}"
        if len(rates) > 1:
            rate += f" ({', '.join(f'{r:.0f}' for r in rates)})"
        first = runs[0]
        lines.append(f"| {store} | {cells} | {rate} | {first['sweep_s']:.0f} | "
                     f"{again['resume_s']:.2f} | {again['wall_s']:.1f} | {report_s:.1f} | "
                     f"{max(r['rss_mb'] for r in runs):.0f} |")  # fmt: skip
    lines += ["", "Driver resident memory by sweep size (embedded sqlite, direct writes), the "
              f"median of {args.repeats} sweeps each (all of them in brackets): its peak (the "
              "kernel's high-water mark, VmHWM), and the median of the samples of the second "
              "half of the command's life (the level it holds while cells are recorded):",
              "", "| cells | peak RSS (MB) | RSS, second half (MB) | cells/s |",
              "|---|---|---|---|"]  # fmt: skip
    for n, runs in memory:
        peaks = sorted(r["rss_mb"] for r in runs)
        late = statistics.median(r["late_rss_mb"] for r in runs)
        rate = statistics.median(r["rate"] for r in runs)
        each = ", ".join(f"{p:.0f}" for p in peaks)
        lines.append(f"| {n} | {_peak(runs):.0f} ({each}) | {late:.0f} | "
                     f"{rate:.1f} |")  # fmt: skip
    if len(memory) > 1:
        (small, low), (large, high) = memory[0], memory[-1]
        growth = _peak(high) / _peak(low) - 1
        worst = max(r["rss_mb"] for r in high) / min(r["rss_mb"] for r in low) - 1
        lines += ["", f"Peak from {small} to {large} cells: {growth:+.1%} (medians; the "
                  f"largest against the smallest peak: {worst:+.1%}); the target is within "
                  "10%."]  # fmt: skip
    lines += ["", "Resume check of a large experiment (embedded sqlite):", "",
              "| cells | resume check (s) | resume command (s) |", "|---|---|---|"]  # fmt: skip
    lines += [f"| {n} | {r['resume_s']:.2f} | {r['wall_s']:.1f} |" for n, r in resumes]
    if faults is not None:
        lines += ["", f"Faults at scale: {args.cells} cells into the server on PostgreSQL; the "
                  "server killed and started again 3 s later once a third of the cells were "
                  "recorded, then PostgreSQL once two thirds were:", "",
                  "| restarts began at (cells recorded) | progress lines saying the wait | "
                  "exit status | cells/s | cells with exactly one FINISHED run | RUNNING runs |",
                  "|---|---|---|---|---|---|",
                  f"| {' and '.join(str(n) for n in faults['at'])} | {faults['waited']} | "
                  f"{faults['exit']} | {faults['rate']:.1f} | {faults['once']} of "
                  f"{faults['cells']} | {faults['running']} |"]  # fmt: skip
        if faults["failed"]:
            lines += ["", f"The sweep stopped: {faults['failed']}"]
    return lines


if __name__ == "__main__":
    main()
