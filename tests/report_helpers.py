"""Helpers for the report tests: the bandit family's vocabulary, and a cell that fails on
purpose for chosen seeds."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import yaml

from sweeper.paths import CONF_DIR
from sweeper.task import parse_task
from sweeper_tasks.bandit_tuning.cell import run_cell

BANDIT = parse_task(yaml.safe_load((CONF_DIR / "task" / "bandit_tuning.yaml").read_text())["task"])
"""The bandit family's ``task`` block, as conf/task/bandit_tuning.yaml declares it."""


def failing_cell(config: Mapping[str, Any]) -> dict[str, Any]:
    """``run_cell``, except that it raises for ``fail.seed`` of ``fail.tuner``.

    Select it with ``cell=tests.report_helpers.failing_cell +fail.tuner=tl +fail.seed=1``.
    """
    fail = config.get("fail") or {}
    if config["seed"] == fail.get("seed") and config["tuner"]["name"] == fail.get("tuner"):
        raise RuntimeError(f"deliberate failure of {fail['tuner']} seed {config['seed']}")
    return run_cell(config)


failing_cell.validate = run_cell.validate
