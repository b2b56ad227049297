"""``python -m sweeper +exp=NAME [overrides]``: run an experiment's sweep.

Without ``+exp`` the same path runs ad hoc cells: ``python -m sweeper algorithm=linucb
tuner=tl seed=1`` is one cell, and ``-m`` (Hydra multirun) runs a product of them.
"""

from __future__ import annotations

import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from sweeper.sweep import run_sweep


def _compose(overrides: list[str]) -> DictConfig:
    return hydra.compose(config_name="config", overrides=overrides)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    result = run_sweep(cfg, _compose, list(hydra_cfg.overrides.task))
    if not result.ok and hydra_cfg.mode != RunMode.MULTIRUN:
        sys.exit(1)


if __name__ == "__main__":
    main()
