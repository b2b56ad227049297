"""A component's YAML gives its display label (issue #39, item 3): the report and
``sweeper.load`` show it, while the cell (its key, its constructor's arguments) never sees
it."""

from __future__ import annotations

import io
from pathlib import Path

from hydra import compose, initialize_config_dir

import sweeper
from sweeper.configs import ConfigSearch
from sweeper.grid import expand
from sweeper.paths import CONF_DIR
from sweeper.report import build_report

GREEDY = """\
_target_: sweeper_tasks.bandit_tuning.tuners.fixed.Fixed
name: fixed2
value: 2.0
values: {}
"""


def _conf(tmp_path: Path, label: str | None) -> Path:
    conf = tmp_path / ("labelled" if label else "plain")
    (conf / "tuner").mkdir(parents=True)
    text = GREEDY + (f"label: {label}\n" if label else "")
    (conf / "tuner" / "fixed2.yaml").write_text(text)
    return conf


def _grid(conf: Path, overrides: list[str]):
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        search = [f"hydra.searchpath=['file://{conf}']"]

        def composer(extra):
            return compose(config_name="config", overrides=[*extra, *search])

        cfg = composer(overrides)
        return cfg, composer, expand(cfg, composer, overrides, ConfigSearch.with_dirs([conf]))


def test_a_label_names_the_option_in_the_report_and_never_reaches_the_cell(tmp_path):
    overrides = ["algorithm=linucb", "tuner=fixed2", "horizon=60", "seed=0"]
    _, _, plain = _grid(_conf(tmp_path, None), overrides)
    conf = _conf(tmp_path, '"Fixed at 2"')
    cfg, composer, labelled = _grid(conf, overrides)
    assert labelled.keys == plain.keys  # the label is not part of the cell
    assert "label" not in labelled[0].config["tuner"]

    store = f"sqlite:///{tmp_path}/m.db"
    grid = "[{algorithm:[linucb],tuner:[fixed2,theory],dataset:[simulation]}]"
    given = ["horizon=60", "seeds=2", "launcher.name=local", "experiment.name=labels",
             "baseline=theory", f"+sweep.grid={grid}"]  # fmt: skip
    result = sweeper.run(None, given, config_dir=conf, tracking_uri=store, out=io.StringIO())
    assert result.exit_code == 0 and result.finished == 4  # Fixed built without a label
    report = build_report("labels", tmp_path / "out", store, configs=ConfigSearch.with_dirs([conf]))
    paired = report.tables["paired"].tidy
    assert list(paired["Tuner"]) == ["Fixed at 2"] and list(paired["tuner"]) == ["fixed2"]
    results = sweeper.load("labels", tracking_uri=store, config_dir=conf)
    assert list(results.compare()["tuner"]) == ["fixed2"]  # raw names in the API
    assert "fixed2" in set(results.cells["tuner"])
