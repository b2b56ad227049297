"""001's published numbers (tasks/opl_hpo/published.py) against the paper's text."""

from __future__ import annotations

import pytest

from tasks.opl_hpo.published import PUBLISHED, TABLES
from tests.test_report_published import papers_directory


@pytest.fixture(scope="module")
def text() -> str:
    """001's text from shared/papers beside the clone; a missing paper fails the tests."""
    found = sorted(papers_directory().glob("001_*.txt"))
    assert found, f"paper 001 (001_*.txt) is missing from {papers_directory()}"
    return found[0].read_text()


def test_logging_policy_rows_appear_in_the_paper(text):
    for metric, label in (("v_pi0", "$V(\\pi_0)$"), ("pi0_optimality", "$V(\\pi_0)/V(\\pi^*)$")):
        entries = [e for e in PUBLISHED if e.metric == metric]
        ordered = sorted(entries, key=lambda e: e.cell["logged_data.beta0"])
        assert [e.cell["logged_data.beta0"] for e in ordered] == [-3, 0, 3, 10, 20]
        assert label + "\t" + "\t".join(f"{e.value:.3f}" for e in ordered) in text


def test_table1_values_appear_in_the_paper(text):
    entries = [e for e in PUBLISHED if e.table == "001 Table 1"]
    assert len(entries) == 4 and all(e.table in TABLES for e in entries)
    for procedure, row in (("baseline", "Baseline"), ("cir_hpo", "CIR-HPO (ours)")):
        values = [
            next(e.value for e in entries if e.cell == {**e.cell, "procedure": procedure,
                                                        "estimator": estimator})
            for estimator in ("ips", "dr")
        ]  # fmt: skip
        cells = "\t".join(f"{v * 1e3:.3f}\u00d710^{{-3}}" for v in values)
        assert f"{row}\t{cells}" in text
