"""The MLflow UI link a sweep prints opens the experiment's runs table in the
model-training view in a fresh browser, not MLflow's GenAI overview (sweeper/ui.py).

The browser test is slow (a sweep, an ``mlflow server``, headless Chromium) and needs
Debian's ``chromium`` package (or ``$CHROMIUM``); ``make test-cluster`` and ``make
check-pages`` run it."""

from __future__ import annotations

import io
import re

import pytest

from sweeper.report.pagecheck import check_ui
from sweeper.servers import mlflow_server
from sweeper.sweep import SweepResult, print_summary, run_sweep

LINK = re.compile(r"browse them: (?:.*?then )?open (\S+)", re.S)


def test_a_local_store_prints_the_command_and_the_runs_address():
    out = io.StringIO()
    print_summary(SweepResult("ablation", "sqlite:///mlflow.db", 4, 0, experiment_id="7"), out)
    printed = out.getvalue()
    assert "mlflow ui --backend-store-uri sqlite:///mlflow.db" in printed
    assert LINK.search(printed).group(1) == (
        "http://127.0.0.1:5000/#/experiments/7/runs?workflowType=machine_learning"
    )


@pytest.mark.slow
def test_the_printed_link_opens_the_runs_table_in_a_fresh_browser(composer, tmp_path, ray_local):
    with mlflow_server(f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "art", workers=1) as url:
        overrides = ["task=toy", "horizon=20", "seeds=1", f"tracking.uri={url}",
                     "experiment.name=ui_link"]  # fmt: skip
        out = io.StringIO()
        result = run_sweep(composer(overrides), composer, overrides, out=out)
        print_summary(result, out)
        link = LINK.search(out.getvalue()).group(1)
        assert link.startswith(f"{url}/#/experiments/{result.experiment_id}/runs")
        view = check_ui(link, "sweep-")  # the sweep's parent run, in the runs table
        assert view.ok, view
        # the form MLflow's own experiment link takes shows the GenAI chrome: the check
        # tells the two apart
        bare = check_ui(f"{url}/#/experiments/{result.experiment_id}", "sweep-")
        assert bare.genai and not bare.ok, bare
