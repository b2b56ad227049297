"""Bottom-layer contextual bandit algorithms (003 Section 5)."""

from sweeper_tasks.bandit_tuning.algorithms.base import BanditAlgorithm, DivergenceError

__all__ = ["BanditAlgorithm", "DivergenceError"]
