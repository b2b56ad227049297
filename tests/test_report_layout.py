"""How the report groups cells into axes, and its figures, on hand-made cells."""

from __future__ import annotations

import numpy as np
import pandas as pd

from sweeper.configs import ConfigSearch
from sweeper.report.axes import build_axes
from sweeper.report.figures import curves_figure, hyperparameter_figures
from sweeper.report.load import MARKS, Loaded, _marks
from sweeper.report.results import Results
from sweeper.report.spec import parse
from sweeper.report.stats import paired_table
from tests.report_helpers import BANDIT


def _cell(tuner: str, seed: int, final: float, /, **config) -> dict:
    steps = np.arange(1, 101)
    curve = final * steps / 100
    return {
        "cell_key": f"{tuner}-{seed}-{sorted(config.items())}",
        "run_id": f"run-{tuner}-{seed}-{len(config)}",
        "status": "FINISHED",
        "algorithm": "linucb",
        "tuner": tuner,
        "dataset": "lipschitz",
        "seed": seed,
        "config": {"horizon": 100, "seed": seed, **config},
        "final_regret": final,
        "curve_step": steps,
        "curve_regret": curve,
        "hp_x": np.full(100, 0.25 * (1 + seed)),
        MARKS: [30, 60],
    }


def _loaded(rows, grid) -> Loaded:
    cells = pd.DataFrame(rows)
    cells["seed"] = cells["seed"].astype("Int64")
    return Loaded("t", "sqlite:///x.db", cells, {}, grid, 1, BANDIT)


def test_axes_hide_a_tuners_own_setting_and_add_unlisted_differences():
    rows = []
    for seed in (0, 1):
        for family, offset in (("triangle", 0.0), ("sine", 5.0)):
            dataset = {"family": family}
            cdt = {"restart_multiplier": 10.0}
            rows.append(_cell("cdt", seed, 10 + offset + seed, dataset=dataset, tuner=cdt))
            rows.append(_cell("zooming", seed, 20 + offset + seed, dataset=dataset, tuner={}))
    # A second sweep with another horizon: not a grid axis, but never averaged in.
    rows.append(_cell("zooming", 0, 99.0, dataset={"family": "sine"}, tuner={}, horizon=200))
    grid = {
        "tuner": ["cdt", "zooming"],
        "tuner.restart_multiplier": [10.0],
        "dataset.family": ["triangle", "sine"],
    }
    cells, axes = build_axes(_loaded(rows, grid), parse({}, task=BANDIT), {"cdt": "CDT"})
    shown = {a.key: a.shown for a in axes}
    assert shown == {
        "algorithm": False,  # one value, not a grid axis
        "tuner": True,
        "dataset": False,
        "tuner.restart_multiplier": False,  # only CDT sets it: it follows the tuner
        "dataset.family": True,
        "horizon": True,  # differs between cells the grid axes do not tell apart
    }
    family = next(a for a in axes if a.key == "dataset.family")
    assert family.values == ["triangle", "sine"]  # the grid's order
    assert set(cells["@horizon"]) == {"100", "200"}


def test_merged_values_share_a_column_and_paired_seeds_match():
    rows = [_cell("tl", s, 10.0 + s) for s in (0, 1, 2)]
    rows += [_cell("syndicated", s, 11.0 + s, algorithm_p=2) for s in (0, 1)]
    rows += [_cell("cdt", s, 9.0 + 2 * s) for s in (0, 1, 2)]
    frame = pd.DataFrame(rows)
    frame.loc[frame.tuner == "syndicated", "algorithm"] = "gloc"
    frame.loc[frame.tuner == "syndicated", "run_id"] = ["g0", "g1"]
    rows = frame.to_dict("records")
    rows += [{**_cell("cdt", s, 8.0, algorithm_p=2), "algorithm": "gloc"} for s in (0, 1, 2)]
    section = {"axes": {"tuner": {"merge": {"TL/Syndicated": ["tl", "syndicated"]}}}}
    loaded = _loaded(rows, {"tuner": ["tl", "syndicated", "cdt"]})
    loaded.config = {"report": section, "baseline": "cdt"}
    results = Results(loaded, ConfigSearch.with_dirs())
    tuner = next(a for a in results.axes if a.key == "tuner")
    assert tuner.values == ["TL/Syndicated", "cdt"]
    assert tuner.accepts("TL/Syndicated", "syndicated") and tuner.accepts("TL/Syndicated", "tl")
    compared = results.compare()
    assert list(compared["tuner"]) == ["tl", "syndicated"]  # raw names
    table, _ = paired_table(compared, results.axes, tuner, adaptive=False)
    assert list(table.tidy["Tuner"]) == ["TL/Syndicated"] * 2  # the merged column's label
    by_algorithm = table.tidy.set_index("algorithm")
    # gloc: Syndicated has seeds 0 and 1, CDT 0-2: seed 2 is excluded and counted.
    assert by_algorithm.loc["gloc", "n_pairs"] == 2 and by_algorithm.loc["gloc", "n_excluded"] == 1
    assert np.isclose(by_algorithm.loc["gloc", "difference"], np.mean([11 - 8, 12 - 8]))
    assert np.isclose(by_algorithm.loc["linucb", "difference"], np.mean([10 - 9, 11 - 11, 12 - 13]))


