"""Yahoo! Front Page Today Module click logs (Webscope R6A): parsing and per-time-step CTRs.

R6A ("Yahoo! Front Page Today Module User Click Log Dataset, version 1.0") holds 45.8
million visits of May 1-10, 2009, one gzipped file a day (ydata-fp-td-clicks-v1_0.2009050D.gz).
Each line is one visit:

    1241160900 109513 0 |user 2:0.000012 ... 1:1.000000 |109498 2:0.306008 ... 1:1.000000 |109509

the timestamp (seconds), the displayed article (drawn uniformly from the pool), the click
(0/1), the user's features, then one ``|article_id`` block per article in the pool with its
six features (1-based indices 1..6; feature 1 is the constant 1). The features are those of
Chu et al. (2009)'s conjoint analysis, the processing 003 Section 5 refers to.

003 builds a logistic bandit with T = 2881 time steps over May 1-10: 10 days of 5-minute
steps (2880) plus the end point. So visits are grouped into buckets of ``bucket_seconds``
(default 300, epoch-aligned; R6A's sample lines carry timestamps that are multiples of
300 s); the arms of a time step are the articles in the pool during its bucket, and
an arm's expected reward is its click-through rate there: clicks / displays, which the
uniform logging policy makes unbiased. The user features are not used.

Lines with an article block lacking some of its six features (R6A has a few) are kept: the
article's features come from its complete blocks. A line that does not follow the format is
an error naming the file and line.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import zlib
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from sweeper_tasks.storage import (
    DataFile,
    DatasetFormatError,
    DatasetMissingError,
    atomic_save_npz,
    data_dir,
    load_npz,
)

N_FEATURES = 6
FILE_PATTERN = "ydata-fp-td-clicks-v1_0.*"
WEBSCOPE_URL = "https://webscope.sandbox.yahoo.com/catalog.php?datatype=r"
CACHE_SUBDIR = "yahoo-r6a"
PARSER_VERSION = 1


def how_to_get(cache: Path) -> str:
    return (
        'Yahoo! R6A ("Yahoo! Front Page Today Module User Click Log Dataset, version 1.0", '
        "ten gzipped files ydata-fp-td-clicks-v1_0.20090501.gz ... 20090510.gz, 1.1 GB) is "
        f"licensed by Yahoo! Webscope for non-commercial research and may not be redistributed: "
        f"request it at {WEBSCOPE_URL} (dataset R6A), then set dataset.path=/path/to/R6 (the "
        f"directory of the files, or one file), or put the files in {cache / CACHE_SUBDIR}/."
    )


def r6a_files(path: str | Path | None, cache_dir: str | Path | None = None) -> DataFile:
    """Where the R6A click log is (:func:`find_r6a_files`'s choice), without reading it."""
    directory = Path(path).expanduser() if path else data_dir(cache_dir) / CACHE_SUBDIR
    present = directory.is_file() or (
        directory.is_dir() and any(p.is_file() for p in directory.glob(FILE_PATTERN))
    )
    missing = f"licensed: request R6A at {WEBSCOPE_URL}, then set dataset.path"
    return DataFile("Yahoo! R6A click log", str(directory), present, missing)


def find_r6a_files(path: str | Path | None, cache_dir: str | Path | None = None) -> list[Path]:
    """The R6A files: ``path`` (a file or a directory of them), else the cache directory's."""
    cache = data_dir(cache_dir)
    directory = Path(path).expanduser() if path else cache / CACHE_SUBDIR
    if path and directory.is_file():
        return [directory]
    if not directory.is_dir():
        where = f"dataset.path={directory}" if path else f"{directory}/"
        raise DatasetMissingError(f"no Yahoo! R6A click log at {where}.\n{how_to_get(cache)}")
    files = sorted(p for p in directory.glob(FILE_PATTERN) if p.is_file())
    if not files:
        raise DatasetMissingError(
            f"{directory} holds no R6A file (named {FILE_PATTERN}).\n{how_to_get(cache)}"
        )
    return files


@dataclass(frozen=True)
class ClickLog:
    """Per-time-step pools of a click log, with each (time step, article)'s counts.

    Time step t's arms are ``articles[offsets[t]:offsets[t + 1]]`` (indices into
    ``article_ids`` and ``article_features``), with ``displays`` and ``clicks`` alongside.
    """

    step_start: np.ndarray
    offsets: np.ndarray
    articles: np.ndarray
    displays: np.ndarray
    clicks: np.ndarray
    article_ids: np.ndarray
    article_features: np.ndarray
    lines: int
    skipped_lines: int

    @property
    def n_steps(self) -> int:
        return len(self.step_start)

    def arrays(self) -> dict[str, np.ndarray]:
        return {
            "step_start": self.step_start,
            "offsets": self.offsets,
            "articles": self.articles,
            "displays": self.displays,
            "clicks": self.clicks,
            "article_ids": self.article_ids,
            "article_features": self.article_features,
            "counts": np.array([self.lines, self.skipped_lines]),
        }

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray]) -> ClickLog:
        lines, skipped = (int(v) for v in arrays["counts"])
        fields = {k: v for k, v in arrays.items() if k != "counts"}
        return cls(**fields, lines=lines, skipped_lines=skipped)


