"""Yahoo! R6A logistic bandit (003 Section 5, Table 2).

Round t is the t-th time step (bucket of ``bucket_seconds``) of the click log; its arms
are the articles in the pool then (about 20; the number varies, so ``n_arms`` is that of
the round last observed), with their six features scaled by one factor into the unit
ball, and each arm's expected reward is its click-through rate in that time step. The
reward of a pull is a Bernoulli draw with that rate, whatever the algorithm's model (003:
"a Logistic bandit ... the observed reward is simulated from a Bernoulli distribution with
a probability of success equal to its click-through rate at each time").

The rate is (clicks + m * p) / (displays + m): the observed rate shrunk towards the log's
overall rate p by ``ctr_prior_displays`` = m pseudo-displays, so that an article shown
rarely in a bucket does not get a rate of exactly 0 or 1 (m = 0 gives the raw rate).
"""

from __future__ import annotations

import numpy as np

from sweeper_tasks.bandit_tuning.environments.base import Environment
from sweeper_tasks.bandit_tuning.environments.yahoo_data import (
    N_FEATURES,
    ClickLog,
    r6a_files,
    r6a_log,
)
from sweeper_tasks.storage import DataFile


class Yahoo(Environment):
    """Time steps of the R6A log as rounds, the pool's articles as arms."""

    def __init__(
        self,
        path: str | None = None,
        cache_dir: str | None = None,
        bucket_seconds: int = 300,
        ctr_prior_displays: float = 10.0,
        reward_model: str | None = None,
    ) -> None:
        super().__init__(reward_model)
        if int(bucket_seconds) < 1:
            raise ValueError(
                f"bucket_seconds must be a positive number of seconds, got {bucket_seconds}"
            )
        if ctr_prior_displays < 0:
            raise ValueError(f"ctr_prior_displays must be non-negative, got {ctr_prior_displays}")
        self.path = path
        self.cache_dir = cache_dir
        self.bucket_seconds = int(bucket_seconds)
        self.ctr_prior_displays = float(ctr_prior_displays)
        self.n_features = N_FEATURES
        self.n_arms = 0  # set by reset (the largest pool) and by every observe

    def log(self) -> ClickLog:
        return r6a_log(self.path, self.cache_dir, self.bucket_seconds)

    def data_files(self) -> list[DataFile]:
        """The click log, found without reading it (a dry run)."""
        return [r6a_files(self.path, self.cache_dir)]

    def check(self, horizon: int | None = None) -> None:
        """Find, parse (once; cached) and check the click log before any cell runs."""
        log = self.log()
        if horizon is not None:
            self._check_horizon(log, horizon)

    def _check_horizon(self, log: ClickLog, horizon: int) -> None:
        if horizon > log.n_steps:
            raise ValueError(
                f"the Yahoo! log has {log.n_steps} time steps of {self.bucket_seconds} s, fewer "
                f"than horizon={horizon}; set horizon={log.n_steps} or less (003 uses T=2881)"
            )

    def reset(self, horizon: int, reward_model: str, rng: np.random.Generator) -> None:
        log = self.log()
        self._check_horizon(log, horizon)
        self._log = log
        longest = float(np.linalg.norm(log.article_features, axis=1).max())
        self._article_features = log.article_features / (longest if longest > 0 else 1.0)
        overall = log.clicks.sum() / max(log.displays.sum(), 1)
        m = self.ctr_prior_displays
        with np.errstate(invalid="ignore", divide="ignore"):
            rate = (log.clicks + m * overall) / (log.displays + m)
        self._rates = np.where(log.displays + m > 0, rate, overall)
        self.n_arms = int(np.diff(log.offsets).max())
        self._uniform = rng.random(horizon)  # one uniform per round: paired across tuners
        self._t = -1

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        start, end = self._log.offsets[t], self._log.offsets[t + 1]
        self._t = t
        self._means = self._rates[start:end]
        self.n_arms = int(end - start)
        return self._article_features[self._log.articles[start:end]], self._means

    def reward(self, arm: int) -> float:
        return float(self._uniform[self._t] < self._means[arm])
