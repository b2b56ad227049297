"""The environment interface the cell runs against."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import ClassVar

import numpy as np

REWARD_MODELS = ("linear", "logistic")
Block = tuple[np.ndarray, np.ndarray]
"""A block's arrays to draw into: features (B, K, d) and expected rewards (B, K)."""


def sigmoid(z: np.ndarray | float) -> np.ndarray | float:
    """The logistic link mu(z) = 1 / (1 + exp(-z))."""
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z)))


def expected_rewards(
    scores: np.ndarray, model: str, linear_offset: float = 0.0, linear_scale: float = 1.0
) -> np.ndarray:
    """x'theta* (any shape) turned in place into expected rewards: offset + scale * score
    (linear) or :func:`sigmoid` (logistic), to the last bit the same numbers."""
    if model == "linear":
        scores *= linear_scale
        scores += linear_offset
    else:
        scores *= 0.5
        np.tanh(scores, out=scores)
        scores += 1.0
        scores *= 0.5
    return scores


class Environment(ABC):
    """A contextual bandit environment with known expected rewards, so regret is exact.

    ``reset`` draws everything random from the environment's own generator (which depends
    on dataset and seed only); ``observe(t)`` gives round t's arm features (K x d) and
    expected rewards (K,); ``reward(arm)`` samples the reward of pulling ``arm`` in the
    round last observed. Subclasses generate rounds in blocks so memory does not grow
    with T x K x d.
    """

    n_features: int
    #: Whether ``reset`` draws a model parameter theta* (``parameter_norm`` is then defined).
    has_parameter: bool = False
    #: The number of arms of the round last observed (before the first ``observe``, the
    #: most any round has). Constant for most datasets; Yahoo's article pool varies.
    n_arms: int
    #: The batched implementation this class declares (docs/extending.md): a class built
    #: from S reset environments of this class that shows their rounds on a leading seed
    #: axis. Read from the class itself, never inherited; without one, a cell on this
    #: environment runs one seed at a time.
    batch: ClassVar[type | None] = None

    def __init__(self, reward_model: str | None = None) -> None:
        if reward_model is not None and reward_model not in REWARD_MODELS:
            raise ValueError(
                f"reward_model '{reward_model}' is unknown; choose one of {REWARD_MODELS} "
                "or leave it empty to follow the algorithm's model"
            )
        self.reward_model = reward_model

    @abstractmethod
    def reset(self, horizon: int, reward_model: str, rng: np.random.Generator) -> None:
        """Prepare a run of ``horizon`` rounds under ``reward_model`` ('linear'/'logistic')."""

    def parameter_norm(self) -> float:
        """||theta*|| of the instance drawn by the last ``reset`` (003 Section 3's S).

        The norm of the parameter as the papers write the model, x'theta* inside the link
        (``linear_scale`` and ``linear_offset`` of a transformed mean are not applied).
        Environments without a model parameter (logged data, Lipschitz functions) raise.
        """
        theta = getattr(self, "theta", None) if self.has_parameter else None
        if theta is None:
            raise ValueError(
                f"{type(self).__name__} has no model parameter theta* (or reset has not run), "
                "so an algorithm cannot take S = ||theta*|| from it; set the algorithm's "
                "norm_bound to a number (e.g. algorithm.norm_bound=1.0)"
            )
        return float(np.linalg.norm(theta))

    @abstractmethod
    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        """Features (K x d) and expected rewards (K,) of round ``t`` (0-based)."""

    @abstractmethod
    def reward(self, arm: int) -> float:
        """A reward draw for ``arm`` in the round last observed."""


class BlockEnvironment(Environment):
    """Rounds drawn ``block_rounds`` at a time, with one noise draw per round.

    Subclasses implement ``_draw_block(start, into)``, which sets ``_features`` (B x K x
    d), ``_means`` (B x K) and the round noises ``_gauss`` and ``_uniform`` (B,) for rounds
    [start, start + B), and call ``_start(model)`` in ``reset``. ``into`` is None (new
    arrays) or the pair of arrays of those shapes to write ``_features`` and ``_means``
    into: a batch's slices (:class:`~.batch.BlockBatch`), so that a round of all seeds is a
    view, never a copy; :meth:`_block_arrays` gives either. The reward of a round is
    mean + noise_sd * gauss (linear) or [uniform < mean] (Bernoulli): the same draw whatever
    arm is pulled, so tuners with the same seed are compared on paired noise.
    """

    block_rounds: int
    noise_sd: float

    def _start(self, model: str) -> None:
        self._model = model
        self._block_start = -self.block_rounds
        self._t = -1

    def _draw_block(self, start: int, into: Block | None = None) -> None:
        raise NotImplementedError

    def _block_arrays(self, into: Block | None) -> Block:
        """``into``, or new (B, K, d) features and (B, K) expected rewards to draw into."""
        if into is not None:
            return into
        shape = (self.block_rounds, self.n_arms)
        return np.empty((*shape, self.n_features)), np.empty(shape)

    def observe(self, t: int) -> tuple[np.ndarray, np.ndarray]:
        offset = advance(self, t)
        return self._features[offset], self._means[offset]

    def reward(self, arm: int) -> float:
        mean = self._means[self._offset, arm]
        if self._model == "linear":
            return float(mean + self.noise_sd * self._gauss[self._offset])
        return float(self._uniform[self._offset] < mean)


def advance(blocks: BlockEnvironment, t: int) -> int:
    """Round ``t``'s offset in the current block of ``blocks`` (a ``BlockEnvironment`` or
    its batch), drawing the next block when t leaves it; rounds come in order."""
    offset = t - blocks._block_start
    if not 0 <= offset < blocks.block_rounds:
        if t != blocks._block_start + blocks.block_rounds:
            raise ValueError(f"rounds must be observed in order; got {t} after {blocks._t}")
        blocks._draw_block(t)
        blocks._block_start, offset = t, 0
    blocks._t, blocks._offset = t, offset
    return offset
