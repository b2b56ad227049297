"""Build an object from a config mapping that names its class in ``_target_``.

The same convention as Hydra's ``instantiate``, kept dependency-free so that the
research code runs without Hydra: ``{"_target_": "pkg.mod.Class", "a": 1}`` becomes
``pkg.mod.Class(a=1)``. Keys starting with ``_`` and the bookkeeping key ``name``
are not passed to the constructor.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from typing import Any

RESERVED_KEYS = frozenset({"name"})


def locate(path: str) -> Any:
    """Import ``pkg.mod.attr`` and return ``attr``, with an error that names the path."""
    module_name, _, attr = path.rpartition(".")
    if not module_name:
        raise ImportError(f"'{path}' is not a dotted path like 'package.module.Name'")
    try:
        module = importlib.import_module(module_name)
    except ImportError as err:
        raise ImportError(
            f"cannot import module '{module_name}' for target '{path}': {err}"
        ) from err
    try:
        return getattr(module, attr)
    except AttributeError as err:
        raise ImportError(f"module '{module_name}' has no attribute '{attr}'") from err


def build(spec: Mapping[str, Any], **extra: Any) -> Any:
    """Instantiate ``spec['_target_']`` with the other keys of ``spec`` as keyword arguments."""
    if "_target_" not in spec:
        raise KeyError(f"config {dict(spec)} has no '_target_' naming the class to build")
    kwargs = {k: v for k, v in spec.items() if not k.startswith("_") and k not in RESERVED_KEYS}
    kwargs.update(extra)
    return locate(spec["_target_"])(**kwargs)
