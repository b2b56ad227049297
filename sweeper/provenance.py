"""Which code made a result: the package version, the git commit and the numerical
libraries the cell had loaded, tagged on every run.

A family's ``task.result_version`` keeps stale results from being reused (it is part of
the cell key); these tags say, for any stored run, exactly which code computed it.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from functools import cache
from importlib import metadata
from pathlib import Path

SOURCE = Path(__file__).resolve().parent.parent
UNKNOWN = "unknown"


@cache
def code_tags() -> dict[str, str]:
    """``sweeper.version``, ``mlflow.source.git.commit`` (shown by the MLflow UI) and
    ``sweeper.git_dirty`` (uncommitted changes in the source tree: the commit alone does
    not reproduce the numbers)."""
    try:
        version = metadata.version("sweeper")
    except metadata.PackageNotFoundError:
        version = UNKNOWN
    commit = _git("rev-parse", "HEAD")
    dirty = _git("status", "--porcelain", "--untracked-files=no", "--", "sweeper", "tasks", "conf")
    return {
        "sweeper.version": version,
        "mlflow.source.git.commit": commit or UNKNOWN,
        "sweeper.git_dirty": UNKNOWN if commit is None else str(bool(dirty)).lower(),
    }


def _git(*args: str) -> str | None:
    """The output of ``git args`` in the source tree, or None outside a checkout."""
    try:
        done = subprocess.run(
            ["git", *args], cwd=SOURCE, capture_output=True, text=True, timeout=10, check=True
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


LIBRARIES = {"numpy": "numpy", "scipy": "scipy", "sklearn": "scikit-learn", "optuna": "optuna",
             "pandas": "pandas", "torch": "torch"}  # fmt: skip
"""Module -> distribution of the libraries whose versions can change a cell's numbers."""
LIBRARIES_TAG = "sweeper.libraries"


def loaded_libraries() -> str:
    """``numpy=2.1.3 scipy=1.14.1 ...``: the versions of the :data:`LIBRARIES` loaded in this
    process (a worker, after its cell ran: what the family imported), sorted."""
    loaded = tuple(sorted(m for m in LIBRARIES if m in sys.modules))
    return _versions(loaded)


def installed_libraries() -> str:
    """The same, of every :data:`LIBRARIES` installed here (the driver's environment)."""
    return _versions(tuple(sorted(LIBRARIES)))


@cache
def _versions(modules: tuple[str, ...]) -> str:
    found = []
    for module in modules:
        try:
            found.append(f"{LIBRARIES[module]}={metadata.version(LIBRARIES[module])}")
        except metadata.PackageNotFoundError:
            continue
    return " ".join(found)


def changed_libraries(before: str | None, now: str) -> str:
    """What differs between two :func:`loaded_libraries` texts (``numpy 1.26.4 -> 2.1.3``),
    or ``""``; libraries in only one of them are not compared."""
    old, new = _parsed(before), _parsed(now)
    return ", ".join(f"{k} {old[k]} -> {new[k]}" for k in sorted(old.keys() & new.keys())
                     if old[k] != new[k])  # fmt: skip


def mixed_libraries(texts: Iterable[str | None]) -> str:
    """The libraries that several :func:`loaded_libraries` texts name at different versions
    (``numpy 1.26.4, 2.1.3``), or ``""``. A library that some cells did not load (pandas in
    MovieLens cells only) is not a mix."""
    seen: dict[str, set[str]] = {}
    for text in texts:
        for name, version in _parsed(text).items():
            seen.setdefault(name, set()).add(version)
    return "; ".join(f"{name} {', '.join(sorted(v))}" for name, v in sorted(seen.items())
                     if len(v) > 1)  # fmt: skip


def _parsed(text: str | None) -> dict[str, str]:
    """``numpy=2.1.3 scipy=1.14.1`` -> {'numpy': '2.1.3', 'scipy': '1.14.1'}."""
    return dict(item.split("=", 1) for item in (text or "").split() if "=" in item)
