"""Bayesian optimisation run online, the third baseline of 004 Section 7.1.3."""

from __future__ import annotations

import math
import warnings

import numpy as np
from sklearn.exceptions import ConvergenceWarning
from sklearn.gaussian_process import GaussianProcessRegressor
from sklearn.gaussian_process.kernels import RBF, ConstantKernel, Matern

from sweeper_tasks.bandit_tuning.tuners.base import Tuner

KERNELS = ("se", "matern")
PRIOR_NOISE_VARIANCE = 0.25
"""Noise variance assumed until some point is observed twice: the largest a reward in [0, 1]
can have, and the variance of the simulations' N(0, 0.5^2) noise."""


def candidate_grid(dimension: int, n_candidates: int) -> np.ndarray:
    """About ``n_candidates`` points of [0, 1]^p: an even grid of round(n^(1/p)) per axis."""
    per_axis = max(2, round(n_candidates ** (1.0 / dimension)))
    axis = np.linspace(0.0, 1.0, per_axis)
    mesh = np.meshgrid(*([axis] * dimension), indexing="ij")
    return np.stack([m.ravel() for m in mesh], axis=1)


class BayesOpt(Tuner):
    """GP-UCB trained on the first T/10 rounds, then its best point (004 Section 7.1.3).

    A Gaussian process with a squared-exponential (``se``) or Matérn (``matern``, smoothness
    ``nu``) covariance times a constant amplitude models the mean reward on [0, 1]^p (each
    coordinate mapped to its hyperparameter's interval). Each training round t plays the
    candidate maximising the UCB acquisition mu(x) + sqrt(beta_t) sd(x), with beta_t =
    2 ln(|D| t^2 pi^2 / (6 delta)) of Srinivas et al. (2010, Theorem 1) for the finite
    candidate set D (``candidate_grid``), or beta_t = kappa^2 when ``kappa`` is set. After
    ``floor(train_fraction T)`` rounds the candidate with the largest posterior mean is
    played for the rest of the horizon.

    Cost. 004 refits the GP on the whole history every round, O(t^3) at round t. Here the
    observations are aggregated per candidate (mean reward, count n), so the GP has m <= |D|
    distinct inputs with noise variance sigma^2 / n each (sigma^2: the pooled within-candidate
    variance; ``PRIOR_NOISE_VARIANCE`` until a candidate repeats). The kernel's
    hyperparameters (amplitude, length scale) are re-optimised by marginal likelihood when
    the number of observations reaches 2, 4, 8, ... (log2(T/10) times); every other round the
    posterior is recomputed with the kernel held: O(m^3 + |D| m^2) per round, at most
    O(|D|^3). With |D| = 256 that stays milliseconds; with |D| = 1024, once GP-UCB has tried
    most candidates, it took about a second a round (bench/results/ncab.md).

    Parameters
    ----------
    kernel : str
        ``se`` or ``matern``.
    nu : float
        Smoothness of the Matérn kernel (2.5 by default).
    train_fraction : float
        Share of the horizon spent training, in (0, 1] (004: 1/10).
    n_candidates : int
        Size of the candidate set D (about; a grid of round(n^(1/p)) points per axis).
    delta : float
        Confidence parameter of beta_t, in (0, 1).
    kappa : float or None
        A fixed UCB multiplier instead of sqrt(beta_t).
    length_scale : float
        Initial length scale (in units of [0, 1]).
    """

    def __init__(
        self,
        kernel: str = "matern",
        nu: float = 2.5,
        train_fraction: float = 0.1,
        n_candidates: int = 256,
        delta: float = 0.1,
        kappa: float | None = None,
        length_scale: float = 0.2,
    ) -> None:
        if kernel not in KERNELS:
            raise ValueError(f"bayes_opt: unknown kernel '{kernel}'; choose one of {KERNELS}")
        if not 0.0 < float(train_fraction) <= 1.0:
            raise ValueError(
                f"bayes_opt: train_fraction must be in (0, 1] (004 trains for T/10 rounds: 0.1),"
                f" got {train_fraction}"
            )
        if int(n_candidates) < 2:
            raise ValueError(f"bayes_opt: n_candidates must be at least 2, got {n_candidates}")
        if not 0.0 < float(delta) < 1.0:
            raise ValueError(f"bayes_opt: delta must be in (0, 1), got {delta}")
        if kappa is not None and not float(kappa) >= 0.0:
            raise ValueError(f"bayes_opt: kappa must be >= 0 (or null for beta_t), got {kappa}")
        if not float(nu) > 0 or not float(length_scale) > 0:
            raise ValueError(
                f"bayes_opt: nu and length_scale must be > 0, got {nu} and {length_scale}"
            )
        self.kernel_name = kernel
        self.nu = float(nu)
        self.train_fraction = float(train_fraction)
        self.n_candidates = int(n_candidates)
        self.delta = float(delta)
        self.kappa = None if kappa is None else float(kappa)
        self.length_scale = float(length_scale)

    def _initial_kernel(self):
        bounds = (1e-2, 1e1)
        shape = (
            RBF(self.length_scale, bounds)
            if self.kernel_name == "se"
            else Matern(self.length_scale, bounds, nu=self.nu)
        )
        return ConstantKernel(0.01, (1e-6, 1e2)) * shape

    def proposes(self, hyperparameter):
        return ("interval", tuple(hyperparameter.interval))

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.candidates = candidate_grid(len(self.space), self.n_candidates)
        self.train_rounds = int(np.floor(self.train_fraction * self.horizon))
        n = len(self.candidates)
        self.counts = np.zeros(n)
        self.sums = np.zeros(n)
        self.squares = np.zeros(n)
        self.kernel = self._initial_kernel()
        self.next_optimisation = 2
        self.optimisations = 0
        self.mean = np.zeros(n)
        self.sd = np.full(n, np.inf)
        self.last = int(rng.integers(n))  # round 1: no data, a random candidate
        self.output = -1

    def noise_variance(self) -> float:
        """Pooled within-candidate variance of the rewards (the prior until a repeat)."""
        observations = self.counts.sum()
        played = int((self.counts > 0).sum())
        if observations - played < 1:
            return PRIOR_NOISE_VARIANCE
        played_mask = self.counts > 0
        within = self.squares[played_mask] - self.sums[played_mask] ** 2 / self.counts[played_mask]
        return max(float(within.sum()) / (observations - played), 1e-6)

    def _posterior(self) -> None:
        """Posterior mean and sd on every candidate from the aggregated observations."""
        played = np.flatnonzero(self.counts)
        means = self.sums[played] / self.counts[played]
        offset = float(means.mean())
        alpha = self.noise_variance() / self.counts[played]
        optimise = self.counts.sum() >= self.next_optimisation
        gp = GaussianProcessRegressor(
            self.kernel,
            alpha=alpha,
            optimizer="fmin_l_bfgs_b" if optimise else None,
            random_state=int(self.rng.integers(2**31)) if optimise else None,
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", ConvergenceWarning)
            gp.fit(self.candidates[played], means - offset)
        if optimise:
            self.kernel = gp.kernel_
            self.optimisations += 1
            self.next_optimisation *= 2
        mean, sd = gp.predict(self.candidates, return_std=True)
        self.mean, self.sd = mean + offset, sd

    def beta(self, t: int) -> float:
        if self.kappa is not None:
            return self.kappa**2
        return 2.0 * math.log(len(self.candidates) * t**2 * math.pi**2 / (6.0 * self.delta))

    def propose(self, t: int) -> dict[str, float]:
        if t > self.train_rounds:
            if self.output < 0:
                self.output = int(np.argmax(self.mean)) if self.counts.any() else self.last
            self.last = self.output
        elif self.counts.any():
            self.last = int(np.argmax(self.mean + math.sqrt(self.beta(t)) * self.sd))
        point = self.candidates[self.last]
        return {h.name: float(h.from_unit(u)) for h, u in zip(self.space, point, strict=True)}

    def observe(self, reward: float) -> None:
        if self.output >= 0:
            return
        reward = float(reward)
        self.counts[self.last] += 1.0
        self.sums[self.last] += reward
        self.squares[self.last] += reward * reward
        self._posterior()

    def params(self) -> dict[str, float | str]:
        return {
            "bayes_opt.kernel": self.kernel_name,
            "bayes_opt.train_rounds": self.train_rounds,
            "bayes_opt.n_candidates": len(self.candidates),
            "bayes_opt.optimisations": self.optimisations,
            "bayes_opt.fitted_kernel": str(self.kernel),
        }

    def state(self) -> dict[str, float]:
        return {"gp_inputs": float((self.counts > 0).sum())}