def test_marked_steps_are_read_from_params_or_config():
    word = BANDIT.markers
    assert _marks({"change_points": "[22861, 47734, 74817]"}, {}, word) == [
        22861.0,
        47734.0,
        74817.0,
    ]
    assert _marks({}, {"dataset": {"change_points": [5, 9]}}, word) == [5.0, 9.0]
    assert _marks({"change_points": "None"}, {"dataset": {"change_points": None}}, word) == []


def test_figures_mark_change_points_and_draw_the_hyperparameter(tmp_path):
    rows = [_cell(t, s, f + s) for t, f in (("cdt", 10.0), ("oracle", 5.0)) for s in (0, 1, 2)]
    cells, axes = build_axes(_loaded(rows, {"tuner": ["cdt", "oracle"]}), parse({}, task=BANDIT))
    tuner = [a for a in axes if a.key == "tuner"]
    regret = BANDIT.curves["regret"]
    caption = curves_figure(
        cells,
        axes,
        tuner,
        tmp_path / "regret.png",
        regret,
        ["oracle", "cdt"],
        "tuner",
        marks="change point",
    )
    assert caption is not None and "each change point" in caption
    assert (tmp_path / "regret.png").read_bytes()[:4] == b"\x89PNG"
    written = hyperparameter_figures(cells, axes, tuner, tmp_path)
    assert [name for name, _ in written] == ["hp_x.png"]
    assert (tmp_path / "hp_x.png").stat().st_size > 1000


def test_the_section_chooses_which_axes_make_the_lines():
    from sweeper.report import _line_axes

    rows = [_cell(t, s, 1.0 + s, dataset={"family": f}) for t in ("cdt", "zooming")
            for f in ("triangle", "sine") for s in (0, 1)]  # fmt: skip
    grid = {"tuner": ["cdt", "zooming"], "dataset.family": ["triangle", "sine"]}
    default = parse({}, task=BANDIT)
    chosen = parse({"figures": {"lines_by": "dataset.family"}}, task=BANDIT)
    _, axes = build_axes(_loaded(rows, grid), default)
    assert [a.key for a in _line_axes(default, axes)] == ["tuner"]
    assert [a.key for a in _line_axes(chosen, axes)] == ["dataset.family"]


def test_a_distribution_figure_pools_what_it_neither_draws_nor_panels(tmp_path):
    from sweeper.report.figures import distribution_figure
    from sweeper.task import Metric

    rows = [_cell(t, s, f + s) for t, f in (("cdt", 10.0), ("oracle", 5.0)) for s in range(6)]
    cells, axes = build_axes(_loaded(rows, {"tuner": ["cdt", "oracle"]}), parse({}, task=BANDIT))
    tuner = [a for a in axes if a.key == "tuner"]
    metric = Metric("final_regret", "Final cumulative regret", "lower")
    caption = distribution_figure(cells, axes, tuner, tmp_path / "d.png", metric, panels_by=[])
    assert caption is not None and "one histogram (density) per tuner" in caption
    assert (tmp_path / "d.png").read_bytes()[:4] == b"\x89PNG"
    missing = Metric("absent", "absent")
    assert distribution_figure(cells, axes, tuner, tmp_path / "x.png", missing) is None


def test_a_metric_against_an_axis_draws_one_point_per_value(tmp_path):
    from sweeper.report.figures import against_figure
    from sweeper.task import Metric

    rows = [_cell("sd2me", s, 10.0 * k + s, tuner={"expected_changes": k})
            for k in (5, 10, 25) for s in (0, 1)]  # fmt: skip
    grid = {"tuner": ["sd2me"], "tuner.expected_changes": [5, 10, 25]}
    cells, axes = build_axes(_loaded(rows, grid), parse({}, task=BANDIT))
    x_axis = next(a for a in axes if a.key == "tuner.expected_changes")
    tuner = [a for a in axes if a.key == "tuner"]
    metric = Metric("final_regret", "Final cumulative regret", "lower")
    caption = against_figure(cells, axes, x_axis, tuner, tmp_path / "a.png", metric)
    assert caption is not None and "against tuner.expected_changes" in caption
    assert (tmp_path / "a.png").stat().st_size > 1000


