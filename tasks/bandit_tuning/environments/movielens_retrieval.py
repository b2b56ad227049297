"""Online tuning of a retrieval threshold on MovieLens 100K (004 Sections 6 and 7.1.2).

004 tunes the truncation threshold beta in [0, 1] of vector-based candidate generation:
each round t one user u_t arrives with the ads shown to them, clicked (A+_t) or not (A-_t);
the ads whose cosine similarity M(v_u, v_a) to the user is at least beta are kept, and the
reward is the F-score of 004 Section 7.1.2,

    F_t(beta) = 2 sum_{a in A+_t} 1{M(v_u, v_a) >= beta} / (|A+_t| + sum_{a in A_t} 1{M >= beta}),

with A_t = A+_t u A-_t (0 when the denominator is 0). Users arrive in order of the most
frequent hour of their interaction timestamps, so the best threshold drifts.

004's data (Ali-Display-Ad) and encoder (DSSM) are not obtainable here; this module builds
the same experiment on MovieLens 100K: user and movie embeddings are the factors of
``movielens_data.movielens_factors`` (003's rank-20 factorisation; the cosine is scale-free,
so their unit-ball scaling does not matter), A+ = the movies the user rated >= ``like`` (4),
A- = those rated below. Users are ordered by the most frequent UTC hour of their rating
timestamps (``order: hour``, 004's rule; ties between hours go to the earliest hour, ties
between users to the smaller user id) or by their most frequent day (``order: day``, the
calendar order of the 7 months MovieLens 100K spans). The stream is deterministic: the
seed only changes the tuners' randomness, as 004's Table 1 implies (grid search has
standard deviation 0.0 over its ten runs).

Stream length. MovieLens 100K has 943 users; 004 draws T = 10,000 rounds from 1,061,768
users and never revisits one. A horizon longer than the stream is refused unless
``passes`` > 1 repeats the ordered stream (each pass one sweep through the hours, so the
drift becomes periodic): an explicit departure from 004 that an experiment must choose.

Each user's similarities are computed once (one vectorised pass over the 100,000 ratings)
and sorted, so F_t(beta) costs two binary searches.

Ali-Display-Ad. A loader for 004's own data would need, from ``raw_sample.csv``: ``user``
(user id), ``time_stamp`` (seconds), ``adgroup_id`` (the ad) and ``clk`` (1 clicked, 0 not;
``nonclk`` is its complement), plus the user's own embeddings: one vector per ``user`` id
and one per ``adgroup_id`` (004 trains DSSM on ``user_profile.csv`` and ``ad_feature.csv``
for them). No such loader exists here; we do not invent one.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sweeper_tasks.bandit_tuning.environments.movielens_data import (
    find_ratings_file,
    movielens_factors,
    ratings_file,
    read_ratings,
)
from sweeper_tasks.storage import DataFile

ORDERS = ("hour", "day")
CANDIDATES = tuple(round(0.1 * k, 1) for k in range(11))
"""The candidate thresholds of the discrete tuners (OP, TL): 0, 0.1, ..., 1."""
SECONDS_PER_HOUR, SECONDS_PER_DAY = 3600, 86400


def f_score(similarities: np.ndarray, liked: np.ndarray, beta: np.ndarray | float) -> np.ndarray:
    """004's F_t for one user, computed directly (the slow, obvious reference).

    Parameters
    ----------
    similarities : ndarray, shape (n,)
        M(v_u, v_a) of every ad a in A_t.
    liked : ndarray of bool, shape (n,)
        a in A+_t.
    beta : float or ndarray, shape (k,)
        Thresholds.

    Returns
    -------
    ndarray, shape (k,) (or a scalar array)
    """
    beta = np.asarray(beta, dtype=float)
    kept = similarities[None, :] >= beta.reshape(-1, 1)
    hits = (kept & liked[None, :]).sum(axis=1)
    denominator = liked.sum() + kept.sum(axis=1)
    out = np.where(denominator > 0, 2.0 * hits / np.maximum(denominator, 1), 0.0)
    return out.reshape(beta.shape)


def most_frequent(values: np.ndarray, groups: np.ndarray, n_groups: int) -> np.ndarray:
    """Per group, the most frequent value (the smallest among equally frequent ones)."""
    keys, counts = np.unique(np.stack([groups, values]), axis=1, return_counts=True)
    # sort by group, then count descending, then value ascending; first row per group wins
    order = np.lexsort((keys[1], -counts, keys[0]))
    first = np.unique(keys[0][order], return_index=True)[1]
    out = np.full(n_groups, -1, dtype=np.int64)
    out[keys[0][order][first]] = keys[1][order][first]
    return out


@dataclass(frozen=True)
class RetrievalData:
    """Per user, sorted similarities of all rated movies and of the liked ones (CSR)."""

    all_sims: np.ndarray  # ratings sorted by (user, similarity)
    all_start: np.ndarray  # shape (n_users + 1,)
    liked_sims: np.ndarray
    liked_start: np.ndarray
    order: np.ndarray  # user indices in arrival order
    key: np.ndarray  # the hour (or day) each user is ordered by, per user


_MEMO: dict[tuple, RetrievalData] = {}


def _csr(users: np.ndarray, sims: np.ndarray, n_users: int) -> tuple[np.ndarray, np.ndarray]:
    rows = np.lexsort((sims, users))
    start = np.searchsorted(users[rows], np.arange(n_users + 1))
    return sims[rows], start


def count_at_least(sims: np.ndarray, start: np.ndarray, user: int, beta) -> np.ndarray:
    """#{a of ``user``: M >= beta}, by binary search in the user's sorted slice."""
    segment = sims[start[user] : start[user + 1]]
    return len(segment) - np.searchsorted(segment, beta, side="left")


