"""MLflow and Ray at both ends of the ranges pyproject.toml allows (issue #26, item 3).

Each test runs once per end, in that end's virtualenv: ``.venv`` holds the newest MLflow and
Ray the ranges allow, ``.venv-oldest`` their lower bounds (``make test-range`` builds both,
see :mod:`tests.version_range`). At each end: the venv holds what it claims, the direct
writes read back as MLflow's API writes them (sqlite and PostgreSQL), every private MLflow
name is found, and the smoke experiment sweeps, resumes skipping every finished cell, and
reports. Slow: a few minutes per end.
"""

from __future__ import annotations

import itertools
import os
import sqlite3
import subprocess
from pathlib import Path

import pytest
import yaml
from packaging.version import Version

from tests.version_range import lower_bound, ranges

pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
ENDS = {
    "newest": ROOT / ".venv" / "bin" / "python",
    "oldest": ROOT / ".venv-oldest" / "bin" / "python",
}


@pytest.fixture(params=list(ENDS))
def end(request) -> tuple[str, Path]:
    """(the end's name, its venv's python)."""
    python = ENDS[request.param]
    if not python.exists():
        pytest.fail(f"no {python.parent.parent.name}: `make test-range` builds it")
    return request.param, python


def _run(python: Path, args: list[str], cwd: Path, timeout_s: float) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    return subprocess.run(
        [str(python), *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout_s
    )


def _versions(python: Path) -> dict[str, Version]:
    code = "import importlib.metadata as m; print(m.version('mlflow'), m.version('ray'))"
    done = _run(python, ["-c", code], ROOT, 60)
    assert done.returncode == 0, done.stderr[-2000:]
    return dict(zip(("mlflow", "ray"), map(Version, done.stdout.split()), strict=True))


def test_each_venv_holds_its_end_of_each_range(end):
    name, python = end
    versions = _versions(python)
    for library, requirement in ranges().items():
        assert requirement.specifier.contains(versions[library]), (
            f"{name}: {library} {versions[library]} is outside pyproject.toml's {requirement}"
        )
        if name == "oldest":
            assert versions[library] == Version(lower_bound(requirement)), (
                f"{library} {versions[library]} in .venv-oldest, not the lower bound of "
                f"{requirement}: `rm -rf .venv-oldest && make test-range`"
            )


def test_direct_writes_and_private_names_hold_at_each_end(end):
    """The bulk-versus-API comparison (its PostgreSQL half is slow-marked: run here too) and
    every private MLflow name, in the end's own interpreter."""
    name, python = end
    tests = ["tests/test_bulk.py", "tests/test_mlflow_private.py"]
    done = _run(
        python, ["-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "", *tests], ROOT, 900
    )
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    assert done.returncode == 0, f"{name}:\n{done.stdout[-4000:]}{done.stderr[-2000:]}"
    assert "passed" in summary and "skipped" not in summary and "deselected" not in summary, summary


def _cell_runs(store: Path) -> dict[str, str]:
    """run id -> status of every cell run (a run with a ``cell_key`` tag), read with sqlite
    itself (this process's MLflow may be the other end's)."""
    query = (
        "select r.run_uuid, r.status from runs r join tags t on t.run_uuid = r.run_uuid "
        "where t.key = 'cell_key' and r.lifecycle_stage = 'active'"
    )
    with sqlite3.connect(store) as db:
        return dict(db.execute(query).fetchall())


SMOKE = yaml.safe_load((ROOT / "conf" / "exp" / "smoke.yaml").read_text())


def _smoke_cells() -> int:
    """The smoke experiment's cells: its grid's product times its seeds."""
    return len(list(itertools.product(*SMOKE["sweep"]["grid"].values()))) * SMOKE["seeds"]


def test_a_smoke_sweep_resumes_and_reports_at_each_end(end, tmp_path):
    name, python = end
    store = tmp_path / "mlflow.db"
    sweep = ["-m", "sweeper", "+exp=smoke", f"tracking.uri=sqlite:///{store}"]
    first = _run(python, sweep, tmp_path, 900)
    assert first.returncode == 0, f"{name}:\n{first.stdout[-3000:]}{first.stderr[-3000:]}"
    runs = _cell_runs(store)
    cells = _smoke_cells()
    assert len(runs) == cells and set(runs.values()) == {"FINISHED"}, runs

    again = _run(python, sweep, tmp_path, 600)
    assert again.returncode == 0, f"{name}:\n{again.stdout[-3000:]}{again.stderr[-3000:]}"
    assert _cell_runs(store) == runs, "the resumed sweep added or changed cell runs"
    assert f"0 finished, 0 failed, {cells} skipped" in again.stdout, again.stdout[-2000:]

    out = tmp_path / "report"
    report = ["-m", "sweeper.report", "smoke", "--tracking-uri", f"sqlite:///{store}"]
    done = _run(python, [*report, "--out", str(out)], tmp_path, 600)
    assert done.returncode == 0, f"{name}:\n{done.stdout[-3000:]}{done.stderr[-3000:]}"
    assert (out / "index.html").is_file()
    tables = sorted(out.glob("*.md"))
    assert tables, f"no table in {sorted(p.name for p in out.iterdir())}"
    text = "\n".join(p.read_text() for p in tables)
    for algorithm in SMOKE["sweep"]["grid"]["algorithm"]:
        assert algorithm.lower() in text.lower(), f"{algorithm} is in no table of the report"