class _Malformed(ValueError):
    pass


def _features(tokens: list[bytes]) -> tuple[np.ndarray, bool]:
    """A 6-vector from ``k:v`` tokens (k in 1..6) and whether all six were present."""
    vector = np.zeros(N_FEATURES)
    seen = set()
    for token in tokens:
        index, colon, value = token.partition(b":")
        if not colon:
            raise _Malformed(f"feature {token!r} is not index:value")
        try:
            k, v = int(index), float(value)
        except ValueError as err:
            raise _Malformed(f"feature {token!r} is not index:value") from err
        if not 1 <= k <= N_FEATURES or k in seen:
            raise _Malformed(f"feature index {k} is repeated or outside 1..{N_FEATURES}")
        seen.add(k)
        vector[k - 1] = v
    return vector, len(seen) == N_FEATURES


def _is_gzip(path: Path) -> bool:
    with open(path, "rb") as probe:
        return probe.read(2) == b"\x1f\x8b"


def parse_r6a(files: list[Path], bucket_seconds: int = 300) -> ClickLog:
    """Per-bucket article pools and (bucket, article) display and click counts."""
    if bucket_seconds < 1:
        raise ValueError(
            f"bucket_seconds must be a positive number of seconds, got {bucket_seconds}"
        )
    index_of: dict[int, int] = {}  # article id -> index
    features: dict[int, np.ndarray] = {}  # index -> first complete feature vector
    counts: dict[int, dict[int, list[int]]] = {}  # bucket -> article index -> [displays, clicks]
    lines = skipped = 0
    for path in files:
        previous_pool: bytes | None = None
        pool: frozenset[int] = frozenset()
        previous_bucket = None
        number = 0  # the line being read, for error messages
        last = b"\n"
        compressed = _is_gzip(path)
        try:
            with gzip.open(path, "rb") if compressed else open(path, "rb") as handle:
                for number, line in enumerate(handle, start=1):  # noqa: B007 (used after)
                    last = line
                    if not line.strip():
                        continue
                    head, marker, rest = line.partition(b"|user")
                    fields = head.split()
                    if not marker or len(fields) != 3:
                        raise _Malformed(
                            "expected 'timestamp article click |user ... |article ...'"
                        )
                    try:
                        timestamp, shown, click = (int(f) for f in fields)
                    except ValueError as err:
                        raise _Malformed("timestamp, article and click must be integers") from err
                    if click not in (0, 1):
                        raise _Malformed(f"click must be 0 or 1, got {click}")
                    cut = rest.find(b"|")
                    if cut < 0:
                        raise _Malformed("no |article block after the user features")
                    pool_text = rest[cut:]
                    bucket = timestamp // bucket_seconds
                    if pool_text != previous_pool:
                        ids = []
                        for block in pool_text.split(b"|")[1:]:
                            tokens = block.split()
                            if not tokens:
                                raise _Malformed("an empty |article block")
                            try:
                                article = int(tokens[0])
                            except ValueError as err:
                                raise _Malformed(
                                    f"article id {tokens[0]!r} is not an integer"
                                ) from err
                            vector, complete = _features(tokens[1:])
                            index = index_of.setdefault(article, len(index_of))
                            if complete and index not in features:
                                features[index] = vector
                            ids.append(index)
                        pool = frozenset(ids)
                        previous_pool = pool_text
                        previous_bucket = None
                    lines += 1
                    shown_index = index_of.get(shown)
                    if shown_index is None or shown_index not in pool:
                        skipped += 1
                        continue
                    per_article = counts.get(bucket)
                    if per_article is None:
                        per_article = counts[bucket] = {}
                    if bucket != previous_bucket:
                        for index in pool:
                            per_article.setdefault(index, [0, 0])
                        previous_bucket = bucket
                    tally = per_article[shown_index]
                    tally[0] += 1
                    tally[1] += click
        except _Malformed as err:
            raise DatasetFormatError(
                f"{path}, line {number}: {err}; not the R6A format "
                "'timestamp article click |user k:v ... |article_id k:v ...'"
            ) from err
        except (EOFError, OSError, zlib.error) as err:
            raise DatasetFormatError(
                f"{path} could not be read to the end ({err}): the file is truncated or "
                "corrupted; copy or download it again"
            ) from err
        if not compressed and not last.endswith(b"\n"):  # gzip's trailer catches a cut
            raise DatasetFormatError(
                f"{path} ends in the middle of line {number}: the file is truncated; copy or "
                "download it again"
            )
    if not counts:
        raise DatasetFormatError(
            f"{', '.join(map(str, files))}: no usable visit (read {lines} lines); not R6A data"
        )
    usable = sorted(features)
    order = np.full(len(index_of), -1)
    order[usable] = np.arange(len(usable))
    ids = np.empty(len(index_of), dtype=np.int64)
    for article, index in index_of.items():
        ids[index] = article
    step_start, offsets, articles, displays, clicks = [], [0], [], [], []
    for bucket in sorted(counts):
        arms = sorted(i for i in counts[bucket] if order[i] >= 0)
        if not arms:
            continue
        step_start.append(bucket * bucket_seconds)
        articles.extend(order[i] for i in arms)
        displays.extend(counts[bucket][i][0] for i in arms)
        clicks.extend(counts[bucket][i][1] for i in arms)
        offsets.append(len(articles))
    if not step_start:
        raise DatasetFormatError(
            f"{', '.join(map(str, files))}: no article has all {N_FEATURES} features; not R6A data"
        )
    return ClickLog(
        step_start=np.asarray(step_start, dtype=np.int64),
        offsets=np.asarray(offsets, dtype=np.int64),
        articles=np.asarray(articles, dtype=np.int64),
        displays=np.asarray(displays, dtype=np.int64),
        clicks=np.asarray(clicks, dtype=np.int64),
        article_ids=ids[usable],
        article_features=np.array([features[i] for i in usable]).reshape(-1, N_FEATURES),
        lines=lines,
        skipped_lines=skipped,
    )