class MovieLensRetrieval:
    """Threshold tuning for vector retrieval on MovieLens 100K, one user per round (004 7.1.2).

    Used by the tuner-only cell (``lipschitz_cell``): the tuner's one hyperparameter x is
    the threshold beta in [0, 1]; the reward is F_t(beta), deterministic given the round.

    Parameters
    ----------
    path, cache_dir, download, n_features, regularisation, iterations, factorisation_seed
        Where the ratings are and how they are factorised (as ``dataset=movielens``).
    like : int
        Ratings >= like are A+ (clicked), the others A- (004: clicks).
    order : str
        ``hour`` (004) or ``day``: the most frequent hour or day of a user's ratings.
    passes : int
        How many times the ordered stream may be repeated (1: a horizon above 943 is refused).
    candidates : sequence of float
        Thresholds the discrete tuners (OP, TL) choose from.
    """

    def __init__(
        self,
        path: str | None = None,
        cache_dir: str | None = None,
        download: bool = True,
        n_features: int = 20,
        regularisation: float = 10.0,
        iterations: int = 20,
        factorisation_seed: int = 0,
        like: int = 4,
        order: str = "hour",
        passes: int = 1,
        candidates: Sequence[float] = CANDIDATES,
    ) -> None:
        if order not in ORDERS:
            raise ValueError(
                f"movielens_retrieval: unknown order '{order}'; choose one of {ORDERS}"
            )
        if int(passes) < 1:
            raise ValueError(f"movielens_retrieval: passes must be at least 1, got {passes}")
        if not 2 <= int(like) <= 5:
            raise ValueError(
                f"movielens_retrieval: like must be a rating from 2 to 5 (A+ = ratings >= like),"
                f" got {like}"
            )
        self.candidates = tuple(float(c) for c in candidates)
        if not self.candidates or not all(0.0 <= c <= 1.0 for c in self.candidates):
            raise ValueError(
                f"movielens_retrieval: candidates must be thresholds in [0, 1], got {candidates}"
            )
        self.path = path
        self.cache_dir = cache_dir
        self.download = bool(download)
        self.factorisation = {
            "rank": int(n_features),
            "regularisation": float(regularisation),
            "iterations": int(iterations),
            "seed": int(factorisation_seed),
        }
        self.like = int(like)
        self.order = order
        self.passes = int(passes)
        self.change_points = np.zeros(0, dtype=int)  # unknown: no oracle restarts here

    # ------------------------------------------------------------------ data

    def data(self) -> RetrievalData:
        """Similarities and the arrival order (memoised per process)."""
        factors = movielens_factors(self.path, self.cache_dir, self.download, **self.factorisation)
        key = (str(factors.ratings_file), tuple(self.factorisation.items()), self.like, self.order)
        if key not in _MEMO:
            ratings = read_ratings(find_ratings_file(self.path, self.cache_dir, self.download))
            users_unit = factors.users / np.linalg.norm(factors.users, axis=1, keepdims=True)
            movies_unit = factors.movies / np.linalg.norm(factors.movies, axis=1, keepdims=True)
            sims = np.einsum("ij,ij->i", users_unit[ratings.users], movies_unit[ratings.movies])
            n = ratings.n_users
            all_sims, all_start = _csr(ratings.users, sims, n)
            liked = ratings.ratings >= self.like
            liked_sims, liked_start = _csr(ratings.users[liked], sims[liked], n)
            seconds = ratings.timestamps.astype(np.int64)
            if self.order == "hour":
                values = (seconds // SECONDS_PER_HOUR) % 24
            else:
                values = seconds // SECONDS_PER_DAY
            user_key = most_frequent(values, ratings.users, n)
            order = np.lexsort((np.arange(n), user_key))
            _MEMO[key] = RetrievalData(
                all_sims, all_start, liked_sims, liked_start, order, user_key
            )
        return _MEMO[key]

    def data_files(self) -> list[DataFile]:
        """The ratings, found without reading or downloading them (a dry run)."""
        return [ratings_file(self.path, self.cache_dir, self.download)]

    @property
    def stream_length(self) -> int:
        return self.passes * len(self.data().order)

    def check(self, horizon: int | None = None) -> None:
        """Load (or download) and factorise the ratings; refuse a horizon beyond the stream."""
        data = self.data()
        if horizon is not None and horizon > self.passes * len(data.order):
            n = len(data.order)
            raise ValueError(
                f"movielens_retrieval: horizon T = {horizon} is longer than the user stream "
                f"({n} users x passes = {self.passes}: {n * self.passes} rounds). 004 never "
                f"shows a user twice (it draws 10,000 rounds from a million users), so the "
                f"stream is not cycled silently: lower horizon to at most {n * self.passes}, "
                f"or set dataset.passes to at least {-(-horizon // n)} to repeat the "
                "hour-ordered stream (a departure from 004: the drift becomes periodic)."
            )

    # ------------------------------------------------------------------ rounds

    def reset(self, horizon: int, rng: np.random.Generator) -> None:
        self.check(horizon)
        self.horizon = int(horizon)
        self._data = self.data()
        self.stream = np.tile(self._data.order, self.passes)[: self.horizon]
        self._best = self.best_per_user()

    def user(self, t: int) -> int:
        """The user (0-based index) of round ``t`` (0-based)."""
        return int(self.stream[t])

    def f(self, user: int, beta: np.ndarray | float) -> np.ndarray:
        """F(beta) of ``user`` for one threshold or an array of them (fast path)."""
        d = self._data if hasattr(self, "_data") else self.data()
        kept = count_at_least(d.all_sims, d.all_start, user, beta)
        hits = count_at_least(d.liked_sims, d.liked_start, user, beta)
        liked = d.liked_start[user + 1] - d.liked_start[user]
        denominator = liked + kept
        return np.where(denominator > 0, 2.0 * hits / np.maximum(denominator, 1), 0.0)

    def mean(self, t: int, x: np.ndarray | float) -> np.ndarray | float:
        """F_t(x): deterministic, so the mean and the reward coincide."""
        return self.f(self.user(t), x)

    def reward(self, t: int, x: float) -> float:
        return float(self.mean(t, x))

    def best_per_user(self) -> np.ndarray:
        """max_{beta in [0, 1]} F(beta) per user: F only changes at the user's similarities,
        so the maximum is at one of them (clipped to [0, 1]) or at 0."""
        d = self.data()
        out = np.empty(len(d.all_start) - 1)
        for user in range(len(out)):
            segment = d.all_sims[d.all_start[user] : d.all_start[user + 1]]
            betas = np.concatenate([[0.0], np.clip(segment, 0.0, 1.0)])
            out[user] = self.f(user, betas).max()
        return out

    def best_mean(self, t: int) -> float:
        return float(self._best[self.user(t)])

    def curve(self, rounds: np.ndarray, betas: np.ndarray) -> np.ndarray:
        """Sum of F_t(beta) over ``rounds`` for every beta of ``betas``."""
        total = np.zeros(len(betas))
        users, times = np.unique(self.stream[rounds], return_counts=True)
        for user, k in zip(users, times, strict=True):
            total += k * self.f(int(user), betas)
        return total

    def best_fixed(self, resolution: int = 10001) -> tuple[float, float]:
        """The best fixed threshold in hindsight over the horizon, on a grid of [0, 1]."""
        betas = np.linspace(0.0, 1.0, resolution)
        total = self.curve(np.arange(self.horizon), betas)
        best = int(np.argmax(total))
        return float(betas[best]), float(total[best])

    def params(self) -> dict[str, float | str]:
        beta, total = self.best_fixed()
        return {
            "retrieval.order": self.order,
            "retrieval.passes": self.passes,
            "retrieval.stream_users": len(self._data.order),
            "retrieval.best_fixed_beta": beta,
            "retrieval.best_fixed_cumulative_F": total,
            "retrieval.per_round_best_cumulative_F": float(self._best[self.stream].sum()),
        }


def plot_reward_shape(out: str, environment: MovieLensRetrieval, per_end: int = 4) -> None:
    """F(beta) for users early and late in the stream, and the whole stream's mean curve
    with its best fixed beta in hindsight (the skyline)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    environment.reset(len(environment.data().order), np.random.default_rng(0))
    betas = np.linspace(0.0, 1.0, 501)
    n = environment.horizon
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    picks = {
        "early": np.linspace(0, n // 10, per_end).astype(int),
        "late": np.linspace(n - 1 - n // 10, n - 1, per_end).astype(int),
    }
    for ax, (name, rounds) in zip(axes[:2], picks.items(), strict=True):
        for t in rounds:
            user = environment.user(int(t))
            key = f"{environment.order} {environment._data.key[user]}"
            ax.plot(betas, environment.f(user, betas), label=f"t={t + 1}, user {user + 1} ({key})")
        ax.set_title(f"F(beta), users {name} in the stream")
        ax.set_xlabel("beta")
        ax.legend(fontsize=7)
    thirds = np.array_split(np.arange(n), 3)
    for label, rounds in zip(("first third", "middle third", "last third"), thirds, strict=True):
        mean = environment.curve(rounds, betas) / len(rounds)
        axes[2].plot(betas, mean, label=f"{label}: best {betas[np.argmax(mean)]:.2f}")
    beta, total = environment.best_fixed()
    axes[2].axvline(beta, color="k", ls=":", label=f"best fixed (all): {beta:.3f}")
    axes[2].set_title(f"mean F(beta) by part of the stream (order: {environment.order})")
    axes[2].set_xlabel("beta")
    axes[2].legend(fontsize=7)
    windows = np.array_split(np.arange(n), windows_count := 20)
    best = [betas[np.argmax(environment.curve(w, betas))] for w in windows]
    middle = [int(w[len(w) // 2]) + 1 for w in windows]
    axes[3].step(middle, best, where="mid", label="best beta of the window")
    axes[3].axhline(beta, color="k", ls=":", label="best fixed (all)")
    axes[3].set_ylim(0.0, 1.0)
    axes[3].set_title(f"best beta over {windows_count} windows of the stream")
    axes[3].set_xlabel("round t")
    axes[3].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description="Plot F(beta) of the retrieval environment.")
    parser.add_argument("--out", required=True, help="the PNG to write")
    parser.add_argument("--order", default="hour", choices=ORDERS)
    parser.add_argument("--cache-dir", default=None)
    args = parser.parse_args(argv)
    environment = MovieLensRetrieval(cache_dir=args.cache_dir, order=args.order)
    plot_reward_shape(args.out, environment)
    environment.reset(environment.stream_length, np.random.default_rng(0))
    beta, total = environment.best_fixed()
    print(f"best fixed beta {beta:.4f}: cumulative F {total:.1f} over {environment.horizon}")


if __name__ == "__main__":
    main()
