"""The published numbers' own consistency, and the report's building blocks.

The numbers against the papers' text: tests/test_papers_text.py (`make test-papers`)."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from sweeper.grid import group_options
from sweeper.report.axes import Axis, canon
from sweeper.report.load import ReportError
from sweeper.report.spec import TableSpec, parse
from sweeper.report.stats import paired_difference
from sweeper.report.tables import metric_table
from sweeper_tasks.bandit_tuning.published import DISPLAY_NAMES, PUBLISHED, TABLES
from sweeper_tasks.published import Published
from tests.report_helpers import BANDIT

ALGORITHMS = set(group_options("algorithm"))
TUNERS = set(group_options("tuner"))


def test_published_cells_name_config_options_and_cite_a_table():
    for entry in PUBLISHED:
        assert entry.table in TABLES
        if entry.table.startswith("004"):  # the tuner alone: no algorithm (test below)
            continue
        assert entry.cell["algorithm"] in ALGORITHMS
        assert entry.cell.get("tuner", "theory") in TUNERS
        assert entry.value > 0
    # 003's "TL/Syndicated" column is Syndicated for the two-hyperparameter algorithms.
    table4 = [e for e in PUBLISHED if e.table == "003 Table 4"]
    assert {e.cell["tuner"] for e in table4 if e.cell["algorithm"] == "gloc"} == {
        "syndicated",
        "op",
    }
    assert {e.cell["tuner"] for e in table4 if e.cell["algorithm"] == "linucb"} == {"tl", "op"}
    assert DISPLAY_NAMES["ucb_glm"] == "UCB-GLM"


def test_canonical_values():
    assert canon(1.0) == "1" and canon(0.25) == "0.25" and canon(None) == "null"
    assert canon([0.1, 1.0, 2]) == "[0.1, 1, 2]" and canon(np.array([1.0, 2.5])) == "[1, 2.5]"
    assert canon(True) == "true" and canon({"b": 1.0, "a": "x"}) == "{a: x, b: 1}"


def test_paired_difference_against_scipy():
    rng = np.random.default_rng(0)
    d = rng.normal(1.0, 2.0, size=12)
    result = paired_difference(d)
    low, high = stats.t.interval(0.95, len(d) - 1, loc=d.mean(), scale=stats.sem(d))
    assert result.n == 12 and np.isclose(result.mean, d.mean())
    assert np.isclose(result.ci_low, low) and np.isclose(result.ci_high, high)
    assert np.isclose(result.p_value, stats.wilcoxon(d).pvalue)
    one = paired_difference([3.0])
    assert one.n == 1 and one.mean == 3.0 and np.isnan(one.ci_low) and np.isnan(one.p_value)
    assert paired_difference([0.0, 0.0, 0.0]).p_value == 1.0
    assert paired_difference([]).n == 0


def _cells(rows):
    frame = pd.DataFrame(rows)
    frame["@algorithm"] = frame["algorithm"]
    frame["@tuner"] = frame["tuner"]
    frame["@dataset"] = "simulation"
    frame["@space.candidates"] = frame["candidates"]
    frame["config"] = [{"horizon": 14000}] * len(frame)
    return frame


def test_metric_table_places_published_numbers_beside_their_cells():
    axes = [
        Axis("algorithm", "algorithm", True, ["linucb"], {"linucb": "LinUCB"}),
        Axis("dataset", "dataset", True, ["simulation"], {"simulation": "Simulation"}),
        Axis("tuner", "tuner", True, ["tl", "op"], {"tl": "TL", "op": "OP"}),
        Axis("space.candidates", "candidates", False, ["[1]", "[2]"], {"[1]": "C1", "[2]": "C2"}),
    ]
    rows = []
    for tuner, candidates, seed, status, value in [
        ("tl", "[1]", 0, "FINISHED", 10.0),
        ("tl", "[1]", 1, "FINISHED", 14.0),
        ("tl", "[1]", 2, "FAILED", np.nan),
        ("op", "[1]", 0, "FINISHED", 30.0),
        ("op", "[1]", 1, "FINISHED", 20.0),
        ("tl", "[2]", 0, "FINISHED", 5.0),
    ]:
        rows.append(
            {"algorithm": "linucb", "tuner": tuner, "candidates": candidates, "seed": seed,
             "status": status, "final_regret": value}
        )  # fmt: skip
    published = [
        Published("T4", "final_regret", {"algorithm": "linucb", "dataset": "simulation",
                  "tuner": "tl", "candidates": "C1"}, 343.14, conditions={"horizon": 14000},
                  note="this column repeats another"),
        Published("T4", "final_regret", {"algorithm": "linucb", "dataset": "simulation",
                  "tuner": "op", "candidates": "C2"}, 389.91, conditions={"horizon": 2000},
                  note="a note of a number not shown"),
        Published("T9", "final_regret", {"algorithm": "linucb", "extra": "x"}, 1.0),
    ]  # fmt: skip
    spec = TableSpec(
        "regret", "final_regret", "Regret", ["space.candidates"], {}, None, better="min"
    )
    table = metric_table(_cells(rows), axes, spec, published, {"T4": "Table four"}, "tuner")
    assert table.header == [
        "Algorithm", "Dataset", "candidates=C1, TL", "candidates=C1, TL [T4]",
        "candidates=C1, OP", "candidates=C2, TL",
    ]  # fmt: skip
    assert table.rows == [
        [
            "LinUCB",
            "Simulation",
            "12.00 ± 2.83 (2 seeds; 1 failed)",
            "343.14",
            "25.00 ± 7.07 (2 seeds)",
            "5.00 (1 seed)",
        ]
    ]
    assert table.bold == {(0, 5)}  # the lowest mean regret of the row
    tidy = table.tidy.set_index(["Tuner", "candidates"])
    assert tidy.loc[("TL", "C1"), "n_failed"] == 1
    assert tidy.loc[("TL", "C1"), "published [T4]"] == 343.14
    # op with C2 has no cells, so its published number has no column; T9 needs an axis
    # "extra" this experiment lacks, so it is never shown. A shown number's note is a
    # footnote; the note of a number not shown is not.
    assert table.footnotes == ["Table four.", "T4: this column repeats another."]


def test_report_section_errors_are_clear():
    with pytest.raises(ReportError, match="unknown key"):
        parse({"pivots": "x"})
    with pytest.raises(ReportError, match="needs at least a metric"):
        parse({"tables": [{"name": "x"}]})
    with pytest.raises(ReportError, match="distinct"):
        parse({"tables": [{"metric": "a"}, {"metric": "a"}]})
    spec = parse(
        {"paired": {"reference": "op"}, "pivot": "space.candidates"}, reference="tl", task=BANDIT
    )
    assert spec.reference == "tl" and spec.pivot == ["space.candidates"]
    assert [t.name for t in spec.tables] == ["regret", "runtime"]
    assert spec.tables[0].pivot == ["space.candidates"]


def test_a_transposed_table_puts_the_compared_values_in_rows():
    axes = [
        Axis("dataset", "dataset", True, ["retrieval"], {}),
        Axis("tuner", "tuner", True, ["gs", "bo"], {"gs": "Grid", "bo": "BO"}),
    ]
    rows = [
        {"dataset": "retrieval", "tuner": t, "seed": s, "status": "FINISHED", "f": v + s}
        for t, v in (("gs", 10.0), ("bo", 20.0))
        for s in (0, 1)
    ]
    frame = pd.DataFrame(rows)
    frame["@dataset"], frame["@tuner"] = frame["dataset"], frame["tuner"]
    frame["config"] = [{}] * len(frame)
    published = [Published("T1", "f", {"tuner": "gs"}, 3396.0)]
    spec = TableSpec("f", "f", "Cumulative F", [], {}, None, "mean_sd", "max", transpose=True)
    table = metric_table(frame, axes, spec, published, {"T1": "Table one"}, "tuner")
    assert table.header == ["Dataset", "Tuner", "Cumulative F", "published [T1]"]
    assert [r[1:3] for r in table.rows] == [["Grid", "10.50 ± 0.71"], ["BO", "20.50 ± 0.71"]]
    assert table.rows[0][3] == "3396.00" and table.bold == {(1, 2)}  # the best of the column


@pytest.fixture
def family(tmp_path, monkeypatch):
    """``family(published)``: a package ``fam_<n>`` with a cell module and, unless
    ``published`` is None, that text as its ``published.py``; its name."""
    import importlib
    import sys

    made: list[str] = []
    monkeypatch.syspath_prepend(str(tmp_path))

    def make(published: str | None) -> str:
        name = f"fam_{len(made)}"
        package = tmp_path / name
        package.mkdir()
        (package / "__init__.py").write_text("")
        (package / "cell.py").write_text("def run(config):\n    return {}\n")
        if published is not None:
            (package / "published.py").write_text(published)
        made.append(name)
        importlib.invalidate_caches()
        return name

    yield make
    for name in [m for m in sys.modules if m.split(".")[0] in made]:
        del sys.modules[name]


@pytest.mark.parametrize(
    ("text", "line", "error"),
    [
        ("from sweeper_tasks.published import Published\n\n"
         "PUBLISHED = [Publshed('T', 'f', {}, 1.0)]\n",
         3, "NameError: name 'Publshed' is not defined"),
        ("PUBLISHED = [\n", 1, "SyntaxError: '[' was never closed"),
        ("from sweeper_tasks.publshed import Published\n", 1,
         "ModuleNotFoundError: No module named 'sweeper_tasks.publshed'"),
    ],
)  # fmt: skip
def test_a_family_s_published_module_that_fails_to_import_is_an_error_naming_it(
    family, tmp_path, text, line, error
):
    from sweeper.report import find_published

    name = family(text)
    with pytest.raises(ReportError) as failed:
        find_published([f"{name}.cell.run"])
    message = str(failed.value)
    assert f"importing {name}.published failed at {tmp_path}/{name}/published.py:{line}" in message
    assert error in message and "\n" not in message


def test_a_family_without_published_numbers_or_not_installed_has_none(family):
    from sweeper.report import find_published

    name = family(None)
    assert find_published([f"{name}.cell.run", "not_installed.cells.run"]).entries == []
    good = family(
        "from sweeper_tasks.published import Published\n\n"
        "PUBLISHED = [Published('T', 'f', {}, 2.0)]\n"
    )
    found = find_published([f"{good}.cell.run"])
    assert found.module == f"{good}.published" and [e.value for e in found.entries] == [2.0]
