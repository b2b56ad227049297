"""The ``cell.npz`` artifact: a cell's curves (``curve_<name>``) and trace (``trace_<key>``)
as compressed arrays, and its whole config as JSON (``config``: MLflow cuts a param at 500
characters), packed where the cell ran (so the driver only writes the bytes) and read back
when a table row is rebuilt from its run."""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from typing import Any

import numpy as np


def pack(result: Mapping[str, Any], config: Mapping[str, Any] | None = None) -> bytes | None:
    """A result's curves and trace, and the cell's ``config``, as compressed ``.npz`` bytes;
    None when the result has neither curves nor trace."""
    arrays: dict[str, np.ndarray] = {}
    for key, value in (result.get("curves") or {}).items():
        arrays[f"curve_{key}"] = np.asarray(value)
    for key, value in (result.get("trace") or {}).items():
        arrays[f"trace_{key}"] = np.asarray(value)
    if not arrays:
        return None
    if config is not None:
        arrays["config"] = np.array(json.dumps(config, sort_keys=True, default=str))
    buffer = io.BytesIO()
    np.savez_compressed(buffer, **arrays)
    return buffer.getvalue()


def unpack(data: bytes) -> dict[str, Any]:
    """``{"curves": {name: array}, "trace": {key: array}, "config": dict or None}`` of
    :func:`pack`'s bytes."""
    with np.load(io.BytesIO(data)) as npz:
        arrays = {k: npz[k] for k in npz.files}
    return {
        "curves": {k[6:]: v for k, v in arrays.items() if k.startswith("curve_")},
        "trace": {k[6:]: v for k, v in arrays.items() if k.startswith("trace_")},
        "config": json.loads(str(arrays["config"])) if "config" in arrays else None,
    }
