"""docs/extending.md's walk-through, its last step (issue #39): the sweep of your own tuner
prints the MLflow UI line and the link; the link, opened in a fresh headless Chromium on
that store, shows the runs grouped by tuner for LinUCB, every seed's final regret per tuner
(yours among them) in its own colour. Slow: a sweep, an MLflow server and Chromium
(``make test-cluster``)."""

from __future__ import annotations

import re

import pytest

from sweeper.report.pagecheck import render_dom
from sweeper.servers import mlflow_server
from tests.test_conformance import run_example, write_examples
from tests.test_ui_link import LINK, _strip


@pytest.mark.slow
def test_the_walkthrough_s_link_shows_each_tuner_s_seeds(tmp_path):
    examples = write_examples(tmp_path)
    store = f"sqlite:///{tmp_path}/mlflow.db"
    sweep, _ = examples["comparison"].strip().splitlines()
    printed = run_example(sweep, tmp_path, store).stdout
    link = LINK.search(printed).group(1)
    assert link.startswith("http://127.0.0.1:5000/") and "viewStateShareKey=" in link
    with mlflow_server(store, tmp_path / "art", workers=1) as url:
        dom = render_dom(re.sub(r"^http://127\.0\.0\.1:5000", url, link), 60000)
    assert "Group by: tuner" in dom, dom[-3000:]
    assert "value=\"tags.algorithm = 'linucb'\"" in dom  # one algorithm at a time
    strip = _strip(dom, "tuner.name")
    assert sorted(strip) == ["cdt", "epsilon_greedy", "op", "tl"], strip
    colours = {tuner: set(fills) for tuner, fills in strip.items()}
    assert all(len(fills) == 5 for fills in strip.values())  # every seed, not a mean
    assert all(len(c) == 1 for c in colours.values())  # one colour per tuner ...
    assert len({c.pop() for c in colours.values()}) == 4  # ... each its own
