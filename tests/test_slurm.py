"""The Slurm recipe (``sweeper-slurm``, docs/slurm.md) on a real one-host Slurm (slow).

munged, slurmctld and slurmd run as root from a config in a temporary directory, the node at
127.0.0.1 (:mod:`tests.slurm_cluster`); the MLflow server runs on PostgreSQL
(:mod:`sweeper.servers`, as ``make tracking-server`` starts it). The recipe written by
``python -m sweeper.slurm`` is submitted with ``sbatch`` as a user would:

1. ``+exp=smoke`` with MovieLens added to its datasets (12 cells, 6 of them on MovieLens
   100K from ``.cache/datasets``), submitted with ``--submit``: the job COMPLETES, every
   cell FINISHED once, the driver on the Ray head the recipe started inside the job;
2. a longer sweep (T=20000, one cell at a time) ``scancel``-ed after its first cell: the job
   is CANCELLED, its output has the driver's "Interrupted" and resume command and the
   recipe's ``sbatch <file>`` hint, its parent run is KILLED and nothing is RUNNING; the
   same file submitted again is stopped as ``--signal=B:TERM@120`` stops it before a time
   limit (SIGTERM to the batch shell alone, sent with ``scancel --batch --signal=TERM``):
   the script passes it on, the driver stops once, the job FAILS with exit code 130 and the
   parent run is KILLED; submitted a third time it skips the finished cells and COMPLETES;
3. in the server: exactly one FINISHED run per cell of both sweeps, none RUNNING; each job's
   final state from ``scontrol show job`` (no accounting daemon, so no ``sacct``);
4. afterwards no process of the test's Slurm, munge, Ray, PostgreSQL or MLflow is left: each
   is stopped by its process id, and the test fails if one survives.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

import pytest

from sweeper import servers
from tests.data_fixtures import movielens_file  # noqa: F401  (fixture)
from tests.slurm_cluster import Slurm, one_host_slurm
from tests.test_cluster_submit import _processes_of, _runs, _stop_ray

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow

FIRST = ["+exp=smoke", "seeds=1", "sweep.grid.dataset=[simulation,movielens]"]
"""12 cells: LinUCB, LinTS x Theory, Fixed, TL x simulation, MovieLens, one seed."""
LONGER = ["+exp=smoke", "experiment.name=smoke_slurm", "horizon=20000", "launcher.max_in_flight=1"]
"""18 cells one at a time: slow enough that ``scancel`` lands mid-sweep."""
FINAL_STATES = ("COMPLETED", "CANCELLED", "FAILED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY")


def _write(tmp_path: Path, name: str, overrides: list[str], uri: str, database: str,
           submit: bool = False) -> subprocess.CompletedProcess:  # fmt: skip
    """``python -m sweeper.slurm`` writing ``<name>.sbatch`` (and submitting it)."""
    command = [sys.executable, "-m", "sweeper.slurm", "--tracking-uri", uri,
               "--database", database, "--artifacts", str(tmp_path / "artifacts"),
               "--job-name", name, "--out", str(tmp_path / f"{name}.sbatch"),
               "--workdir", str(tmp_path), "--data-dir", str(ROOT / ".cache" / "datasets"),
               *(["--submit"] if submit else []), "--", *overrides]  # fmt: skip
    return subprocess.run(command, capture_output=True, text=True, cwd=ROOT, env=_env(),
                          timeout=120)  # fmt: skip


_SLURM_ENV: dict[str, str] = {}


def _env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("RAY_", "MLFLOW_"))}
    env.update(_SLURM_ENV)
    return env


def _submit(slurm: Slurm, script: Path) -> str:
    done = slurm.run("sbatch", str(script))
    assert done.returncode == 0, done.stderr
    return re.search(r"Submitted batch job (\d+)", done.stdout).group(1)


def _final(slurm: Slurm, job: str, timeout: float, tmp_path: Path, name: str) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        fields = slurm.job(job)
        if fields["JobState"] in FINAL_STATES:
            return fields
        time.sleep(2)
    raise AssertionError(f"job {job} not over after {timeout:.0f}s: {fields}\n"
                         f"{_output(tmp_path, name, job)[-4000:]}")  # fmt: skip


def _output(tmp_path: Path, name: str, job: str) -> str:
    path = tmp_path / f"{name}-{job}.out"
    return path.read_text(errors="replace") if path.exists() else "(no output file)"


def _cells(uri: str, experiment: str) -> list:
    return [r for r in _runs(uri, experiment=experiment) if "cell_key" in r.data.tags]


def _exactly_once(uri: str, experiment: str, cells: int) -> None:
    runs = _cells(uri, experiment)
    finished = Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == cells and set(finished.values()) == {1}, finished
    assert not [r for r in runs if r.info.status == "RUNNING"]
    assert not _runs(uri, "attributes.status = 'RUNNING'", experiment=experiment)


def test_the_slurm_recipe_runs_stops_on_scancel_and_resumes(
    tmp_path,
    movielens_file,  # noqa: F811  (the ratings in the checkout's data directory)
):
    base = Path(tempfile.mkdtemp(prefix="swslurm", dir="/tmp"))  # short: sockets; postgres
    base.chmod(0o755)
    tmp_path = base / "work"
    tmp_path.mkdir()
    tmp_path.chmod(0o777)
    jobs: list[str] = []
    started = time.monotonic()
    try:
        with (
            one_host_slurm(base / "slurm") as slurm,
            servers.postgres(base / "pg") as database,
            servers.mlflow_server(database, tmp_path / "artifacts", workers=1) as uri,
        ):
            _SLURM_ENV.update(SLURM_CONF=slurm.env["SLURM_CONF"])
            print(f"slurm, postgres and mlflow up in {time.monotonic() - started:.0f}s")

            # 1. smoke with MovieLens cells, written and submitted by the recipe's command
            done = _write(tmp_path, "first", FIRST, uri, database, submit=True)
            assert done.returncode == 0, done.stdout + done.stderr
            job = re.search(r"submitted batch job (\d+)", done.stdout).group(1)
            jobs.append(job)
            fields = _final(slurm, job, 600, tmp_path, "first")
            output = _output(tmp_path, "first", job)
            assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), output[-4000:]
            assert "1 of 1 Ray node(s) joined" in output, output[-3000:]
            _exactly_once(uri, "smoke", 12)
            datasets = Counter(r.data.tags.get("dataset") for r in _cells(uri, "smoke"))
            assert datasets == {"simulation": 6, "movielens": 6}, datasets
            print(f"first job done at {time.monotonic() - started:.0f}s")

            # 2. a longer sweep, scancel-ed mid-sweep, then the same file submitted again
            done = _write(tmp_path, "longer", LONGER, uri, database)
            assert done.returncode == 0, done.stdout + done.stderr
            script = tmp_path / "longer.sbatch"
            job = _submit(slurm, script)
            jobs.append(job)
            _until(lambda: _finished(uri, "smoke_slurm") >= 1, 300, "a cell of the longer sweep",
                   lambda: _output(tmp_path, "longer", job))  # fmt: skip
            cancel = slurm.run("scancel", job)
            assert cancel.returncode == 0, cancel.stderr
            fields = _final(slurm, job, 120, tmp_path, "longer")
            output = _output(tmp_path, "longer", job)
            assert fields["JobState"] == "CANCELLED", (fields, output[-4000:])
            assert "Interrupted: finished cells are kept" in output, output[-4000:]
            assert f"sbatch {script}" in output, output[-3000:]
            (parent,) = _runs(uri, "tags.role = 'sweep'", experiment="smoke_slurm")
            assert parent.info.status == "KILLED", parent.info.status
            partial = _finished(uri, "smoke_slurm")
            assert 1 <= partial < 18, partial
            assert not _runs(uri, "attributes.status = 'RUNNING'", experiment="smoke_slurm")
            print(f"cancelled after {partial} of 18 cells at {time.monotonic() - started:.0f}s")

            # the time limit's early signal (--signal=B:TERM@120): SIGTERM to the batch
            # shell alone, which `scancel --batch --signal=TERM` sends the same way
            job = _submit(slurm, script)
            jobs.append(job)
            _until(lambda: _finished(uri, "smoke_slurm") > partial, 300, "a resumed cell",
                   lambda: _output(tmp_path, "longer", job))  # fmt: skip
            signalled = slurm.run("scancel", "--batch", "--signal=TERM", job)
            assert signalled.returncode == 0, signalled.stderr
            fields = _final(slurm, job, 120, tmp_path, "longer")
            output = _output(tmp_path, "longer", job)
            assert (fields["JobState"], fields["ExitCode"]) == ("FAILED", "130:0"), output[-4000:]
            assert output.count("stopping: cancelling the cells in flight") == 1, output[-3000:]
            assert "Interrupted: finished cells are kept" in output, output[-4000:]
            assert f"sbatch {script}" in output, output[-3000:]
            (parent,) = _runs(uri, "tags.role = 'sweep'", experiment="smoke_slurm")
            assert parent.info.status == "KILLED", parent.info.status
            assert not _runs(uri, "attributes.status = 'RUNNING'", experiment="smoke_slurm")
            partial = _finished(uri, "smoke_slurm")
            assert partial < 18, "the signal landed after the sweep's end: nothing to resume"
            print(f"signalled after {partial} of 18 cells at {time.monotonic() - started:.0f}s")

            job = _submit(slurm, script)
            jobs.append(job)
            fields = _final(slurm, job, 900, tmp_path, "longer")
            output = _output(tmp_path, "longer", job)
            assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), output[-4000:]
            assert f"18 cells, {partial} already finished" in output, output[-3000:]

            # 3. exactly once, in the server on PostgreSQL
            _exactly_once(uri, "smoke_slurm", 18)
            _exactly_once(uri, "smoke", 12)
            (parent,) = _runs(uri, "tags.role = 'sweep'", experiment="smoke_slurm")
            assert parent.info.status == "FINISHED"
            print(f"resumed job done at {time.monotonic() - started:.0f}s")
    finally:
        ray_left = {}  # a Ray a job left behind, found and then ended by its pids
        for job in jobs:
            ray_left[job] = _processes_of(Path(f"/tmp/sweeper-ray-{job}"))
            _stop_ray(Path(f"/tmp/sweeper-ray-{job}"))
            shutil.rmtree(f"/tmp/sweeper-ray-{job}", ignore_errors=True)
        _SLURM_ENV.clear()
        leftovers = _processes_of(base)
        shutil.rmtree(base, ignore_errors=True)
    # 4. nothing left running: no process started from this Slurm (slurmstepd, a job's)
    # outlived its daemons, no Ray its job, no PostgreSQL or MLflow process its `with`
    assert not slurm.leftovers, f"processes of the test's Slurm had to be killed: {slurm.leftovers}"
    assert not any(ray_left.values()), f"Ray processes outlived their jobs: {ray_left}"
    assert not leftovers, f"processes of {base} survived"


def _finished(uri: str, experiment: str) -> int:
    return sum(r.info.status == "FINISHED" for r in _cells(uri, experiment))


def _until(predicate, timeout: float, what: str, output) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}:\n"
                                 f"{output()[-4000:]}")  # fmt: skip
        time.sleep(0.5)
