"""A report page as a reader opens it: rendered in headless Chromium (slow: a browser per
page). Needs Debian's ``chromium`` package (or ``$CHROMIUM``); without it the test fails
and says how to install it. ``make check-pages`` runs this and checks every page of
docs/results/: no broken image, no console error, no figure wider than the page."""

from __future__ import annotations

import io

import pytest

from sweeper.report import build_report
from sweeper.report.pagecheck import check_page
from sweeper.sweep import run_sweep

pytestmark = pytest.mark.slow


def test_a_fresh_report_page_loads_every_figure_without_console_errors(
    composer, tracking_uri, tmp_path, ray_local
):
    overrides = ["task=toy", "horizon=40", "seeds=2", f"tracking.uri={tracking_uri}",
                 "experiment.name=page"]  # fmt: skip
    run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    report = build_report("page", tmp_path / "report", tracking_uri)
    check = check_page(tmp_path / "report" / "index.html")
    assert sorted(src for src, _ in check.images) == sorted(p for p, _ in report.figures)
    assert check.ok, (check.broken, check.console)


def test_a_missing_figure_and_a_console_error_are_reported(tmp_path):
    (tmp_path / "index.html").write_text(
        '<html><body><img src="figures/gone.png"><script>console.error("bad table")</script>'
        "</body></html>"
    )
    check = check_page(tmp_path / "index.html")
    assert check.broken == ["figures/gone.png"]
    assert any("bad table" in message for message in check.console)
    assert not check.ok
    assert [p.name for p in tmp_path.iterdir()] == ["index.html"]  # its probe copy is gone


def test_a_figure_wider_than_the_page_is_reported(tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for name, inches in (("wide.png", 30), ("fits.png", 8)):
        fig = plt.figure(figsize=(inches, 2))
        fig.savefig(tmp_path / name, dpi=100)
        plt.close(fig)
    (tmp_path / "index.html").write_text(
        "<html><head><style>img { max-width: 100%; }</style></head><body>"
        '<img src="wide.png"><img src="fits.png"></body></html>'
    )
    check = check_page(tmp_path / "index.html")
    assert check.wide == ["wide.png"] and not check.broken and not check.overflow
    assert not check.ok
    (tmp_path / "index.html").write_text('<html><body><img src="wide.png"></body></html>')
    assert check_page(tmp_path / "index.html").overflow  # no max-width: it scrolls sideways


def test_a_table_wider_than_the_window_scrolls_in_its_box_not_the_page(tmp_path):
    from sweeper.report.html import page
    from sweeper.report.tables import Table

    header = ["setting"] + [f"beta0={b}, Baseline [001 Table V(pi0)]" for b in range(24)]
    wide = Table("wide", "Ours beside the paper's", "", header, [["TPE"] + ["0.412"] * 24])
    (tmp_path / "index.html").write_text(page("wide", [], [], [(wide, [])], []))
    check = check_page(tmp_path / "index.html")
    assert not check.overflow and check.ok
    (tmp_path / "index.html").write_text(
        page("wide", [], [], [(wide, [])], []).replace('class="scroll"', "")
    )
    assert check_page(tmp_path / "index.html").overflow  # without its box the page would scroll
