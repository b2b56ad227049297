"""Packaging that pyproject.toml cannot say: ``conf/`` ships inside the wheel as ``sweeper/conf``.

``conf/`` stays at the repository root (the layout shows the architecture); mapping it to the
package ``sweeper.conf`` puts its YAML files in the installed distribution, where
``sweeper.paths.conf_dir`` finds them when there is no checkout. Everything else (metadata,
dependencies, extras, console scripts) is in pyproject.toml.
"""

from pathlib import Path

from setuptools import find_namespace_packages, find_packages, setup

ROOT = Path(__file__).resolve().parent
CONF_PACKAGES = ["sweeper.conf"] + [
    f"sweeper.conf.{p.name}" for p in sorted((ROOT / "conf").iterdir()) if p.is_dir()
]

setup(
    packages=[
        *find_packages(include=["sweeper", "sweeper.*", "tasks", "tasks.*"]),
        *find_namespace_packages(include=["hydra_plugins.*"]),
        *CONF_PACKAGES,
    ],
    package_dir={"sweeper.conf": "conf"},
    package_data={name: ["*.yaml"] for name in CONF_PACKAGES},
)