_MEMO: dict[str, ClickLog] = {}


def r6a_log(
    path: str | Path | None = None, cache_dir: str | Path | None = None, bucket_seconds: int = 300
) -> ClickLog:
    """The parsed click log: from this process's memo, the disk cache, or parsed.

    Parsing the full R6A takes minutes, so the result is cached in
    ``<cache_dir>/yahoo-r6a/parsed-<key>.npz``, keyed by the files' names, sizes and
    modification times and ``bucket_seconds`` (hashing 1.1 GB for every cell would cost
    more than the cell), written atomically for concurrent cells.
    """
    files = find_r6a_files(path, cache_dir)
    identity = [(str(f.resolve()), f.stat().st_size, f.stat().st_mtime_ns) for f in files]
    key_text = json.dumps(
        {"files": identity, "bucket_seconds": int(bucket_seconds), "parser": PARSER_VERSION}
    )
    key = hashlib.sha256(key_text.encode()).hexdigest()[:20]
    if key in _MEMO:
        return _MEMO[key]
    cache_file = data_dir(cache_dir) / CACHE_SUBDIR / f"parsed-{key}.npz"
    cached = load_npz(cache_file)
    try:
        log = ClickLog.from_arrays(cached) if cached is not None else None
    except (KeyError, TypeError, ValueError):
        log = None
    if log is None:
        log = parse_r6a(files, int(bucket_seconds))
        try:
            atomic_save_npz(cache_file, **log.arrays())
        except OSError:
            pass  # a read-only cache directory: parse again next time
    _MEMO[key] = log
    return log
