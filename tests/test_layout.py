"""The layout's rules (docs/architecture.md, "The layers"): a family's research code imports
no Ray, MLflow or Hydra, and no other family; the families share only tasks/'s top modules."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from sweeper.paths import CONF_DIR

TASKS = CONF_DIR.parent / "tasks"
FAMILIES = sorted(p.name for p in TASKS.iterdir() if (p / "__init__.py").exists())
ORCHESTRATION = ("ray", "mlflow", "hydra", "omegaconf", "sweeper")

PROBE = """
import importlib, json, pkgutil, sys
family = sys.argv[1]
package = importlib.import_module(f"sweeper_tasks.{family}")
for info in pkgutil.walk_packages(package.__path__, f"sweeper_tasks.{family}."):
    importlib.import_module(info.name)
print(json.dumps(sorted(sys.modules)))
"""


def test_there_are_at_least_two_families():
    assert {"bandit_tuning", "opl_hpo"} <= set(FAMILIES)


@pytest.mark.parametrize("family", FAMILIES)
def test_a_family_imports_no_orchestration_and_no_other_family(family):
    done = subprocess.run(
        [sys.executable, "-c", PROBE, family],
        cwd=TASKS.parent,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout)
    top = {m.split(".")[0] for m in modules}
    assert not top & set(ORCHESTRATION), sorted(top & set(ORCHESTRATION))
    other_families = set(FAMILIES) - {family}
    others = {
        m for m in modules if m.startswith("sweeper_tasks.") and m.split(".")[1] in other_families
    }
    assert not others, sorted(others)


def test_the_orchestrator_imports_no_family_and_the_lock_no_tracking():
    """Issue #26: the arrow runs one way: sweeper/ names a cell function by its dotted path
    (hydra.utils.get_method) and imports no module of tasks/; lock.py and tracking.py no
    longer import each other."""
    code = (
        "import json, sys, sweeper.sweep, sweeper.report.load, sweeper.multirun\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=TASKS.parent, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    modules = json.loads(done.stdout)
    assert not [m for m in modules if m.split(".")[0] in ("tasks", "sweeper_tasks")]
    lock = (CONF_DIR.parent / "sweeper" / "store" / "lock.py").read_text()
    assert "from sweeper.store.tracking" not in lock and "import sweeper.store.tracking" not in lock


DRIVER = ("sweeper.sweep", "sweeper.grid", "sweeper.execute", "sweeper.launch",
          "sweeper.progress", "sweeper.multirun", "sweeper.dryrun", "sweeper.task",
          "sweeper.cells", "sweeper.seeds", "sweeper.adaptive", "sweeper.baseline",
          "sweeper.api", "sweeper.report")  # fmt: skip


def test_the_store_imports_nothing_of_the_driver():
    """Issue #26: the arrows run one way. The store (sweeper/store/) reads cells and outcomes
    by their attributes; importing every module of it loads no module of the driver."""
    code = (
        "import importlib, json, pkgutil, sys, sweeper.store\n"
        "for info in pkgutil.walk_packages(sweeper.store.__path__, 'sweeper.store.'):\n"
        "    importlib.import_module(info.name)\n"
        "print(json.dumps(sorted(sys.modules)))"
    )
    done = subprocess.run([sys.executable, "-c", code], cwd=TASKS.parent, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    modules = set(json.loads(done.stdout))
    assert "sweeper.store.record" in modules and "sweeper.store.index" in modules
    assert not modules & set(DRIVER), sorted(modules & set(DRIVER))


def test_the_driver_talks_to_the_store_through_its_interface_alone():
    """Issue #26: sweep.py imports ``sweeper.store`` (SweepStore and its few names), none of
    the store's modules (the index, the lock, the table, the recorder, ...)."""
    import ast

    tree = ast.parse((CONF_DIR.parent / "sweeper" / "sweep.py").read_text())
    imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
    imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    inside = sorted(m for m in imported if m and m.startswith("sweeper.store."))
    assert "sweeper.store" in imported and not inside, inside


def test_the_report_the_api_and_the_dry_run_read_the_store_through_its_reader_alone():
    """Issue #38: one reader decides which run is a cell's result. The report, the Python
    API and the dry run import no module of the store but :mod:`sweeper.store.reader` (and
    the dry run the lock's path of a sqlite file, which opens nothing)."""
    import ast

    sweeper_dir = CONF_DIR.parent / "sweeper"
    files = [*sorted((sweeper_dir / "report").glob("*.py")), sweeper_dir / "api.py",
             sweeper_dir / "dryrun.py"]  # fmt: skip
    allowed = {"sweeper.store.reader", "sweeper.store.lock"}
    for path in files:
        tree = ast.parse(path.read_text())
        imported = {n.module for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)}
        imported |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        store = {m for m in imported if m and m.startswith("sweeper.store")}
        assert store <= allowed and (
            "sweeper.store.lock" not in store or path.name == "dryrun.py"
        ), (path.name, sorted(store))
