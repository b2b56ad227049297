"""Bottom-layer contextual bandit algorithms (003 Section 5)."""

from tasks.bandit_tuning.algorithms.base import BanditAlgorithm, DivergenceError

__all__ = ["BanditAlgorithm", "DivergenceError"]
