"""Where datasets and their derived caches live on disk, and how they are written safely.

Cells run concurrently (Ray workers on one machine share the cache directory), so every
cache file is written to a temporary file in the same directory and moved into place
with ``os.replace``: readers see the old state or the complete new file, never a part.
"""

from __future__ import annotations

import hashlib
import io
import os
import tempfile
import zipfile
from pathlib import Path
from typing import NamedTuple

import numpy as np

DATA_DIR_ENV = "SWEEPER_DATA_DIR"


class DatasetMissingError(FileNotFoundError):
    """A dataset file is not where the config says, and it cannot be obtained automatically.

    When the default data directory lies inside a Ray job's uploaded copy of the working
    directory (``ray job submit --working-dir .``), the message says so: that copy has no
    ``.cache/`` (it is gitignored), so the data must be named with ``SWEEPER_DATA_DIR``.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message + uploaded_copy_note())


class DataFile(NamedTuple):
    """A data file (or directory) a cell reads, as found without reading it: what a dry
    run says of the data a sweep needs (its ``run_cell.data`` hook)."""

    name: str  # what it is: "MovieLens 100K ratings"
    path: str  # where it is, or where it was looked for
    present: bool
    missing: str  # what happens, or what to do, when it is not there


def data_files(part: object) -> list[DataFile]:
    """The data files a built part (an environment, a logged-data source) reads: its
    ``data_files()``, else none."""
    files = getattr(part, "data_files", None)
    return list(files()) if files is not None else []


class DatasetFormatError(ValueError):
    """A dataset file exists but is truncated or not in the expected format."""


RAY_UPLOAD_DIR = "working_dir_files"
"""The directory under which Ray unpacks a job's ``--working-dir`` on each node."""


def _checkout_root() -> Path | None:
    """The source checkout this package runs from (``tasks/`` sits at its top), if any."""
    root = Path(__file__).resolve().parents[1]
    return root if (root / "pyproject.toml").is_file() and (root / "tasks").is_dir() else None


def uploaded_copy_note() -> str:
    """A paragraph for missing-data messages when the default data directory is inside a
    Ray job's uploaded copy of the checkout, else ''."""
    if os.environ.get(DATA_DIR_ENV):
        return ""
    root = _checkout_root()
    if root is None or RAY_UPLOAD_DIR not in root.parts:
        return ""
    return (
        f"\nThis job runs from Ray's uploaded copy of your working directory ({root}), which "
        "has no .cache/ (it is gitignored, so `ray job submit --working-dir .` does not upload "
        f'it). Give the job the data directory of the nodes: add "{DATA_DIR_ENV}": '
        '"/path/to/datasets" to the env_vars of --runtime-env-json (docs/clusters.md), a '
        "directory that holds the data at the same path on every node."
    )


def default_data_dir() -> Path:
    """``$SWEEPER_DATA_DIR``; else ``.cache/datasets`` of the source checkout; else ``~/.cache``.

    The same directory on every worker of a machine, whatever its working directory.
    """
    configured = os.environ.get(DATA_DIR_ENV)
    if configured:
        return Path(configured).expanduser()
    root = _checkout_root()
    if root is not None:
        return root / ".cache" / "datasets"
    return Path.home() / ".cache" / "sweeper" / "datasets"


def data_dir(cache_dir: str | os.PathLike | None) -> Path:
    """The configured cache directory, or the default one."""
    return Path(cache_dir).expanduser() if cache_dir else default_data_dir()


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


def atomic_write_bytes(path: Path, payload: bytes) -> None:
    """Write ``payload`` to ``path`` through a temporary file and ``os.replace``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(payload)
            out.flush()
            os.fsync(out.fileno())
        os.chmod(temporary, 0o644)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def atomic_save_npz(path: Path, **arrays: np.ndarray) -> None:
    """``numpy.savez`` of ``arrays`` to ``path``, atomically."""
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    atomic_write_bytes(path, buffer.getvalue())


def load_npz(path: Path) -> dict[str, np.ndarray] | None:
    """The arrays of a cache file, or None when it is absent or unreadable (then rebuild)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            return {key: data[key] for key in data.files}
    except (OSError, ValueError, EOFError, KeyError, zipfile.BadZipFile):
        return None
