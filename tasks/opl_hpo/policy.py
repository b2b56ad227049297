"""The policy class of 001 Eq. 6 and its search space Theta (001 Table 2).

A policy is pi(a | x; theta) = softmax_a(beta mu_hat(x, a)) with mu_hat a scikit-learn
classifier of the reward fitted on D_tr. theta = (beta, the model, the model's settings):

- beta log-uniform in [0.01, 100];
- LR: LogisticRegression(max_iter=1000, elastic net, solver='saga') with C log-uniform in
  [1e-3, 1e3] and l1_ratio in {0.1, ..., 0.9}; the objective is strictly convex, and
  ``solver='cd'`` (the default) minimises it to convergence by proximal Newton
  (``sweeper_tasks.opl_hpo.enet_logistic``), where saga at 001's max_iter and tol stops short of
  the minimiser at many times the cost (``bench/bench_opl.py``); ``solver='saga'`` is
  001's stated solver;
- RF: RandomForestClassifier(n_estimators=10) with max_depth and min_samples_split in
  {2, ..., 32} and max_samples in {0.1, ..., 0.9}.

Inputs of mu_hat(x, a) (001 does not state them): LR sees [x, e_a, x (x) e_a] (e_a the
one-hot action, so it is one logistic model per action sharing the context and intercept
terms; with [x, e_a] alone the softmax would cancel x and every LR policy would ignore the
context), RF sees [x, e_a] (trees split on the action themselves). LR's predictions for all
K actions come from its coefficients directly (``LinearRewardModel``), checked against
scikit-learn's ``predict_proba`` in the tests.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from scipy import sparse
from sklearn.ensemble import RandomForestClassifier
from sklearn.exceptions import ConvergenceWarning
from sklearn.linear_model import LogisticRegression

from sweeper_tasks.opl_hpo.enet_logistic import HAVE_NUMBA, MISSING_NUMBA, fit_enet_logistic

MODELS = ("lr", "rf")
SOLVERS = ("cd", "saga")
NAMES = ("beta", "model", "C", "l1_ratio", "max_depth", "min_samples_split", "max_samples")
INACTIVE = -1.0
"""Trace value of a hyperparameter the trial's model does not have (all real ones are > 0)."""


def lr_design(x: np.ndarray, a: np.ndarray, n_actions: int) -> sparse.csr_matrix:
    """(n, d + K + d K) sparse inputs [x, e_a, x (x) e_a] of the logistic model."""
    n, d = x.shape
    rows = np.repeat(np.arange(n), 2 * d + 1)
    context_cols = np.tile(np.arange(d), (n, 1))
    cross_cols = d + n_actions + a[:, None] * d + np.arange(d)[None, :]
    cols = np.concatenate([context_cols, (d + a)[:, None], cross_cols], axis=1).ravel()
    data = np.concatenate([x, np.ones((n, 1)), x], axis=1).ravel()
    return sparse.csr_matrix((data, (rows, cols)), shape=(n, d + n_actions + d * n_actions))


def rf_design(x: np.ndarray, a: np.ndarray, n_actions: int) -> np.ndarray:
    """(n, d + K) float32 inputs [x, e_a] of the random forest."""
    out = np.zeros((len(x), x.shape[1] + n_actions), dtype=np.float32)
    out[:, : x.shape[1]] = x
    out[np.arange(len(x)), x.shape[1] + a] = 1.0
    return out


def rf_design_all(x: np.ndarray, n_actions: int) -> np.ndarray:
    """``rf_design`` of every (context, action) pair, context-major: (n K, d + K)."""
    n, d = x.shape
    out = np.zeros((n, n_actions, d + n_actions), dtype=np.float32)
    out[:, :, :d] = x[:, None, :]
    out[:, np.arange(n_actions), d + np.arange(n_actions)] = 1.0
    return out.reshape(n * n_actions, d + n_actions)


def all_actions(x: np.ndarray, n_actions: int) -> tuple[np.ndarray, np.ndarray]:
    """Every (context, action) pair, context-major: (n K, d) contexts and (n K,) actions."""
    return np.repeat(x, n_actions, axis=0), np.tile(np.arange(n_actions), len(x))


class ConstantRewardModel:
    """mu_hat = the training mean, when D_tr holds a single reward value."""

    def __init__(self, mean: float, n_actions: int) -> None:
        self.mean, self.n_actions = mean, n_actions

    def predict(self, x: np.ndarray) -> np.ndarray:
        return np.full((len(x), self.n_actions), self.mean)


