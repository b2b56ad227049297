"""The orchestrator's own errors: bad input or an unusable setting, said in one paragraph.

The command line prints these without a traceback (``HYDRA_FULL_ERROR=1`` shows it) and
exits with status 2; nothing has run and nothing is left RUNNING when one is raised.
"""

from __future__ import annotations

import sys
from typing import Any


class SweepError(ValueError):
    """A setting that cannot work: the message names it and says how to fix it."""


def whole_number(value: Any, key: str, minimum: int, meaning: str = "") -> int:
    """``value`` as an int >= ``minimum``, else a SweepError naming ``key``."""
    ok = isinstance(value, int) and not isinstance(value, bool)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value, ok = int(value), True
    if not ok or value < minimum:
        what = f" ({meaning})" if meaning else ""
        raise SweepError(f"{key} must be a whole number, at least {minimum}{what}; got {value!r}")
    return int(value)


def at_least(value: float, key: str, minimum: float, meaning: str = "") -> float:
    """``value`` of a typed setting (sweeper/schema.py gave it its type) when it is at least
    ``minimum``, else a SweepError naming ``key``: the range its type cannot say."""
    if value < minimum:
        what = f" ({meaning})" if meaning else ""
        kind = "a whole number" if isinstance(value, int) else "a number"
        raise SweepError(f"{key} must be {kind}, at least {minimum}{what}; got {value!r}")
    return value


def boolean(value: Any, key: str, default: bool = False) -> bool:
    """``value`` as OmegaConf reads a boolean (true/false, yes/no, on/off, y/n, 1/0, any
    case; null: ``default``), else a SweepError naming ``key``: ``bool("no")`` is True, so a
    setting is never read with Python's ``bool``."""
    from omegaconf.errors import ValidationError
    from omegaconf.nodes import BooleanNode

    if value is None:
        return default
    try:
        return bool(BooleanNode(value=value)._value())
    except ValidationError:
        raise SweepError(
            f"{key} must be a boolean (true or false; yes/no, on/off and 1/0 are read as "
            f"OmegaConf reads them), got {value!r}: set {key}=true or {key}=false"
        ) from None


class StoreBusy(RuntimeError):
    """Another live driver writes into this store (or experiment): exit status 4."""


class StoreFailed(RuntimeError):
    """The MLflow store failed under the driver (disk full, a server gone): exit status 3."""


_WARNED: set[str] = set()


def warn(text: str) -> None:
    """Print ``warning: text`` on stderr, once per process (a file that cannot be read is
    met by every reader of the same table)."""
    if text not in _WARNED:
        _WARNED.add(text)
        print(f"warning: {text}", file=sys.stderr, flush=True)
