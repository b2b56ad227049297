"""Synthetic logged bandit data of 001 Section 3.1 (Eq. 4 and 5).

Contexts x ~ N(0, I_d) (d = 10), K = 10 actions with embeddings e_a, and the expected
reward (Eq. 4)

    mu(x, a) = sigmoid(x' M e_a + eta_x' x + eta_a' e_a),   M, eta_x, eta_a ~ U(-1, 1),

binary rewards r ~ Bernoulli(mu(x, a)), and the logging policy (Eq. 5)

    pi0(a | x) = softmax_a(beta0 mu(x, a)).

001 builds this with OpenBanditPipeline's synthetic module, which draws the reward
function once from a fixed random state (12345) and the data from the run's seed; here
``environment_seed`` plays that part (null: the reward function is drawn per seed too).
The ground truth V(pi) is computed from mu exactly over ``n_test`` held-out contexts.

001 does not say how e_a is drawn. ``embeddings='one_hot'`` (the default) takes e_a = the
a-th unit vector, OpenBanditPipeline's default action context (``np.eye(n_actions)``, which
needs K = d); ``'gaussian'`` draws e_a ~ N(0, I_d). Neither reproduces 001's table of
V(pi0) (0.412 to 0.719 for beta0 = -3 to 20, tasks/opl_hpo/published.py): with one-hot
embeddings V(pi0) is 0.34, 0.51, 0.70, 0.86, 0.89 and V(pi0)/V(pi*) 0.38, 0.57, 0.78, 0.95,
0.98 (100,000 contexts); with Gaussian ones the logging policies are better still. OBP's
later versions rescale the logits, which 001's Eq. 4 does not state.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from tasks.opl_hpo.data.base import LoggedBandit, Split, TestSet, softmax


@dataclass(frozen=True)
class Environment:
    """One drawn reward function (Eq. 4) with its logging policy (Eq. 5)."""

    M: np.ndarray  # (d, d)
    eta_x: np.ndarray  # (d,)
    eta_a: np.ndarray  # (d,)
    embeddings: np.ndarray  # (K, d)
    beta0: float

    @property
    def n_actions(self) -> int:
        return len(self.embeddings)

    def mu(self, x: np.ndarray) -> np.ndarray:
        """(n, K) expected rewards mu(x_i, a) of Eq. 4."""
        logits = x @ self.M @ self.embeddings.T + (x @ self.eta_x)[:, None]
        logits += (self.embeddings @ self.eta_a)[None, :]
        return 1.0 / (1.0 + np.exp(-logits))

    def contexts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((n, self.M.shape[0]))

    def log(self, n: int, rng: np.random.Generator) -> tuple[Split, np.ndarray]:
        """n logged rounds of pi0 and the (n, K) expected rewards at their contexts."""
        x = self.contexts(n, rng)
        mu = self.mu(x)
        pi0 = softmax(self.beta0 * mu)
        cumulative = np.cumsum(pi0, axis=1)
        a = np.minimum((cumulative < rng.random(n)[:, None]).sum(axis=1), self.n_actions - 1)
        rows = np.arange(n)
        r = (rng.random(n) < mu[rows, a]).astype(np.float64)
        return Split(x=x, a=a, r=r, pscore=pi0[rows, a], pi0=pi0), mu


class SyntheticLoggedData:
    """Draws D_tr, D_val and the test contexts of 001 Section 3.1.

    Parameters
    ----------
    beta0 : inverse temperature of the logging policy (Eq. 5); 001 uses {-3, 0, 3, 10, 20}.
    n_train, n_val : |D_tr| and |D_val| (1000 each in 001).
    n_test : held-out contexts on which V(pi) is computed from mu.
    n_features : d, the dimension of contexts and action embeddings (10).
    n_actions : K (10).
    embeddings : 'one_hot' (e_a = a-th unit vector; needs n_actions == n_features) or
        'gaussian' (e_a ~ N(0, I_d)).
    environment_seed : seed of the reward function's draw (M, eta, embeddings); None draws
        it from the cell's data stream.
    """

    def __init__(
        self,
        beta0: float = 3.0,
        n_train: int = 1000,
        n_val: int = 1000,
        n_test: int = 10000,
        n_features: int = 10,
        n_actions: int = 10,
        embeddings: str = "one_hot",
        environment_seed: int | None = 12345,
    ) -> None:
        if not isinstance(beta0, (int, float)) or not math.isfinite(beta0):
            raise ValueError(
                f"logged_data.beta0={beta0!r} is not a finite number: beta0 is the inverse "
                "temperature of the logging policy pi0 = softmax(beta0 mu) (001 Eq. 5), any "
                "real number (001 uses -3, 0, 3, 10, 20); set logged_data.beta0 to one."
            )
        for name, value, low in (
            ("n_train", n_train, 2),
            ("n_val", n_val, 2),
            ("n_test", n_test, 1),
            ("n_features", n_features, 1),
            ("n_actions", n_actions, 2),
        ):
            if int(value) != value or value < low:
                raise ValueError(
                    f"logged_data.{name}={value!r} must be an integer of at least {low}; "
                    f"001 uses n_train = n_val = 1000, 10 features and 10 actions."
                )
        if embeddings not in ("one_hot", "gaussian"):
            raise ValueError(
                f"logged_data.embeddings={embeddings!r} is not one of 'one_hot', 'gaussian'."
            )
        if embeddings == "one_hot" and n_actions != n_features:
            raise ValueError(
                f"logged_data.embeddings='one_hot' needs n_actions == n_features (got "
                f"{n_actions} and {n_features}); set embeddings=gaussian or equal sizes."
            )
        self.embeddings = embeddings
        self.beta0 = float(beta0)
        self.n_train, self.n_val, self.n_test = int(n_train), int(n_val), int(n_test)
        self.n_features, self.n_actions = int(n_features), int(n_actions)
        self.environment_seed = environment_seed

    def environment(self, rng: np.random.Generator) -> Environment:
        """The reward function: from ``environment_seed``, else from ``rng``."""
        if self.environment_seed is not None:
            rng = np.random.default_rng(int(self.environment_seed))
        d, k = self.n_features, self.n_actions
        return Environment(
            M=rng.uniform(-1.0, 1.0, (d, d)),
            eta_x=rng.uniform(-1.0, 1.0, d),
            eta_a=rng.uniform(-1.0, 1.0, d),
            embeddings=rng.standard_normal((k, d))
            if self.embeddings == "gaussian"
            else np.eye(k, d),
            beta0=self.beta0,
        )

    def generate(self, rng: np.random.Generator) -> LoggedBandit:
        """D_tr, D_val (logged by pi0) and the test contexts with their mu and pi0."""
        environment = self.environment(rng)
        train, _ = environment.log(self.n_train, rng)
        val, _ = environment.log(self.n_val, rng)
        x_test = environment.contexts(self.n_test, rng)
        mu_test = environment.mu(x_test)
        test = TestSet(x=x_test, pi0=softmax(self.beta0 * mu_test), mu=mu_test)
        return LoggedBandit(
            n_actions=self.n_actions,
            train=train,
            val=val,
            test=test,
            v_optimal=float(mu_test.max(axis=1).mean()),
        )

    def check(self) -> None:
        """Nothing to fetch for synthetic data."""
