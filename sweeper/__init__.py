"""sweeper: distributed, resumable experiment sweeps (Hydra composes, Ray runs, MLflow records).

The orchestrator is generic: it knows cells (a config and a function to run it on), axes,
curves and summary metrics; each task family (``tasks/<family>/``, ``conf/task/<family>.yaml``)
tells it its vocabulary. docs/architecture.md walks through the layers.
"""
