"""The ranges pyproject.toml allows MLflow and Ray, and the pins of either end (issue #26,
item 3). ``make test-range`` installs them::

    python -m tests.version_range oldest   # mlflow==3.16.1, ray[default]==2.50
    python -m tests.version_range newest   # mlflow<3.19,>=3.16.1, ray[default]<2.61,>=2.50

Each prints a pip requirements file, one line per library: the oldest end pins each ranged
library to its lower bound; the newest end is the range itself, installed with
``--upgrade`` (pip then takes the newest release it allows).
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

PYPROJECT = Path(__file__).resolve().parent.parent / "pyproject.toml"
RANGED = ("mlflow", "ray")  # the libraries whose private parts and APIs the driver leans on


def ranges(pyproject: Path = PYPROJECT) -> dict[str, Requirement]:
    """The requirement of each ranged library, as pyproject.toml's dependencies state it."""
    dependencies = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    found = {r.name: r for r in map(Requirement, dependencies) if r.name in RANGED}
    missing = set(RANGED) - set(found)
    if missing:
        raise SystemExit(f"pyproject.toml states no requirement for {sorted(missing)}")
    return found


def lower_bound(requirement: Requirement) -> str:
    """The version the requirement's ``>=`` bound names (the oldest it allows)."""
    (bound,) = [s.version for s in requirement.specifier if s.operator == ">="]
    return bound


def pins(end: str) -> list[str]:
    """pip requirements installing the ``oldest`` or the ``newest`` end of every range."""
    if end not in ("oldest", "newest"):
        raise SystemExit(f"the end of a range is 'oldest' or 'newest', not {end!r}")
    found = ranges()
    out = []
    for name in RANGED:
        requirement = found[name]
        extras = f"[{','.join(sorted(requirement.extras))}]" if requirement.extras else ""
        version = f"=={lower_bound(requirement)}" if end == "oldest" else requirement.specifier
        out.append(f"{name}{extras}{version}")
    return out


if __name__ == "__main__":
    print("\n".join(pins(sys.argv[1] if len(sys.argv) > 1 else "")))
