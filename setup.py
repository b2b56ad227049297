"""Packaging that pyproject.toml cannot say: where three import packages live in the checkout.

- ``conf/`` stays at the repository root (the layout shows the architecture) and ships inside
  the wheel as ``sweeper.conf``, where ``sweeper.paths.conf_dir`` finds its YAML files when
  there is no checkout.
- ``tasks/`` (the research code) stays at the root too and installs under the import name
  ``sweeper_tasks``: a top-level ``tasks`` would be shadowed by, or shadow, a researcher's
  own ``tasks.py`` (invoke's convention) or ``tasks/`` package (docs/architecture.md).
- ``hydra_plugins`` is named as a namespace package of its own folder, so that an editable
  install's import finder lists ``hydra_plugins/sweeper_launcher`` to Hydra's plugin scan.

Everything else (metadata, dependencies, extras, console scripts) is in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

ROOT = Path(__file__).resolve().parent
RESEARCH = "sweeper_tasks"
CONF_PACKAGES = ["sweeper.conf"] + [
    f"sweeper.conf.{p.name}" for p in sorted((ROOT / "conf").iterdir()) if p.is_dir()
]
RESEARCH_PACKAGES = [
    RESEARCH + name.removeprefix("tasks") for name in find_packages(include=["tasks", "tasks.*"])
]

setup(
    packages=[
        *find_packages(include=["sweeper", "sweeper.*"]),
        *RESEARCH_PACKAGES,
        "hydra_plugins",
        *find_namespace_packages(include=["hydra_plugins.*"]),
        *CONF_PACKAGES,
    ],
    package_dir={"sweeper.conf": "conf", RESEARCH: "tasks", "hydra_plugins": "hydra_plugins"},
    # the bench's measured cost of each experiment's cells, a dry run's prices (sweeper/dryrun.py)
    package_data={"sweeper": ["cell_costs.json"], **{name: ["*.yaml"] for name in CONF_PACKAGES}},
)
