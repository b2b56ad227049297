"""The MLflow UI link the sweep prints, and the comparison it opens (docs/ui.md).

**The model-training view.** MLflow 3's UI keeps a GenAI / Model training toggle in the
browser's local storage (default GenAI) and does not reconcile it with the experiment's
``mlflow.experimentKind`` tag (mlflow issue #24498): in a fresh browser,
``#/experiments/<id>`` opens the GenAI overview (traces dashboard, "Detect Issues"), and
``#/experiments/<id>/runs`` the runs table under the GenAI sidebar. The query
``workflowType=machine_learning`` selects the model-training view for that page (MLflow's
``WorkflowTypeProvider`` reads it before local storage). Checked in a fresh headless
Chromium with MLflow 3.16.1 and 3.17.2, the range pyproject.toml pins
(tests/test_ui_link.py; 3.18.0 was not installable here to try).

**The comparison.** A sweep's link opens a view of its own, as far as MLflow's URL can say
it (:func:`comparison`): ``viewStateShareKey=KEY`` loads the page state MLflow's "Share"
button stores in the experiment tag ``mlflow.sharedViewState.KEY`` (search filter, Group
by, charts; ``useSharedExperimentViewState`` in MLflow's UI), and ``compareRunsMode=CHART``
the chart view. The view pins every other axis of the sweep to its first value (a group
never pools two settings), groups the runs table by the family's compare axis, and
charts each run (each seed) on its own: the lead metric per compare option (a strip of
points, its spread over seeds) and the family's curves. Each cell's run carries the tag
``mlflow.runColor``, the colour MLflow's UI draws a run in (and writes when you pick one),
distinct by compare option (:data:`PALETTE`, in the grid's order). A group's colour is not
the runs': MLflow hashes the group's name into its palette (two options may share a
colour) or keeps the colour picked for it in the browser's local storage
(``experimentRunColors``), where no server can set it; so the charts show runs, not group
means. MLflow's Assistant panel opens by itself on a first visit to a local server (a
flag in local storage): no address closes it (docs/ui.md, the clicks for the rest).
Checked in a fresh headless Chromium with MLflow 3.17.2 (tests/test_ui_link.py); 3.16.1,
the range's other end, ships the same experiment-page bundle (its chunk
``3878.0467b2c4.chunk.js``, named by its content's hash, is the same file).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlencode

from sweeper.command import tool
from sweeper.grid import Grid
from sweeper.task import Task
from sweeper.uri import redact

UI_PORT = 5000
"""Where ``mlflow ui`` serves by default."""

VIEW = {"workflowType": "machine_learning"}
SHARED_VIEW = "mlflow.sharedViewState."
"""The prefix of the experiment tag that holds a shared view of the experiment page."""
PALETTE = (
    "#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#000000",
    "#F0E442", "#8C564B", "#7F7F7F", "#BCBD22", "#17BECF",
)  # fmt: skip
"""Okabe and Ito's eight colours (told apart with any colour vision), then four of
Tableau's; a thirteenth option takes the first colour again."""
PLAIN_TAG = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


@dataclass(frozen=True)
class Comparison:
    """How a sweep's runs are compared in MLflow's UI (module docstring).

    Attributes
    ----------
    axis : the compare axis (a group of the grid), whose options are told apart.
    colours : each option's colour (``mlflow.runColor`` of its runs).
    where : the search filter pinning every other axis to its first value.
    key : the view's share key; ``state``: the view (MLflow's experiment-page state).
    """

    axis: str
    colours: dict[str, str]
    where: str
    key: str
    state: dict[str, Any] = field(default_factory=dict)

    @property
    def tag(self) -> tuple[str, str]:
        """The experiment tag that holds the view."""
        return f"{SHARED_VIEW}{self.key}", json.dumps(self.state, separators=(",", ":"))