def test_an_axis_of_whole_numbers_gets_whole_ticks():
    import matplotlib.pyplot as plt

    from sweeper.report.figures import _whole_ticks

    fig, (whole, real) = plt.subplots(1, 2)
    for ax, values in ((whole, [2.0, 3.0, 6.0]), (real, [0.1, 0.5, 1.0])):
        ax.plot(values, values)
        _whole_ticks(ax, values)
    fig.canvas.draw()
    assert [t for t in whole.get_xticks() if 2 <= t <= 6] == [2, 3, 4, 5, 6]
    assert any(not float(t).is_integer() for t in real.get_xticks())
    plt.close(fig)


def test_a_hyperparameter_figure_shows_where_a_tuner_spends_its_rounds(tmp_path):
    """A tuner at 2.5 for the first half of T = 14,000 and at 0.1 after it, on the table's
    500-point grid; another whose draw jumps between 0.1 and 5 every round."""
    steps = np.linspace(28, 14000, 500)
    rows = []
    for seed in range(3):
        settles = _cell("op", seed, 1.0, horizon=14000)
        settles.update(curve_step=steps, hp_x=np.where(steps <= 7000, 2.5, 0.1))
        jumps = _cell("tl", seed, 1.0, horizon=14000)
        jumps.update(curve_step=steps, hp_x=np.where(np.arange(500) % 2 == seed % 2, 0.1, 5.0))
        rows += [settles, jumps]
    cells, axes = build_axes(_loaded(rows, {"tuner": ["op", "tl"]}), parse({}, task=BANDIT))
    tuner = [a for a in axes if a.key == "tuner"]
    assert hyperparameter_figures(cells, axes, tuner, tmp_path)[0][0] == "hp_x.png"
    plotted = pd.read_csv(tmp_path / "hp_x.csv")
    settles = plotted[plotted["line"] == "op"]
    assert 40 <= len(settles) <= 50  # windows of T/50 rounds, none empty here
    assert (settles["end"] - settles["start"]).round(6).eq(280).all()
    first, second = settles[settles["end"] <= 7000], settles[settles["start"] >= 7000]
    assert len(first) + len(second) == len(settles)  # no window straddles the switch
    assert (first["median"] == 2.5).all() and (second["median"] == 0.1).all()
    assert (settles["q75"] - settles["q25"]).eq(0).all()
    jumps = plotted[plotted["line"] == "tl"]
    assert len(jumps) <= 50
    assert (jumps["q25"] == 0.1).all() and (jumps["q75"] == 5.0).all()


def test_a_hyperparameter_figure_gives_each_tuner_its_own_panel(tmp_path, monkeypatch):
    """Four and eight tuners' interquartile bands on one log axis cannot be read apart: each
    tuner gets a subplot of its own (up to four side by side, then wrapped), one axis for
    all, and the figure fits a report page (1440 px)."""
    import matplotlib.image

    from sweeper.report import figures

    drawn = []
    monkeypatch.setattr(figures.plt, "close", lambda fig: drawn.append(fig))
    for count, shape in ((4, (1, 4)), (8, (2, 4))):
        tuners = [f"t{i}" for i in range(count)]
        rows = [_cell(t, s, 1.0 + i + s) for i, t in enumerate(tuners) for s in (0, 1, 2)]
        for row, value in zip(rows, np.repeat(np.geomspace(0.1, 5, count), 3), strict=True):
            row["hp_x"] = np.full(100, value)
        cells, axes = build_axes(_loaded(rows, {"tuner": tuners}), parse({}, task=BANDIT))
        tuner = [a for a in axes if a.key == "tuner"]
        out = tmp_path / str(count)
        out.mkdir()
        assert hyperparameter_figures(cells, axes, tuner, out)[0][0] == "hp_x.png"
        visible = [ax for ax in drawn[-1].axes if ax.get_visible()]
        assert len(visible) == count  # a subplot per tuner
        assert all(len(ax.get_lines()) == 1 for ax in visible)  # one tuner in each
        assert len({ax.get_ylim() for ax in visible}) == 1  # one axis for all
        rows_, columns = visible[0].get_subplotspec().get_gridspec().get_geometry()
        assert (rows_, columns) == shape
        height, width = matplotlib.image.imread(out / "hp_x.png").shape[:2]
        assert width <= 1440, width
