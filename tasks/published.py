"""A number a paper publishes, transcribed so a report can show it beside ours.

Each family lists its papers' numbers as ``Published`` records in its own ``published``
module (``tasks/bandit_tuning/published.py``, ``tasks/opl_hpo/published.py``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Published:
    """One published number: ``value`` of ``metric`` for ``cell`` in ``table``.

    ``cell`` maps the report's axis names to their values; ``sd`` is the published spread
    when the paper gives one; ``conditions`` are the settings of the paper's runs (config
    keys): a report still shows the number when its runs differ, but flags it.
    """

    table: str
    metric: str
    cell: Mapping[str, Any]
    value: float
    sd: float | None = None
    conditions: Mapping[str, Any] = field(default_factory=dict)
    note: str = ""
