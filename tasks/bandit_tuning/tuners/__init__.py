"""Top-layer tuners: pick the bottom layer's hyperparameters every round."""

from sweeper_tasks.bandit_tuning.tuners.base import Tuner

__all__ = ["Tuner"]
