"""The published numbers of the code (``tasks/*/published.py``) against the papers' text.

The papers are not part of the project, so these tests are not in the default suite: they
are marked ``papers`` and run by ``make test-papers`` (and by CI, which has the papers), with
``SWEEPER_PAPERS_DIR`` naming the directory of the papers' text files. A missing directory
or paper fails them: they can only pass by reading the text.
"""

from __future__ import annotations

import os
from collections import defaultdict
from pathlib import Path

import pytest
import yaml

from sweeper_tasks.bandit_tuning.published import DISPLAY_NAMES
from sweeper_tasks.bandit_tuning.published import PUBLISHED as BANDIT_PUBLISHED
from sweeper_tasks.opl_hpo.published import PUBLISHED as OPL_PUBLISHED
from sweeper_tasks.opl_hpo.published import TABLES as OPL_TABLES

pytestmark = pytest.mark.papers
PAPERS_ENV = "SWEEPER_PAPERS_DIR"
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def papers() -> Path:
    """The directory ``$SWEEPER_PAPERS_DIR`` (``make test-papers`` sets it)."""
    configured = os.environ.get(PAPERS_ENV)
    assert configured, f"set {PAPERS_ENV} to the directory of the papers' text (make test-papers)"
    directory = Path(configured)
    assert directory.is_dir(), f"{PAPERS_ENV}={directory} is not a directory"
    return directory


def _paper(papers: Path, prefix: str) -> str:
    found = sorted(papers.glob(f"{prefix}_*.txt"))
    assert found, f"paper {prefix} ({prefix}_*.txt) is missing from {papers}"
    return found[0].read_text()


def _rows(table: str, key) -> dict:
    rows = defaultdict(list)
    for entry in BANDIT_PUBLISHED:
        if entry.table == table:
            rows[key(entry)].append(entry.value)
    return rows


@pytest.mark.parametrize("table", ["003 Table 1", "003 Table 4", "003 Table 5", "003 Table 6"])
def test_rows_of_003_tables_appear_in_the_paper(papers, table):
    text = _paper(papers, "003")
    rows = _rows(table, lambda e: (e.cell["algorithm"], e.cell["dataset"]))
    assert len(rows) == 14  # 7 algorithms x (simulation, Movielens)
    for values in rows.values():
        assert " ".join(f"{v:.2f}" for v in values) in text


def test_table2_and_table3_rows_appear_in_the_paper(papers):
    text = _paper(papers, "003")
    names = {"theory": "Theory", "cdt": "CDT", "op": "OP", "tl": "TL/Syndicated"}
    names["syndicated"] = names["tl"]
    rows = _rows("003 Table 2", lambda e: names[e.cell["tuner"]])
    assert len(rows) == 4
    for name, values in rows.items():
        assert f"{name} " + " ".join(f"{v:.2f}" for v in values) in text
    rows = _rows("003 Table 3", lambda e: e.cell["K"])
    assert set(rows) == {60, 120}
    for values in rows.values():
        assert " ".join(f"{v:g}" for v in values) in text


def test_002_table1_appears_in_the_paper(papers):
    text = _paper(papers, "002")
    rows = _rows("002 Table 1", lambda e: (e.cell["algorithm"], e.cell["features"]))
    assert len(rows) == 4
    for best, regret, theory in rows.values():
        assert f"{best:.1f}\t{regret:.2f} (" in text and f"\t{theory:.2f} (" in text


def test_004_table1_appears_in_the_paper_under_the_tuner_names_ncab_gives(papers):
    text = _paper(papers, "004")
    grid = yaml.safe_load((ROOT / "conf/exp/ncab.yaml").read_text())
    names = set()
    for block in grid["sweep"]["grid"]:
        names |= set(block.get("tuner.name") or block["tuner"])
    entries = [e for e in BANDIT_PUBLISHED if e.table == "004 Table 1"]
    assert len(entries) == 18 and {e.cell["tuner"] for e in entries} <= names
    rows = {line.split("\t")[0]: line.split("\t")[1:] for line in text.splitlines()}
    for entry in entries:
        score, seconds = rows[DISPLAY_NAMES[entry.cell["tuner"]].replace("²", " ² ")]
        if entry.metric == "cumulative_reward":
            assert score.rstrip("*") == f"{entry.value:g} \\pm {entry.sd:.1f}"
        else:
            assert seconds == f"{entry.value:g}"


def test_001_logging_policy_rows_appear_in_the_paper(papers):
    text = _paper(papers, "001")
    for metric, label in (("v_pi0", "$V(\\pi_0)$"), ("pi0_optimality", "$V(\\pi_0)/V(\\pi^*)$")):
        entries = [e for e in OPL_PUBLISHED if e.metric == metric]
        ordered = sorted(entries, key=lambda e: e.cell["logged_data.beta0"])
        assert [e.cell["logged_data.beta0"] for e in ordered] == [-3, 0, 3, 10, 20]
        assert label + "\t" + "\t".join(f"{e.value:.3f}" for e in ordered) in text


def test_001_table1_values_appear_in_the_paper(papers):
    text = _paper(papers, "001")
    entries = [e for e in OPL_PUBLISHED if e.table == "001 Table 1"]
    assert len(entries) == 4 and all(e.table in OPL_TABLES for e in entries)
    for procedure, row in (("baseline", "Baseline"), ("cir_hpo", "CIR-HPO (ours)")):
        values = [
            next(e.value for e in entries if e.cell == {**e.cell, "procedure": procedure,
                                                        "estimator": estimator})
            for estimator in ("ips", "dr")
        ]  # fmt: skip
        cells = "\t".join(f"{v * 1e3:.3f}\u00d710^{{-3}}" for v in values)
        assert f"{row}\t{cells}" in text
