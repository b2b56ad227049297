"""sweeper: distributed, resumable experiment sweeps (Hydra composes, Ray runs, MLflow records).

The orchestrator is generic: it knows cells (a config and a function to run it on), not
bandits. The research code lives in ``tasks/``.
"""
