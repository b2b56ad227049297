"""The built wheel, not the editable checkout: installed into fresh venvs, run elsewhere.

``make test-install`` (run by ``.ci/run``) builds the wheel from this checkout and installs
it twice, each time into a new virtualenv (packages from the registry: about 1 minute for
the research code and 4.5 for the tool on this loaded machine, hence slow-marked):

* the default install (``pip install sweeper-*.whl``): from a directory that is not a
  checkout, the ``sweeper`` console script runs the smoke experiment (the configs come from
  the wheel), ``python -m sweeper -m`` runs a multirun as one sweep (the Hydra launcher
  plugin ships in the wheel), a user's own experiment is added with ``--config-dir``, and
  ``sweeper-report`` draws the report;
* the research code alone (``--no-deps`` and its seven packages): ``tasks`` imports without
  Ray, MLflow or Hydra, and the console scripts say in one paragraph what to install
  (exit status 2), not an ``ImportError`` traceback.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow


def _run(command: list[str], cwd: Path, timeout: float = 900) -> subprocess.CompletedProcess:
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("RAY_ADDRESS", "MLFLOW_TRACKING_URI", "VIRTUAL_ENV", "PYTHONPATH")
    }
    done = subprocess.run(
        command, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout
    )
    assert done.returncode == 0, f"{command}\n{done.stdout[-3000:]}\n{done.stderr[-4000:]}"
    return done


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("dist")
    _run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(out), str(ROOT)], ROOT)
    (built,) = out.glob("sweeper-*.whl")
    return built


RESEARCH = ["numpy", "scipy", "pandas", "threadpoolctl", "scikit-learn", "optuna", "numba"]
"""What the research code (``tasks``) imports (pyproject.toml; docs/running.md, "Installing
without a checkout")."""


def _venv(path: Path, *requirements: str) -> Path:
    _run([sys.executable, "-m", "venv", str(path)], path.parent)
    python = path / "bin" / "python"
    _run([str(python), "-m", "pip", "install", "-q", *requirements], path.parent)
    return python


def test_the_research_code_alone_runs_without_ray_mlflow_or_hydra(wheel, tmp_path):
    python = _venv(tmp_path / "core", "--no-deps", str(wheel))
    _run([str(python), "-m", "pip", "install", "-q", *RESEARCH], tmp_path)
    probe = textwrap.dedent(
        """
        import importlib.util, sys
        import sweeper_tasks.bandit_tuning.cell, sweeper_tasks.opl_hpo.cell
        from sweeper_tasks.building import build
        absent = [m for m in ("ray", "mlflow", "hydra", "omegaconf")
                  if importlib.util.find_spec(m) is not None]
        assert not absent, f"installed with the core: {absent}"
        print(sweeper_tasks.bandit_tuning.cell.__file__)
        """
    )
    done = _run([str(python), "-c", probe], tmp_path)
    assert "site-packages" in done.stdout, done.stdout  # the wheel's copy, not the checkout
    for script in ("sweeper", "sweeper-report"):
        done = subprocess.run(
            [str(python.parent / script), "+exp=smoke"], capture_output=True, text=True
        )
        assert done.returncode == 2, (script, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr, done.stderr
        assert f"`{script}` needs the Python package" in done.stderr, done.stderr


def test_the_default_install_runs_sweeps_from_another_directory(wheel, tmp_path):
    python = _venv(tmp_path / "orch", str(wheel))
    bin_dir = python.parent
    work = tmp_path / "elsewhere"
    work.mkdir()
    store = f"sqlite:///{work}/mlflow.db"
    local = ["launcher.name=local", f"tracking.uri={store}"]

    done = _run([str(bin_dir / "sweeper"), "+exp=smoke", "seeds=1", "horizon=50", *local], work)
    assert "6 finished, 0 failed" in done.stdout, done.stdout[-2000:]

    script = work / "smoke.sbatch"  # the Slurm recipe's command, installed with the wheel
    slurm = [str(bin_dir / "sweeper-slurm"), "--tracking-uri", "http://login1:5000"]
    done = _run([*slurm, "--out", str(script), "--", "+exp=smoke"], work)
    assert f"PY={python}" in script.read_text() and "sbatch" in done.stdout, done.stdout
    assert subprocess.run(["bash", "-n", str(script)]).returncode == 0

    multirun = [str(python), "-m", "sweeper", "-m", "task=toy", "horizon=10", "seed=0,1,2"]
    done = _run([*multirun, *local], work)
    assert "3 job(s) as one sweep" in done.stdout and "3 finished" in done.stdout, done.stdout

    mine = work / "my_conf" / "exp"
    mine.mkdir(parents=True)
    (mine / "mine.yaml").write_text(
        textwrap.dedent(
            """\
            # @package _global_
            experiment: {name: mine, description: a user's own experiment}
            horizon: 50
            seeds: 2
            sweep:
              grid: {algorithm: [linucb], tuner: [theory], dataset: [simulation]}
            """
        )
    )
    done = _run([str(bin_dir / "sweeper"), "--config-dir", "my_conf", "+exp=mine", *local], work)
    assert "sweep 'mine'" in done.stdout and "2 finished, 0 failed" in done.stdout, done.stdout

    done = _run([str(bin_dir / "sweeper-report"), "smoke", "--tracking-uri", store], work)
    assert (work / "reports" / "smoke" / "index.html").is_file(), done.stdout
