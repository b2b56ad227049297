"""The console scripts ``sweeper``, ``sweeper-report`` and ``sweeper-slurm``.

They import the orchestrator only when called, so that an installation without its
dependencies (``pip install --no-deps``, or a research-code-only environment) gets one
paragraph naming what to install instead of an ``ImportError`` traceback.
"""

from __future__ import annotations

import sys


def _missing(err: ModuleNotFoundError, command: str) -> None:
    name = (err.name or "").split(".")[0]
    if name in ("", "sweeper", "sweeper_tasks", "hydra_plugins"):  # the package itself is broken
        raise err
    sys.stderr.write(
        f"error: `{command}` needs the Python package '{name}', which is not installed in "
        f"{sys.prefix}. Install the tool with its dependencies (pip install "
        "/path/to/sweeper-<version>-py3-none-any.whl, without --no-deps), or run "
        "`make .venv/.installed` in a checkout and use .venv/bin/sweeper.\n"
    )
    sys.exit(2)


def sweeper() -> None:
    """``sweeper [overrides]``: the same as ``python -m sweeper``."""
    try:
        from sweeper.__main__ import entry
    except ModuleNotFoundError as err:
        _missing(err, "sweeper")
    entry()


def report() -> None:
    """``sweeper-report NAME``: the same as ``python -m sweeper.report``."""
    try:
        from sweeper.report.__main__ import main
    except ModuleNotFoundError as err:
        _missing(err, "sweeper-report")
    sys.exit(main())


def slurm() -> None:
    """``sweeper-slurm [options] -- OVERRIDES``: the same as ``python -m sweeper.slurm``."""
    try:
        from sweeper.slurm import main
    except ModuleNotFoundError as err:
        _missing(err, "sweeper-slurm")
    sys.exit(main())
