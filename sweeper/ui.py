"""The address that opens an experiment in MLflow's UI on its runs table, in the
model-training view.

MLflow 3's UI keeps a GenAI / Model training toggle in the browser's local storage
(default GenAI) and does not reconcile it with the experiment's
``mlflow.experimentKind`` tag (mlflow issue #24498): in a fresh browser,
``#/experiments/<id>`` opens the GenAI overview (traces dashboard, "Detect Issues"), and
``#/experiments/<id>/runs`` the runs table under the GenAI sidebar. The query
``workflowType=machine_learning`` selects the model-training view for that page (MLflow's
``WorkflowTypeProvider`` reads it before local storage). Checked in a fresh headless
Chromium with MLflow 3.16.1 and 3.17.2, the range pyproject.toml pins
(tests/test_ui_link.py; 3.18.0 was not installable here to try).
"""

from __future__ import annotations

from urllib.parse import urlencode

from sweeper.command import tool
from sweeper.settings import redact

UI_PORT = 5000
"""Where ``mlflow ui`` serves by default."""

VIEW = {"workflowType": "machine_learning"}


def experiment_url(server: str, experiment_id: str) -> str:
    """The runs table of experiment ``experiment_id`` on the MLflow UI at ``server``
    (e.g. ``http://127.0.0.1:5000``), in the model-training view."""
    return f"{server.rstrip('/')}/#/experiments/{experiment_id}/runs?{urlencode(VIEW)}"


def browse_hint(tracking_uri: str, experiment_id: str) -> str:
    """How to open the experiment's runs: its address on a tracking server, or the
    ``mlflow ui`` command for a local store (the package's own ``mlflow``, in the
    directory the sweep ran in: sweeper/command.py) and the address it will serve."""
    if tracking_uri.split(":", 1)[0] in ("http", "https"):
        return redact(f"open {experiment_url(tracking_uri, experiment_id)}")
    local = experiment_url(f"http://127.0.0.1:{UI_PORT}", experiment_id)
    serve = tool("mlflow", "ui", "--backend-store-uri", tracking_uri).shell()
    return f"start MLflow's UI with\n    {serve}\n  then open {local}"
