"""Environments (datasets): each round's arm features and expected rewards, and a reward draw."""

from sweeper_tasks.bandit_tuning.environments.base import Environment, sigmoid

__all__ = ["Environment", "sigmoid"]
