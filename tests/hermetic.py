"""The default test suite run from a hostile shell (issue #37, item 3): ``make test`` runs it so.

A researcher's shell has ``MLFLOW_TRACKING_URI`` set (most MLflow users do), Ray's variables
from a cluster recipe, a data directory, a ``PYTHONPATH`` to their own repository, and they
run from a directory of their own, which may hold a ``tasks.py`` (invoke's convention) and a
``tasks/`` package. This runs ``pytest`` (the default suite, or the tests given) with each of
those set to a hostile value (:data:`HOSTILE`), from a temporary directory holding a
``tasks.py`` and a ``tasks/`` package that end any process importing them (and another
such pair on the ``PYTHONPATH``), with the repository's pyproject.toml. The suite passes
only if it is hermetic (tests/conftest.py's ``pytest_configure`` clears them; a test that
needs one sets it itself)::

    python -m tests.hermetic                 # the default suite (what ``make test`` runs)
    python -m tests.hermetic tests/test_slurm_recipe.py
    python -m tests.hermetic --durations=20  # pytest's options: the default suite with them
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
NOWHERE = "127.0.0.1:9"  # the discard port: nothing answers there
TRAP = "raise SystemExit('the hostile shell\\'s {what} was imported')\n"
HOSTILE = {
    "MLFLOW_TRACKING_URI": f"http://{NOWHERE}",
    "MLFLOW_REGISTRY_URI": f"http://{NOWHERE}",
    "MLFLOW_EXPERIMENT_NAME": "hostile",
    "MLFLOW_EXPERIMENT_ID": "424242",
    "MLFLOW_RUN_ID": "0123456789abcdef0123456789abcdef",
    "MLFLOW_TRACKING_USERNAME": "hostile",
    "MLFLOW_TRACKING_PASSWORD": "hostile",
    "MLFLOW_HTTP_REQUEST_MAX_RETRIES": "7",
    "RAY_ADDRESS": NOWHERE,
    "RAY_AUTH_MODE": "token",
    "SWEEPER_DATA_DIR": "/nonexistent/sweeper-data",
    "HYDRA_FULL_ERROR": "1",
}
"""What each variable is set to (``PYTHONPATH`` is the trap directory itself)."""


def trap_directory(folder: Path) -> Path:
    """``folder`` holding a ``tasks.py`` and a ``tasks/`` package that exit when imported."""
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks.py").write_text(TRAP.format(what="tasks.py"))
    (folder / "tasks" / "__init__.py").write_text(TRAP.format(what="tasks/ package"))
    return folder


def run(args: list[str]) -> int:
    """The suite (``args``: pytest's own, default the default suite) in the hostile shell."""
    with tempfile.TemporaryDirectory(prefix="sweeper-hostile-") as parent:
        folder, path = (trap_directory(Path(parent) / name) for name in ("research", "path"))
        env = {**os.environ, **HOSTILE, "PYTHONPATH": str(path)}
        paths = [a for a in args if (ROOT / a.split("::")[0]).exists()]
        tests = [str(ROOT / a) if a in paths else a for a in args]
        tests += [] if paths else [str(ROOT / "tests")]  # only options given: the suite
        command = [sys.executable, "-m", "pytest", "-q", "-c", str(ROOT / "pyproject.toml"),
                   "--rootdir", str(ROOT), "-o", f"cache_dir={ROOT / '.pytest_cache'}",
                   *tests]  # fmt: skip
        print(f"hostile shell: {' '.join(f'{k}={v}' for k, v in env.items() if k in HOSTILE)} "
              f"PYTHONPATH={path}; in {folder}", flush=True)  # fmt: skip
        started = time.monotonic()
        status = subprocess.run(command, cwd=folder, env=env).returncode
        print(f"the suite took {(time.monotonic() - started) / 60:.1f} min in the hostile shell")
        return status


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))
