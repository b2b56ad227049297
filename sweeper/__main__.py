"""``python -m sweeper +exp=NAME [overrides]``: run an experiment's sweep.

Without ``+exp`` the same path runs ad hoc cells: ``python -m sweeper algorithm=linucb
tuner=tl seed=1`` is one cell, and ``-m`` (Hydra multirun) runs a product of them.

Exit status: 0 when every cell finished, 1 when any cell failed, 2 for bad input (a
one-paragraph message, no traceback unless HYDRA_FULL_ERROR=1; nothing ran), 3 when the
MLflow store failed (disk full, server gone: what was logged is kept; fix it and rerun the
same command to resume), 4 when another driver writes into the store (nothing ran; the
message names it), 130 when interrupted (Ctrl-C or SIGTERM; rerun the same command to resume).
"""

from __future__ import annotations

import os
import sys

import hydra
from hydra.core.hydra_config import HydraConfig
from hydra.types import RunMode
from omegaconf import DictConfig

from sweeper.lock import StoreBusy
from sweeper.sweep import EXIT_STORE_BUSY, EXIT_STORE_FAILED, run_sweep
from sweeper.tracking import StoreFailed

_EXIT_CODES: list[int] = []


def _compose(overrides: list[str]) -> DictConfig:
    return hydra.compose(config_name="config", overrides=overrides)


@hydra.main(config_path="../conf", config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    try:
        result = run_sweep(cfg, _compose, list(hydra_cfg.overrides.task))
    except ValueError as err:  # bad input: said once, before anything ran
        if os.environ.get("HYDRA_FULL_ERROR") == "1":
            raise
        print(f"error: {err}", file=sys.stderr)
        sys.exit(2)
    except StoreBusy as err:  # another driver: nothing ran
        print(f"error: {err}", file=sys.stderr)
        sys.exit(EXIT_STORE_BUSY)
    except StoreFailed as err:  # the store failed before a cell ran
        print(
            f"error: the MLflow store failed ({err}). Nothing was lost: fix the store (free "
            "disk space, restart the tracking server, ...) and run the same command again",
            file=sys.stderr,
        )
        sys.exit(EXIT_STORE_FAILED)
    if hydra_cfg.mode == RunMode.MULTIRUN:
        _EXIT_CODES.append(result.exit_code)  # the other jobs still run; exit at the end
        if result.interrupted:
            sys.exit(result.exit_code)
    elif result.exit_code:
        sys.exit(result.exit_code)


if __name__ == "__main__":
    main()
    sys.exit(max(_EXIT_CODES, default=0))
