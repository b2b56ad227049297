"""MovieLens 100K: getting the ratings, checking them, and factorising them (003 Section 5).

The ratings (943 users, 1682 movies, 100,000 ratings from 1 to 5) come from GroupLens
(https://grouplens.org/datasets/movielens/100k/). Three layouts of the same ratings are
accepted: GroupLens' ``ml-100k.zip``, its ``u.data`` (tab-separated user, movie, rating,
timestamp), and RecBole's atomic file ``ml-100k.inter`` (a header line, then the same four
columns), which the RecBole wheel on PyPI ships in full, so machines that reach only
PyPI can get the real file (``fetch_from_recbole_wheel``; ``make movielens``).

Features: 003 factorises the rating matrix with LIBPMF (Yu et al. 2014), whose model is
min_{U,V} sum_{(i,j) observed} (r_ij - u_i'v_j)^2 + lambda (||U||_F^2 + ||V||_F^2).
``factorise`` minimises the same objective by alternating least squares: with V fixed each
user row is a ridge regression on the movies that user rated, solved for all users at once
(per-user Gram matrices come from one sparse product with the movies' outer products), and
the same for movies. The factors are cached on disk, keyed by the SHA-256 of the ratings
file and the factorisation parameters, so a sweep factorises once.

Run ``python -m sweeper_tasks.bandit_tuning.environments.movielens_data`` to fetch the ratings
into the cache directory and factorise them (``--help`` for options).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import urllib.error
import urllib.request
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
from scipy import sparse

from sweeper_tasks.storage import (
    DataFile,
    DatasetFormatError,
    DatasetMissingError,
    atomic_save_npz,
    atomic_write_bytes,
    data_dir,
    load_npz,
    sha256_file,
)
from sweeper_tasks.wheels import read_wheel_members

GROUPLENS_URL = "https://files.grouplens.org/datasets/movielens/ml-100k.zip"
#: SHA-256 of GroupLens' ml-100k.zip (4,924,029 bytes; the MD5 GroupLens publishes is
#: 0e33842e24a9c977be4e0107933c0723).
ZIP_SHA256 = "50d2a982c66986937beb9ffb3aa76efe955bf3d5c6b761f4e3a7cd717c6a3229"
ZIP_NAME = "ml-100k.zip"
ZIP_MEMBER = "ml-100k/u.data"
RECBOLE_VERSION = "1.2.1"
RECBOLE_MEMBER = "recbole/dataset_example/ml-100k/ml-100k.inter"
INTER_NAME = "ml-100k.inter"
#: Files looked for, in this order, in a directory (the cache directory or dataset.path).
CANDIDATES = (ZIP_NAME, "ml-100k/u.data", "u.data", INTER_NAME)
RECBOLE_COLUMNS = ("user_id", "item_id", "rating", "timestamp")

N_USERS, N_MOVIES, N_RATINGS = 943, 1682, 100_000


def how_to_get(cache: Path) -> str:
    """The ways to provide the ratings, for error messages."""
    return (
        "MovieLens 100K (GroupLens, free for research; see its README for the terms) can be "
        "provided in any of these ways:\n"
        f"  - download {GROUPLENS_URL} and either put it in {cache}/ or set "
        "dataset.path=/path/to/ml-100k.zip (or to its extracted u.data);\n"
        "  - without access to grouplens.org: `make movielens` (or `python -m "
        "sweeper_tasks.bandit_tuning.environments.movielens_data --source recbole`) extracts the "
        f"same ratings from the RecBole {RECBOLE_VERSION} wheel on PyPI into {cache}/"
        f"{INTER_NAME};\n"
        "  - set dataset.cache_dir=DIR (or $SWEEPER_DATA_DIR) to a directory holding one of "
        f"{', '.join(CANDIDATES)}."
    )


@dataclass(frozen=True)
class Ratings:
    """Observed ratings with 0-based user and movie indices."""

    users: np.ndarray
    movies: np.ndarray
    ratings: np.ndarray
    n_users: int
    n_movies: int
    source: Path
    timestamps: np.ndarray | None = None  # seconds since 1970 (UTC), one per rating

    def subset(self, rows: np.ndarray) -> Ratings:
        return Ratings(
            self.users[rows],
            self.movies[rows],
            self.ratings[rows],
            self.n_users,
            self.n_movies,
            self.source,
            None if self.timestamps is None else self.timestamps[rows],
        )


# --------------------------------------------------------------------------- locating


def _in_directory(directory: Path) -> Path | None:
    for name in CANDIDATES:
        candidate = directory / name
        if candidate.is_file():
            return candidate
    return None


def find_ratings_file(
    path: str | Path | None, cache_dir: str | Path | None = None, download: bool = True
) -> Path:
    """The ratings file: ``path`` if set; else one in the cache directory; else downloaded.

    ``path`` may name ml-100k.zip, u.data, ml-100k.inter, or a directory holding one.
    """
    cache = data_dir(cache_dir)
    if path:
        given = Path(path).expanduser()
        if given.is_dir():
            found = _in_directory(given)
            if found is None:
                raise DatasetMissingError(
                    f"dataset.path={given} is a directory without any of {', '.join(CANDIDATES)}."
                    f"\n{how_to_get(cache)}"
                )
            return found
        if not given.is_file():
            raise DatasetMissingError(f"dataset.path={given} does not exist.\n{how_to_get(cache)}")
        return given
    found = _in_directory(cache)
    if found is not None:
        return found
    if not download:
        raise DatasetMissingError(
            f"MovieLens 100K ratings not found in {cache}/ and dataset.download=false.\n"
            f"{how_to_get(cache)}"
        )
    return download_movielens(cache)


def ratings_file(
    path: str | Path | None, cache_dir: str | Path | None = None, download: bool = True
) -> DataFile:
    """Where the ratings are (:func:`find_ratings_file`'s choice), found without reading
    them or downloading anything."""
    cache = data_dir(cache_dir)
    given = Path(path).expanduser() if path else None
    found = given if given is not None and given.is_file() else None
    found = found or _in_directory(given if given is not None else cache)
    where = found or given or cache
    if given is None and download:
        missing = f"downloaded from {GROUPLENS_URL} before the first cell (offline: make movielens)"
    else:
        missing = "set dataset.path, or `make movielens` (offline)"
    return DataFile("MovieLens 100K ratings", str(where), found is not None, missing)


def download_movielens(cache: Path, url: str = GROUPLENS_URL, timeout: float = 60.0) -> Path:
    """Download ml-100k.zip into ``cache``, check its SHA-256, and return its path."""
    target = cache / ZIP_NAME
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            payload = response.read()
    except (urllib.error.URLError, OSError, ValueError) as err:
        raise DatasetMissingError(
            f"MovieLens 100K ratings not found in {cache}/ and downloading {url} failed "
            f"({err}).\n{how_to_get(cache)}"
        ) from err
    digest = hashlib.sha256(payload).hexdigest()
    if digest != ZIP_SHA256:
        raise DatasetFormatError(
            f"the file downloaded from {url} has SHA-256 {digest}, not {ZIP_SHA256} "
            f"({len(payload)} bytes): an interrupted or altered download; try again.\n"
            f"{how_to_get(cache)}"
        )
    atomic_write_bytes(target, payload)
    return target


def fetch_from_recbole_wheel(cache: str | Path | None = None) -> Path:
    """Extract RecBole's ml-100k.inter (all 100,000 ratings) from its wheel on PyPI.

    Runs ``pip download --no-deps recbole==1.2.1`` (RecBole is not installed) and copies
    the one member into ``cache``/ml-100k.inter. Returns its path.
    """
    target = data_dir(cache) / INTER_NAME
    how = how_to_get(target.parent)
    payload = read_wheel_members("recbole", RECBOLE_VERSION, [RECBOLE_MEMBER], how)[RECBOLE_MEMBER]
    _parse(payload, Path(f"recbole=={RECBOLE_VERSION}!{RECBOLE_MEMBER}"))  # real ratings, checked
    atomic_write_bytes(target, payload)
    return target


# --------------------------------------------------------------------------- reading


def _shown(line: str) -> str:
    """A line quoted for an error message: at most 80 characters, never binary noise."""
    if any(not (c.isprintable() or c == "\t") for c in line[:200]):
        return "(binary data, not text)"
    return repr(line[:80])


def _bad_line(payload: bytes, source: Path, header: bool) -> str:
    """The first line that is not four tab-separated integers (slow; only on errors)."""
    for number, line in enumerate(payload.decode("utf-8", "replace").splitlines(), start=1):
        if header and number == 1:
            continue
        fields = line.split("\t")
        if len(fields) != 4:
            return f"line {number} has {len(fields)} tab-separated fields, not 4: {_shown(line)}"
        try:
            [float(field) for field in fields]
        except ValueError:
            return f"line {number} is not four numbers: {_shown(line)}"
    return "the file could not be parsed"


def _parse(payload: bytes, source: Path) -> Ratings:
    """Ratings from u.data or RecBole .inter bytes, checked to be all of MovieLens 100K."""
    if not payload.strip():
        raise DatasetFormatError(f"{source} is empty; expected the MovieLens 100K ratings")
    first = payload.split(b"\n", 1)[0].decode("utf-8", "replace").strip()
    header = not first.split("\t")[0].strip().lstrip("-").isdigit()
    if header:
        names = tuple(field.split(":")[0] for field in first.split("\t"))
        if names != RECBOLE_COLUMNS:
            raise DatasetFormatError(
                f"{source} starts with {_shown(first)}; expected u.data (no header: user, "
                f"movie, rating, timestamp, tab-separated) or RecBole's atomic header with "
                f"columns {', '.join(RECBOLE_COLUMNS)}"
            )
    try:
        table = pd.read_csv(
            io.BytesIO(payload),
            sep="\t",
            header=None,
            skiprows=1 if header else 0,
            dtype=np.float64,
            engine="c",
        )
    except (ValueError, pd.errors.ParserError) as err:
        raise DatasetFormatError(
            f"{source} is malformed: {_bad_line(payload, source, header)} ({err})"
        ) from err
    if table.shape[1] != 4 or table.isna().to_numpy().any():
        raise DatasetFormatError(f"{source} is malformed: {_bad_line(payload, source, header)}")
    values = table.to_numpy()
    users, movies, ratings = values[:, 0], values[:, 1], values[:, 2]
    if len(values) != N_RATINGS:
        raise DatasetFormatError(
            f"{source} has {len(values):,} ratings; MovieLens 100K has {N_RATINGS:,}: the file "
            "is truncated or is not MovieLens 100K. Replace it with a complete copy."
        )
    for name, column, high in (("user", users, N_USERS), ("movie", movies, N_MOVIES)):
        ids = np.unique(column)
        if not (np.array_equal(ids, np.arange(1, high + 1))):
            raise DatasetFormatError(
                f"{source}: {name} ids should be exactly 1..{high} in MovieLens 100K, found "
                f"{len(ids)} distinct ids from {ids.min():g} to {ids.max():g}: not MovieLens 100K"
                " or a corrupted file"
            )
    if not np.all(np.isin(ratings, (1, 2, 3, 4, 5))):
        bad = ratings[~np.isin(ratings, (1, 2, 3, 4, 5))][0]
        raise DatasetFormatError(
            f"{source}: ratings must be integers from 1 to 5, found {bad:g}; corrupted file"
        )
    users_i, movies_i = users.astype(np.int64) - 1, movies.astype(np.int64) - 1
    pairs = users_i * N_MOVIES + movies_i
    if len(np.unique(pairs)) != len(pairs):
        raise DatasetFormatError(f"{source}: a (user, movie) pair is rated twice; corrupted file")
    return Ratings(users_i, movies_i, ratings, N_USERS, N_MOVIES, source, values[:, 3])


def read_ratings(path: str | Path) -> Ratings:
    """All 100,000 ratings from ml-100k.zip, u.data or ml-100k.inter, with clear errors."""
    path = Path(path)
    if zipfile.is_zipfile(path):
        try:
            with zipfile.ZipFile(path) as archive:
                payload = archive.read(ZIP_MEMBER)
        except (KeyError, zipfile.BadZipFile, OSError) as err:
            raise DatasetFormatError(
                f"{path} is not GroupLens' ml-100k.zip ({err}); download it again from "
                f"{GROUPLENS_URL}"
            ) from err
        return _parse(payload, Path(f"{path}!{ZIP_MEMBER}"))
    if path.suffix == ".zip":
        raise DatasetFormatError(
            f"{path} is not a readable zip archive (truncated download?); download it again "
            f"from {GROUPLENS_URL}"
        )
    return _parse(path.read_bytes(), path)


# --------------------------------------------------------------------------- factorising


def _solve_rows(
    mask: sparse.csr_matrix, values: sparse.csr_matrix, other: np.ndarray, regularisation: float
) -> np.ndarray:
    """Every row's ridge solution (sum_j o_j o_j' + lambda I)^-1 sum_j r_ij o_j, at once.

    The sums run over the row's observed entries; the Gram matrices of all rows come from
    one sparse product of the observation mask with the flattened outer products o_j o_j'.
    """
    rank = other.shape[1]
    outer = (other[:, :, None] * other[:, None, :]).reshape(len(other), rank * rank)
    gram = np.asarray(mask @ outer).reshape(-1, rank, rank)
    gram[:, np.arange(rank), np.arange(rank)] += regularisation
    rhs = np.asarray(values @ other)
    return np.linalg.solve(gram, rhs[:, :, None])[:, :, 0]


def factorise(
    ratings: Ratings,
    rank: int = 20,
    regularisation: float = 10.0,
    iterations: int = 20,
    seed: int = 0,
) -> tuple[np.ndarray, np.ndarray]:
    """User (n_users x rank) and movie (n_movies x rank) factors by alternating least squares.

    Minimises sum_observed (r_ij - u_i'v_j)^2 + regularisation * (||U||^2 + ||V||^2), the
    LIBPMF objective, from movie factors drawn N(0, 1/rank) with ``seed``.
    """
    shape = (ratings.n_users, ratings.n_movies)
    coordinates = (ratings.users, ratings.movies)
    values = sparse.csr_matrix((ratings.ratings, coordinates), shape=shape)
    mask = sparse.csr_matrix((np.ones(len(ratings.ratings)), coordinates), shape=shape)
    values_t, mask_t = values.T.tocsr(), mask.T.tocsr()
    movies = np.random.default_rng(seed).normal(0.0, 1.0 / np.sqrt(rank), (shape[1], rank))
    users = np.zeros((shape[0], rank))
    for _ in range(iterations):
        users = _solve_rows(mask, values, movies, regularisation)
        movies = _solve_rows(mask_t, values_t, users, regularisation)
    return users, movies


def rmse(users: np.ndarray, movies: np.ndarray, ratings: Ratings) -> float:
    """Root mean squared error of u_i'v_j on the given ratings."""
    predicted = np.einsum("ij,ij->i", users[ratings.users], movies[ratings.movies])
    return float(np.sqrt(np.mean((predicted - ratings.ratings) ** 2)))


def holdout_rmse(
    ratings: Ratings, fraction: float = 0.1, split_seed: int = 0, **params
) -> dict[str, float]:
    """Held-out RMSE of the factorisation against the global-mean predictor.

    A random ``fraction`` of the ratings is held out; the factors and the global mean are
    fitted on the rest.
    """
    order = np.random.default_rng(split_seed).permutation(len(ratings.ratings))
    cut = int(round(fraction * len(order)))
    test, train = ratings.subset(order[:cut]), ratings.subset(order[cut:])
    users, movies = factorise(train, **params)
    mean = float(train.ratings.mean())
    return {
        "factorisation": rmse(users, movies, test),
        "global_mean": float(np.sqrt(np.mean((test.ratings - mean) ** 2))),
        "train": rmse(users, movies, train),
    }


def into_unit_ball(features: np.ndarray) -> np.ndarray:
    """Scale all rows by one factor so the longest has norm 1 (directions and ratios kept)."""
    longest = float(np.linalg.norm(features, axis=1).max())
    return features / longest if longest > 0 else features


# --------------------------------------------------------------------------- caching


@dataclass(frozen=True)
class Factors:
    """Unit-ball user and movie features of MovieLens 100K and where they came from."""

    users: np.ndarray
    movies: np.ndarray
    train_rmse: float
    ratings_file: Path
    cache_file: Path | None


_MEMO: dict[tuple, Factors] = {}


def movielens_factors(
    path: str | Path | None = None,
    cache_dir: str | Path | None = None,
    download: bool = True,
    rank: int = 20,
    regularisation: float = 10.0,
    iterations: int = 20,
    seed: int = 0,
) -> Factors:
    """The factorised features: from this process's memo, the disk cache, or computed.

    The disk cache (``<cache_dir>/movielens/factors-<key>.npz``) is keyed by the SHA-256 of
    the ratings file and the factorisation parameters and written atomically, so
    concurrent cells neither repeat the work once it is cached nor see half a file.
    """
    source = find_ratings_file(path, cache_dir, download)
    stat = source.stat()
    params = {
        "rank": int(rank),
        "regularisation": float(regularisation),
        "iterations": int(iterations),
        "seed": int(seed),
    }
    memo_key = (str(source.resolve()), stat.st_size, stat.st_mtime_ns, tuple(params.items()))
    if memo_key in _MEMO:
        return _MEMO[memo_key]
    key_text = json.dumps({"ratings_sha256": sha256_file(source), **params}, sort_keys=True)
    key = hashlib.sha256(key_text.encode()).hexdigest()[:20]
    cache_file = data_dir(cache_dir) / "movielens" / f"factors-{key}.npz"
    cached = load_npz(cache_file)
    if cached is not None and {"users", "movies", "train_rmse"} <= set(cached):
        users, movies, train = cached["users"], cached["movies"], float(cached["train_rmse"])
    else:
        ratings = read_ratings(source)
        users, movies = factorise(ratings, **params)
        train = rmse(users, movies, ratings)
        try:
            atomic_save_npz(
                cache_file,
                users=users,
                movies=movies,
                train_rmse=np.array(train),
                key=np.array(key_text),
            )
        except OSError:
            cache_file = None  # a read-only cache directory: compute, do not cache
    factors = Factors(into_unit_ball(users), into_unit_ball(movies), train, source, cache_file)
    _MEMO[memo_key] = factors
    return factors


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--source",
        choices=("auto", "grouplens", "recbole"),
        default="auto",
        help="auto: use a file already in the cache directory, else download from GroupLens; "
        "recbole: extract the ratings from the RecBole wheel on PyPI",
    )
    parser.add_argument("--cache-dir", default=None, help="default: $SWEEPER_DATA_DIR or .cache")
    parser.add_argument("--path", default=None, help="an existing ratings file to factorise")
    args = parser.parse_args(argv)
    cache = data_dir(args.cache_dir)
    path = args.path
    if args.source == "recbole" and not path and _in_directory(cache) is None:
        path = fetch_from_recbole_wheel(cache)
    elif args.source == "grouplens" and not path and not (cache / ZIP_NAME).is_file():
        path = download_movielens(cache)
    factors = movielens_factors(path, args.cache_dir)
    print(f"ratings: {factors.ratings_file}")
    print(f"features: {factors.users.shape} users, {factors.movies.shape} movies")
    print(f"factorisation cache: {factors.cache_file} (training RMSE {factors.train_rmse:.4f})")


if __name__ == "__main__":
    main()
