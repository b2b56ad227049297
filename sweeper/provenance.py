"""Which code made a result: the package version and the git commit, tagged on every run.

A family's ``task.result_version`` keeps stale results from being reused (it is part of
the cell key); these tags say, for any stored run, exactly which code computed it.
"""

from __future__ import annotations

import subprocess
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