def comparison(cells: Grid, task: Task, key: str) -> Comparison | None:
    """The comparison of the sweep ``cells`` by the family's compare axis, its view stored
    under ``key``; None when the axis is not a group the sweep varies."""
    axis = task.compare
    values = cells.values_of(axis) if axis in cells.groups else []
    if len(values) < 2:
        return None
    colours = {value: PALETTE[i % len(PALETTE)] for i, value in enumerate(values)}
    pins = []
    for other in (*cells.groups, *(getattr(k, "tag", k) for k in cells.varying)):
        others = cells.values_of(other) if other != axis else []
        if len(others) > 1 and "'" not in others[0]:
            name = other if PLAIN_TAG.match(other) else f"`{other}`"
            pins.append(f"tags.{name} = '{others[0]}'")
    where = " and ".join(pins)
    return Comparison(axis, colours, where, key, _state(axis, where, task))


def _state(axis: str, where: str, task: Task) -> dict[str, Any]:
    """MLflow's experiment-page state: the runs grouped by ``axis`` in the table, each run
    on its own in the charts (its colour), the lead metric per option, then the curves."""
    section = f"sweeper-{axis}"
    charts = []
    if task.lead:
        charts.append({
            "uuid": "sweeper-lead", "type": "SCATTER", "metricSectionId": section,
            "xaxis": {"type": "PARAM", "key": f"{axis}.name"},
            "yaxis": {"type": "METRIC", "key": task.lead},
            "runsCountToCompare": 1000, "isGenerated": False, "deleted": False,
        })  # fmt: skip
    for curve in task.curves:
        charts.append({
            "uuid": f"sweeper-{curve}", "type": "LINE", "metricSectionId": section,
            "metricKey": curve, "selectedMetricKeys": [curve], "xAxisKey": "step",
            "scaleType": "linear", "lineSmoothness": 0, "runsCountToCompare": 1000,
            "isGenerated": False, "deleted": False,
        })  # fmt: skip
    title = f"{task.lead} by {axis}" if task.lead else f"by {axis}"
    return {
        "searchFilter": where,
        "groupBy": {"aggregateFunction": "average",
                    "groupByKeys": [{"mode": "tag", "groupByData": axis}]},
        "groupsExpanded": {},
        "selectedColumns": [f"metrics.`{task.lead}`", "tags.`seed`"] if task.lead else [],
        "useGroupedValuesInCharts": False,
        "runsHiddenMode": "SHOW_ALL",
        "compareRunCharts": charts,
        "compareRunSections": [{"uuid": section, "name": title, "display": True,
                                "isReordered": False, "deleted": False, "isGenerated": False}],
        "isAccordionReordered": False,
        "hideEmptyCharts": True,
    }  # fmt: skip


def experiment_url(server: str, experiment_id: str, view: str | None = None) -> str:
    """The runs table of experiment ``experiment_id`` on the MLflow UI at ``server``
    (e.g. ``http://127.0.0.1:5000``), in the model-training view; with ``view``, the
    shared view stored under that key, in the chart view."""
    query = {**VIEW, **({"viewStateShareKey": view, "compareRunsMode": "CHART"} if view else {})}
    return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?{urlencode(query)}"


def browse_hint(tracking_uri: str, experiment_id: str, view: str | None = None) -> str:
    """How to open the experiment's runs (its comparison ``view``, when given): its address
    on a tracking server, or the ``mlflow ui`` command for a local store (the package's own
    ``mlflow``, in the directory the sweep ran in: sweeper/command.py) and the address it
    will serve."""
    if tracking_uri.split(":", 1)[0] in ("http", "https"):
        return redact(f"open {experiment_url(tracking_uri, experiment_id, view)}")
    local = experiment_url(f"http://127.0.0.1:{UI_PORT}", experiment_id, view)
    serve = tool("mlflow", "ui", "--backend-store-uri", tracking_uri).shell()
    return f"start MLflow's UI with\n    {serve}\n  then open {local}"