class LinearRewardModel:
    """mu_hat(x, a) = sigmoid(b + w_x'x + w_a + W_a'x) from the coefficients of a logistic
    model on ``lr_design`` inputs, for all K actions at once (no (n K, p) design matrix).

    Parameters
    ----------
    coef : (d + K + d K,) coefficients in ``lr_design``'s column order.
    intercept : b.
    """

    def __init__(self, coef: np.ndarray, intercept: float, n_features: int, n_actions: int):
        d, k = n_features, n_actions
        self.intercept = float(intercept)
        self.w_x, self.w_a = coef[:d], coef[d : d + k]
        self.W = coef[d + k :].reshape(k, d)

    def predict(self, x: np.ndarray) -> np.ndarray:
        """(n, K) mu_hat at contexts x (n, d)."""
        logits = x @ (self.W.T + self.w_x[:, None]) + self.w_a[None, :] + self.intercept
        return 1.0 / (1.0 + np.exp(-logits))


class ForestRewardModel:
    """mu_hat(x, a) = the forest's click probability, for all K actions at once."""

    def __init__(self, model: RandomForestClassifier, n_actions: int) -> None:
        self.model, self.n_actions = model, n_actions
        self.positive = int(np.flatnonzero(model.classes_ == 1)[0])

    def predict(self, x: np.ndarray) -> np.ndarray:
        proba = self.model.predict_proba(rf_design_all(x, self.n_actions))
        return proba[:, self.positive].reshape(len(x), self.n_actions)


def fit_logistic(
    x: np.ndarray,
    a: np.ndarray,
    r: np.ndarray,
    n_actions: int,
    C: float,
    l1_ratio: float,
    solver: str = "saga",
    max_iter: int = 1000,
    random_state: int = 0,
    tol: float = 1e-4,
):
    """Logistic mu_hat on ``lr_design`` inputs (a constant model if r has one value).

    ``solver`` is 'cd' (``sweeper_tasks.opl_hpo.enet_logistic``, run to convergence; ``max_iter``,
    ``tol`` and ``random_state`` are scikit-learn's and unused) or a scikit-learn solver
    ('saga': ``random_state`` seeds its sampling order). Repeated (x, a, r) rows are fitted
    once with their count as sample weight: the same objective, fewer rows per epoch."""
    y = (r > 0).astype(np.int64)
    if y.min() == y.max():
        return ConstantRewardModel(float(y[0]), n_actions)
    rows = np.concatenate([x, a[:, None], y[:, None]], axis=1)
    unique, counts = np.unique(rows, axis=0, return_counts=True)
    weights = None
    if len(unique) < len(rows):  # repeated (x, a, r) rows (OBD's categorical contexts)
        x, a, y = unique[:, :-2], unique[:, -2].astype(np.int64), unique[:, -1].astype(np.int64)
        weights = counts.astype(np.float64)
    if solver == "cd":
        coef, intercept, _ = fit_enet_logistic(
            lr_design(x, a, n_actions), y, C, l1_ratio, sample_weight=weights
        )
        return LinearRewardModel(coef, intercept, x.shape[1], n_actions)
    model = LogisticRegression(
        C=C,
        l1_ratio=l1_ratio,
        solver=solver,
        max_iter=max_iter,
        random_state=random_state,
        tol=tol,
    )
    with warnings.catch_warnings():  # saga at max_iter: counted in bench/bench_opl.py
        warnings.simplefilter("ignore", ConvergenceWarning)
        model.fit(lr_design(x, a, n_actions), y, sample_weight=weights)
    return LinearRewardModel(model.coef_[0], model.intercept_[0], x.shape[1], n_actions)


