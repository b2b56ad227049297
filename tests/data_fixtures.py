"""Dataset fixtures: the real MovieLens 100K ratings, and small R6A-format click logs.

The MovieLens ratings are obtained once into the repository's gitignored cache directory
(``.cache/datasets``, the same place ``make movielens`` fills) from the RecBole wheel on
PyPI, and reused by later sessions. Import the fixtures into a test module with
``from tests.data_fixtures import movielens_file``.
"""

from __future__ import annotations

import gzip
from collections.abc import Iterable, Sequence
from pathlib import Path

import pytest

from sweeper_tasks.bandit_tuning.environments import movielens_data
from sweeper_tasks.storage import default_data_dir


@pytest.fixture(scope="session")
def movielens_file() -> Path:
    """The real MovieLens 100K ratings file (RecBole's ml-100k.inter or GroupLens' files)."""
    cache = default_data_dir()
    found = movielens_data._in_directory(cache)
    if found is None:
        found = movielens_data.fetch_from_recbole_wheel(cache)
    return found


@pytest.fixture(scope="session")
def factor_cache(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A cache directory for factorisations shared by the session's environment tests."""
    return tmp_path_factory.mktemp("movielens-cache")


def _features(values: Sequence[float]) -> str:
    """Six features in R6A's order: indices 2..6, then the constant feature 1."""
    assert len(values) == 6
    return " ".join([f"{k}:{values[k - 1]:.6f}" for k in range(2, 7)] + [f"1:{values[0]:.6f}"])


def r6a_line(
    timestamp: int,
    shown: int,
    click: int,
    pool: dict[int, Sequence[float]],
    user: Sequence[float] = (1.0, 0.1, 0.2, 0.3, 0.2, 0.2),
) -> str:
    """One visit in the R6A format."""
    blocks = " ".join(f"|{article} {_features(values)}" for article, values in pool.items())
    return f"{timestamp} {shown} {click} |user {_features(user)} {blocks}"


def write_r6a(path: Path, lines: Iterable[str], compress: bool = True) -> Path:
    """Write R6A lines to ``path`` (gzipped, like the Webscope files, unless told not to)."""
    text = "".join(f"{line}\n" for line in lines).encode()
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with gzip.open(path, "wb") as out:
            out.write(text)
    else:
        path.write_bytes(text)
    return path
