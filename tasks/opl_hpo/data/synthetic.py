"""Synthetic logged bandit data of 001 Section 3.1 (Eq. 4 and 5).

Contexts x ~ N(0, I_d) (d = 10), K = 10 actions with embeddings e_a, binary rewards
r ~ Bernoulli(mu(x, a)) with mu(x, a) = sigmoid(f(x, a)) (Eq. 4), and the logging policy
(Eq. 5) pi0(a | x) = softmax_a(beta0 mu(x, a)).

001 builds this with OpenBanditPipeline's (obp) ``SyntheticBanditDataset`` and
``logistic_reward_function``. Two versions of the logit f are offered (``reward``):

- ``'obp'`` (the default) follows obp 0.5.5's ``_base_reward_function`` with degree 1:
  a bias column is prepended to the context and to the action embedding,
  x~ = [1, x], e~_a = [1, e_a], the raw logit is
  g(x, a) = theta_x' x~ + theta_a' e~_a + x~' M e~_a with theta_x, theta_a, M ~ U(-1, 1)
  (drawn in obp's order: theta_x, theta_a, M), and f = (g - mean g) / std g.
  obp standardises each generated (n, K) batch by its own mean and standard deviation;
  here the moments are the population's under x ~ N(0, I_d) and a uniform action
  (``Environment.moments``, exact), the limit of obp's batch moments, so that mu(x, a)
  does not depend on the other contexts of a batch. obp 0.5.5 is followed because 0.5.7
  writes the standardisation as ``x - x.mean() / x.std()`` (an operator-precedence slip
  that leaves the logits nearly unscaled).
- ``'eq4'``: Eq. 4 as 001 prints it, f = x' M e_a + eta_x' x + eta_a' e_a without bias
  columns or standardisation (result version 2's generator; its logits have standard
  deviation 2.2 and its V(pi0) is 0.34-0.89 for beta0 = -3..20 against 001's 0.412-0.719).

obp draws the reward function once from a fixed random state and the data from the run's
seed; here ``environment_seed`` plays that part (null: the reward function is drawn per
seed too). The ground truth V(pi) is computed from mu exactly over ``n_test`` held-out
contexts.

001 does not say how e_a is drawn. ``embeddings='one_hot'`` (the default) takes e_a = the
a-th unit vector, obp's default action context (``np.eye(n_actions)``, which needs
K = d); ``'gaussian'`` draws e_a ~ N(0, I_d).

With ``reward='obp'`` and environment seed 12345, V(pi0) at beta0 = -3, 0, 3, 10, 20 is
0.439, 0.500, 0.560, 0.650, 0.693 against 001's 0.412, 0.501, 0.580, 0.677, 0.719
(100,000 contexts): within 5% except at beta0 = -3 (+6.6%). Over 60 environment seeds the
mean is 0.455, 0.500, 0.544, 0.620, 0.663: 001's row is more extreme than obp's typical
reward function at this size (docs/results/opl_hpo).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from sweeper_tasks.opl_hpo.data.base import LoggedBandit, Split, TestSet, softmax

REWARDS = ("obp", "eq4")


@dataclass(frozen=True)
class Environment:
    """One drawn reward function (Eq. 4) with its logging policy (Eq. 5).

    g(x, a) = theta_x' x~ + theta_a' e~_a + x~' M e~_a with x~ = [1, x] and e~_a = [1, e_a]
    when ``bias`` (else x~ = x, e~_a = e_a), and mu = sigmoid((g - shift) / scale).

    Parameters
    ----------
    M : (p_x, p_a) context-action coefficients (p_x = d + bias, p_a = d_a + bias).
    eta_x : (p_x,) context coefficients theta_x.
    eta_a : (p_a,) action coefficients theta_a.
    embeddings : (K, d_a) action embeddings e_a.
    beta0 : the logging policy's inverse temperature.
    bias : whether x~ and e~_a carry a leading 1 (obp's PolynomialFeatures(degree=1)).
    standardise : whether the logits are standardised by their population moments.
    """

    M: np.ndarray
    eta_x: np.ndarray
    eta_a: np.ndarray
    embeddings: np.ndarray
    beta0: float
    bias: bool = False
    standardise: bool = False

    @property
    def n_actions(self) -> int:
        return len(self.embeddings)

    def _action_terms(self) -> tuple[np.ndarray, np.ndarray]:
        """g(x, a) = c_a + x' V[:, a]: the (K,) constants c and the (d, K) slopes V."""
        e = self.embeddings
        if self.bias:
            e = np.concatenate([np.ones((len(e), 1)), e], axis=1)
        M_e = self.M @ e.T  # (p_x, K)
        constant = e @ self.eta_a
        if self.bias:
            return constant + self.eta_x[0] + M_e[0], M_e[1:] + self.eta_x[1:, None]
        return constant, M_e + self.eta_x[:, None]

    def moments(self) -> tuple[float, float]:
        """Mean and standard deviation of g(x, a) under x ~ N(0, I_d), a uniform on K:
        mean_a c_a and sqrt(mean_a ||V_a||^2 + var_a c_a)."""
        constant, slopes = self._action_terms()
        variance = float((slopes**2).sum(axis=0).mean() + constant.var())
        return float(constant.mean()), math.sqrt(variance)

    def logits(self, x: np.ndarray) -> np.ndarray:
        """(n, K) logits f(x_i, a) of Eq. 4 (standardised if ``standardise``)."""
        constant, slopes = self._action_terms()
        logits = x @ slopes + constant[None, :]
        if self.standardise:
            shift, scale = self.moments()
            logits = (logits - shift) / scale
        return logits

    def mu(self, x: np.ndarray) -> np.ndarray:
        """(n, K) expected rewards mu(x_i, a) of Eq. 4."""
        return 1.0 / (1.0 + np.exp(-self.logits(x)))

    def contexts(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.standard_normal((n, self.M.shape[0] - int(self.bias)))

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
    reward : 'obp' (obp 0.5.5's standardised logits with bias columns) or 'eq4' (001's
        Eq. 4 as printed); see the module docstring.
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
        reward: str = "obp",
        n_reward: int = 1000,
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
            ("n_reward", n_reward, 0),
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
        if reward not in REWARDS:
            raise ValueError(
                f"logged_data.reward={reward!r} is not one of {', '.join(REWARDS)}: 'obp' is "
                "obp 0.5.5's standardised logistic reward, 'eq4' 001's Eq. 4 as printed."
            )
        self.embeddings, self.reward = embeddings, reward
        self.beta0 = float(beta0)
        self.n_train, self.n_val, self.n_test = int(n_train), int(n_val), int(n_test)
        self.n_reward = int(n_reward)
        self.n_features, self.n_actions = int(n_features), int(n_actions)
        self.environment_seed = environment_seed

    def environment(self, rng: np.random.Generator) -> Environment:
        """The reward function: from ``environment_seed``, else from ``rng``."""
        if self.environment_seed is not None:
            rng = np.random.default_rng(int(self.environment_seed))
        d, k = self.n_features, self.n_actions
        if self.reward == "eq4":  # result version 2's draw, in its order
            M, eta_x, eta_a = (rng.uniform(-1.0, 1.0, shape) for shape in ((d, d), d, d))
        embeddings = rng.standard_normal((k, d)) if self.embeddings == "gaussian" else np.eye(k, d)
        if self.reward == "obp":  # obp's order: theta_x, theta_a, M, with bias columns
            eta_x, eta_a = rng.uniform(-1.0, 1.0, d + 1), rng.uniform(-1.0, 1.0, d + 1)
            M = rng.uniform(-1.0, 1.0, (d + 1, d + 1))
        obp = self.reward == "obp"
        return Environment(M, eta_x, eta_a, embeddings, self.beta0, bias=obp, standardise=obp)

    def generate(self, rng: np.random.Generator) -> LoggedBandit:
        """D_tr, D_val (logged by pi0) and the test contexts with their mu and pi0."""
        environment = self.environment(rng)
        train, _ = environment.log(self.n_train, rng)
        val, _ = environment.log(self.n_val, rng)
        x_test = environment.contexts(self.n_test, rng)
        mu_test = environment.mu(x_test)
        test = TestSet(x=x_test, pi0=softmax(self.beta0 * mu_test), mu=mu_test)
        reward_log = environment.log(self.n_reward, rng)[0] if self.n_reward else None
        return LoggedBandit(
            n_actions=self.n_actions,
            train=train,
            val=val,
            test=test,
            v_optimal=float(mu_test.max(axis=1).mean()),
            reward_log=reward_log,
        )

    def check(self) -> None:
        """Nothing to fetch for synthetic data."""