class PolicySpace:
    """Theta of 001 Table 2, sampled through an Optuna trial (define-by-run).

    Parameters
    ----------
    beta : [low, high] of the policy's inverse temperature (log-uniform).
    models : the model families to choose from, a subset of ('lr', 'rf').
    C : [low, high] of LR's inverse regularisation (log-uniform).
    l1_ratio : LR's elastic-net mixing candidates.
    max_depth, min_samples_split : [low, high] integer ranges of RF's settings.
    max_samples : RF's bootstrap-fraction candidates.
    n_estimators : RF's trees (10 in 001).
    max_iter : LR's saga iterations (1000 in 001).
    solver : LR's solver: 'cd' (proximal Newton to convergence, needs numba) or 'saga'
        (001's, stopped at ``max_iter`` or scikit-learn's tol 1e-4).
    """

    def __init__(
        self,
        beta: Sequence[float] = (0.01, 100.0),
        models: Sequence[str] = MODELS,
        C: Sequence[float] = (1e-3, 1e3),
        l1_ratio: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        max_depth: Sequence[int] = (2, 32),
        min_samples_split: Sequence[int] = (2, 32),
        max_samples: Sequence[float] = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9),
        n_estimators: int = 10,
        max_iter: int = 1000,
        solver: str = "cd",
    ) -> None:
        if solver not in SOLVERS:
            raise ValueError(
                f"policy_space.solver={solver!r} is not one of {', '.join(SOLVERS)}: 'cd' fits "
                "LR to convergence by proximal Newton, 'saga' is 001's solver at max_iter."
            )
        if solver == "cd" and not HAVE_NUMBA:
            raise ValueError(MISSING_NUMBA)
        self.solver = solver
        self.models = tuple(models)
        if not self.models or set(self.models) - set(MODELS):
            raise ValueError(
                f"policy_space.models={list(models)} must be a non-empty subset of "
                f"{list(MODELS)} (001 Table 2 searches both); the search space is empty."
            )
        self.beta = self._interval("beta", beta, positive=True)
        self.C = self._interval("C", C, positive=True)
        self.max_depth = self._interval("max_depth", max_depth, positive=True)
        self.min_samples_split = self._interval("min_samples_split", min_samples_split, 2)
        self.l1_ratio = self._candidates("l1_ratio", l1_ratio, 0.0, 1.0)
        self.max_samples = self._candidates("max_samples", max_samples, 0.0, 1.0)
        self.n_estimators, self.max_iter = int(n_estimators), int(max_iter)
        self.names = list(NAMES)

    @staticmethod
    def _interval(name: str, bounds: Sequence[float], positive: bool | int = False):
        low, high = (float(v) for v in bounds)
        floor = float(positive) if not isinstance(positive, bool) else 0.0
        if not (math.isfinite(low) and math.isfinite(high)) or low > high or low <= floor - 1e-12:
            raise ValueError(
                f"policy_space.{name}={list(bounds)} must be [low, high] with "
                f"{floor:g} < low <= high (001 Table 2); this search range is empty or invalid."
            )
        return low, high

    @staticmethod
    def _candidates(name: str, values: Sequence[float], low: float, high: float):
        values = tuple(float(v) for v in values)
        if not values or not all(low <= v <= high for v in values):
            raise ValueError(
                f"policy_space.{name}={list(values)} must be a non-empty list of numbers in "
                f"[{low:g}, {high:g}] (001 Table 2: 0.1, 0.2, ..., 0.9)."
            )
        return values

    def suggest(self, trial: Any) -> dict[str, Any]:
        """theta_t from an Optuna trial (001 Algorithm 1/2, line 3)."""
        params: dict[str, Any] = {
            "beta": trial.suggest_float("beta", *self.beta, log=True),
            "model": trial.suggest_categorical("model", list(self.models)),
        }
        if params["model"] == "lr":
            params["C"] = trial.suggest_float("C", *self.C, log=True)
            params["l1_ratio"] = trial.suggest_categorical("l1_ratio", list(self.l1_ratio))
        else:
            params["max_depth"] = trial.suggest_int("max_depth", *map(int, self.max_depth))
            params["min_samples_split"] = trial.suggest_int(
                "min_samples_split", *map(int, self.min_samples_split)
            )
            params["max_samples"] = trial.suggest_categorical("max_samples", list(self.max_samples))
        return params

    def encode(self, params: Mapping[str, Any]) -> list[float]:
        """A trace row in ``NAMES`` order: model as its index in ('lr', 'rf'), settings the
        trial's model lacks as ``INACTIVE`` (-1)."""
        row = []
        for name in NAMES:
            value = params.get(name)
            if name == "model":
                row.append(float(MODELS.index(value)))
            else:
                row.append(INACTIVE if value is None else float(value))
        return row

    def fit(self, params: Mapping[str, Any], x, a, r, n_actions: int, random_state: int):
        """mu_hat(.; theta, D_tr) (lower-level optimisation, 001 Algorithm 1/2, line 4)."""
        if params["model"] == "lr":
            return fit_logistic(
                x,
                a,
                r,
                n_actions,
                params["C"],
                params["l1_ratio"],
                solver=self.solver,
                max_iter=self.max_iter,
                random_state=random_state,
            )
        y = (r > 0).astype(np.int64)
        if y.min() == y.max():
            return ConstantRewardModel(float(y[0]), n_actions)
        model = RandomForestClassifier(
            n_estimators=self.n_estimators,
            max_depth=int(params["max_depth"]),
            min_samples_split=int(params["min_samples_split"]),
            max_samples=float(params["max_samples"]),
            random_state=random_state,
        )
        model.fit(rf_design(x, a, n_actions), y)
        return ForestRewardModel(model, n_actions)
