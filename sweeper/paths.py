"""Where the Hydra configs (``conf/``) are, in a checkout and in an installed wheel.

``conf/`` stays at the repository root (the layout mirrors the architecture: research code
in ``tasks/``, its configs in ``conf/``); the wheel ships a copy of it as the package data
``sweeper/conf`` (``setup.py`` maps it there). A checkout (or an editable install) reads
the root's ``conf/``, so an edit there is seen at once; an installed wheel, run from any
directory, reads its own copy. A user's own experiments are added on top of either with
Hydra's ``--config-dir DIR`` (or ``hydra.searchpath=[file://DIR]``): docs/running.md, "Your own
experiments".
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE = Path(__file__).resolve().parent


def conf_dir() -> Path:
    """The ``conf/`` directory this code runs with: the checkout's, else the wheel's copy."""
    checkout = _PACKAGE.parent / "conf"
    if (checkout / "config.yaml").is_file():
        return checkout
    shipped = _PACKAGE / "conf"
    if (shipped / "config.yaml").is_file():
        return shipped
    raise FileNotFoundError(
        f"sweeper's configs are missing: neither {checkout} (a source checkout) nor {shipped} "
        "(an installed wheel) holds config.yaml. Reinstall the package (pip install "
        "the sweeper wheel), or run from a checkout of the repository"
    )


CONF_DIR = conf_dir()
"""The configs of this installation (see :func:`conf_dir`)."""
