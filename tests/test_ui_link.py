"""The MLflow UI link a sweep prints opens the experiment's runs table in the
model-training view in a fresh browser, not MLflow's GenAI overview, and a sweep that
compares tuners on the comparison docs/ui.md describes (sweeper/ui.py): the runs grouped by
tuner, the lead metric per tuner with every seed, each tuner in its own colour; the sweep's
bookkeeping stays off the cells' charts (issue 39, item 4).

The browser tests are slow (a sweep, an ``mlflow server``, headless Chromium) and need
Debian's ``chromium`` package (or ``$CHROMIUM``); ``make test-cluster`` and ``make
check-pages`` run them."""

from __future__ import annotations

import io
import json
import re
from collections import defaultdict

import pytest
from mlflow import MlflowClient

from sweeper.report.pagecheck import check_ui, render_dom
from sweeper.servers import mlflow_server
from sweeper.store.parent import SUMMARY_TAG
from sweeper.store.tracking import RUN_COLOR
from sweeper.sweep import SweepResult, print_summary, run_sweep
from sweeper.ui import PALETTE, SHARED_VIEW

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


SMOKE = ["+exp=smoke", "horizon=60", "launcher.name=local", "experiment.name=compare"]
TUNERS = ["theory", "fixed", "tl"]  # smoke's grid order: their colours, in PALETTE's order
BOOKKEEPING = ("cells_per_s", "sweep.cells")  # the sweep's own summary: never charted


def _sweep(composer, uri: str) -> tuple[SweepResult, str]:
    overrides = [*SMOKE, f"tracking.uri={uri}"]
    out = io.StringIO()
    result = run_sweep(composer(overrides), composer, overrides, out=out)
    assert result.ok, out.getvalue()[-2000:]
    return result, out.getvalue()


def test_runs_are_coloured_by_tuner_the_view_is_stored_and_bookkeeping_is_tags(composer, tmp_path):
    uri = f"sqlite:///{tmp_path}/mlflow.db"
    result, printed = _sweep(composer, uri)
    client = MlflowClient(uri)
    runs = client.search_runs([result.experiment_id], max_results=100)
    cells = [r for r in runs if "cell_key" in r.data.tags]
    assert len(cells) == 18
    for run in cells:  # each tuner its own colour, the same for all its runs
        tags = run.data.tags
        assert tags[RUN_COLOR] == PALETTE[TUNERS.index(tags["tuner"])], tags
    (parent,) = [r for r in runs if r.data.tags.get("role") == "sweep"]
    assert parent.data.metrics == {}  # nothing of the sweep's own on the cells' charts
    assert parent.data.tags[f"{SUMMARY_TAG}cells"] == "18"
    assert parent.data.tags[f"{SUMMARY_TAG}failed"] == "0"

    link = LINK.search(printed).group(1)
    assert link.endswith(f"&viewStateShareKey={result.view}&compareRunsMode=CHART"), link
    tags = client.get_experiment(result.experiment_id).tags
    view = json.loads(tags[f"{SHARED_VIEW}{result.view}"])
    assert view["searchFilter"] == "tags.algorithm = 'linucb'"  # one setting, never pooled
    assert view["groupBy"]["groupByKeys"] == [{"mode": "tag", "groupByData": "tuner"}]
    (lead, curve) = view["compareRunCharts"]
    assert (lead["xaxis"]["key"], lead["yaxis"]["key"]) == ("tuner.name", "final_regret")
    assert curve["metricKey"] == "regret"


def _strip(dom: str, axis_title: str) -> dict[str, list[str]]:
    """The scatter chart whose x axis is ``axis_title``: each x category's points, by fill."""
    title = dom.index(f'data-unformatted="{axis_title}"')
    chart = dom[dom.rindex("plot-container", 0, title) : title]
    ticks = re.findall(
        r'<g class="xtick"><text[^>]*data-unformatted="([^"]*)"[^>]*translate\(([\d.]+),', chart
    )
    points = re.findall(
        r'class="point[^"]*" transform="translate\(([\d.]+),[^>]*fill: (rgb\([^)]*\))', chart
    )
    xs = sorted({float(x) for x, _ in points})
    assert len(xs) == len(ticks), (ticks, points)
    names = [name for name, _ in sorted(ticks, key=lambda t: float(t[1]))]
    shown: dict[str, list[str]] = defaultdict(list)
    for x, fill in points:
        shown[names[xs.index(float(x))]].append(fill)
    return dict(shown)


def _rgb(colour: str) -> str:
    return "rgb({}, {}, {})".format(*(int(colour[i : i + 2], 16) for i in (1, 3, 5)))


@pytest.mark.slow
def test_the_printed_link_opens_a_per_tuner_chart_of_the_lead_metric(composer, tmp_path):
    """docs/ui.md: the link the sweep prints opens, in a fresh browser, the runs grouped by
    tuner for one algorithm and the final regret of every seed per tuner, each tuner in
    its own colour; the chart view of the experiment shows no bookkeeping metric."""
    with mlflow_server(f"sqlite:///{tmp_path}/mlflow.db", tmp_path / "art", workers=1) as url:
        result, printed = _sweep(composer, url)
        link = LINK.search(printed).group(1)
        dom = render_dom(link, 60000)
        assert "Group by: tuner" in dom, dom[-3000:]
        assert "value=\"tags.algorithm = 'linucb'\"" in dom  # the search box: one algorithm
        assert "final_regret by tuner" in dom
        strip = _strip(dom, "tuner.name")
        assert sorted(strip) == sorted(TUNERS), strip
        for tuner, fills in strip.items():  # 3 seeds each, in the tuner's own colour
            assert fills == [_rgb(PALETTE[TUNERS.index(tuner)])] * 3, (tuner, fills)
        bare = f"{url}/#/experiments/{result.experiment_id}/runs?workflowType=machine_learning"
        charts = render_dom(f"{bare}&compareRunsMode=CHART", 60000)
        assert "Model metrics" in charts  # the chart view, drawn
        for page in (dom, charts):  # the sweep's own numbers are tags, charted nowhere
            assert "Unassigned" not in page and not [m for m in BOOKKEEPING if m in page]
