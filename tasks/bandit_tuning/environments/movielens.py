"""MovieLens 100K bandit (003 Section 5; 002 Section 6 with other settings).

The 943 x 1682 rating matrix is factorised into d = 20 user and movie features
(``movielens_data.factorise``: the LIBPMF objective by alternating least squares), each
set scaled into the unit ball. Each run: theta* is the average of ``n_users`` randomly
chosen users' features (003: 300; 002: 100); each round K = ``n_arms`` movies are drawn
uniformly without replacement from the 1682 (003: 300; 002: 1000) and are the arms.

Expected rewards: linear, linear_offset + linear_scale * x'theta* (003: x'theta*; 002
maps it into [0, 1] with offset = scale = 1/2), observed with Gaussian noise of standard
deviation ``noise_sd``; logistic, sigmoid(x'theta*) as 003 writes it, observed as a
Bernoulli draw. With x and theta* in the unit ball, x'theta* lies in [-1, 1], so the
logistic means lie in [0.27, 0.73].
"""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.environments.base import (
    Block,
    BlockEnvironment,
    expected_rewards,
)
from sweeper_tasks.bandit_tuning.environments.batch import BlockBatch
from sweeper_tasks.bandit_tuning.environments.movielens_data import (
    N_MOVIES,
    N_USERS,
    Factors,
    movielens_factors,
    ratings_file,
)
from sweeper_tasks.storage import DataFile


class MovieLens(BlockEnvironment):
    """Movies as arms, theta* an average user (003 Section 5)."""

    has_parameter = True

    def __init__(
        self,
        path: str | None = None,
        cache_dir: str | None = None,
        download: bool = True,
        n_features: int = 20,
        regularisation: float = 10.0,
        iterations: int = 20,
        factorisation_seed: int = 0,
        n_arms: int = 300,
        n_users: int = 300,
        noise_sd: float = 0.5,
        reward_model: str | None = None,
        linear_offset: float = 0.0,
        linear_scale: float = 1.0,
        block_rounds: int = 64,
        theta_norm: float | None = None,
    ) -> None:
        super().__init__(reward_model)
        if theta_norm is not None and not theta_norm > 0:
            raise ValueError(
                f"theta_norm must be positive (or null to keep the mean), got {theta_norm}"
            )
        if not 2 <= n_arms <= N_MOVIES:
            raise ValueError(f"n_arms must be between 2 and {N_MOVIES} movies, got {n_arms}")
        if not 1 <= n_users <= N_USERS:
            raise ValueError(f"n_users must be between 1 and {N_USERS} users, got {n_users}")
        if n_features < 1 or iterations < 1 or not regularisation > 0:
            raise ValueError(
                "the factorisation needs n_features >= 1, iterations >= 1 and regularisation > 0,"
                f" got {n_features}, {iterations} and {regularisation}"
            )
        if noise_sd < 0:
            raise ValueError(f"noise_sd must be non-negative, got {noise_sd}")
        if block_rounds < 1:
            raise ValueError(f"block_rounds must be at least 1, got {block_rounds}")
        self.path = path
        self.cache_dir = cache_dir
        self.download = bool(download)
        self.n_features = int(n_features)
        self.regularisation = float(regularisation)
        self.iterations = int(iterations)
        self.factorisation_seed = int(factorisation_seed)
        self.n_arms = int(n_arms)
        self.n_users = int(n_users)
        self.noise_sd = float(noise_sd)
        self.linear_offset = float(linear_offset)
        self.linear_scale = float(linear_scale)
        self.block_rounds = int(block_rounds)
        self.theta_norm = None if theta_norm is None else float(theta_norm)

    def factors(self) -> Factors:
        """The unit-ball user and movie features (memoised, cached on disk)."""
        return movielens_factors(
            self.path,
            self.cache_dir,
            self.download,
            rank=self.n_features,
            regularisation=self.regularisation,
            iterations=self.iterations,
            seed=self.factorisation_seed,
        )

    def data_files(self) -> list[DataFile]:
        """The ratings, found without reading or downloading them (a dry run)."""
        return [ratings_file(self.path, self.cache_dir, self.download)]

    def check(self) -> None:
        """Find (or download), check and factorise the ratings before any cell runs."""
        self.factors()

    def reset(self, horizon: int, reward_model: str, rng: np.random.Generator) -> None:
        self._start(self.reward_model or reward_model)
        self._rng = rng
        factors = self.factors()
        self.movies = factors.movies
        chosen = rng.choice(factors.users.shape[0], self.n_users, replace=False)
        self.theta = factors.users[chosen].mean(axis=0)
        if self.theta_norm is not None:
            # The authors' released code rescales theta* to unit norm (003's text does not):
            # +dataset.theta_norm=1 +dataset.n_users=40 reproduces that variant.
            self.theta *= self.theta_norm / np.linalg.norm(self.theta)
        self._movie_scores = self.movies @ self.theta  # x'theta* of every movie, once a run

    def _draw_block(self, start: int, into: Block | None = None) -> None:
        """K random movies for each of the next ``block_rounds`` rounds, and their noise;
        features and expected rewards drawn into ``into`` when given."""
        b = self.block_rounds
        n_movies = self.movies.shape[0]
        arms = np.stack([self._rng.choice(n_movies, self.n_arms, replace=False) for _ in range(b)])
        features, means = self._block_arrays(into)
        # mode="clip" writes straight into ``out`` ("raise" buffers); arms are valid indices.
        self._features = np.take(self.movies, arms, axis=0, out=features, mode="clip")
        scores = np.take(self._movie_scores, arms, out=means, mode="clip")
        self._means = expected_rewards(scores, self._model, self.linear_offset, self.linear_scale)
        self._gauss = self._rng.standard_normal(b)
        self._uniform = self._rng.random(b)
        self.arms = arms


MovieLens.batch = BlockBatch  # each seed draws its own blocks into its slice of the batch's
