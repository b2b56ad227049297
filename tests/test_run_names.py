"""Run names and tags that tell a sweep's variants apart in MLflow's runs table: the axes
the sweep varies lead the name and are tags of their own, under the short names and labels
of the experiment's ``report.axes`` (sweeper/cells.py)."""

from __future__ import annotations

import pickle

from sweeper.cells import AxisKey
from sweeper.grid import expand


def test_the_ablation_tags_its_runs_by_t1_and_k_and_names_lead_with_them(composer):
    overrides = ["+exp=ablation", "algorithm=linucb", "dataset=simulation", "seeds=1"]
    cells = list(expand(composer(overrides), composer, overrides))
    pairs = {(c.tags["T1"], c.tags["k"]) for c in cells}
    assert pairs == {("0", "3"), ("T^(2/(p+3))", "3"), ("0", "1"), ("0", "2")}
    names = {c.label for c in cells}
    assert "T1=0/k=1/linucb/cdt/simulation/seed0" in names
    assert "T1=T^(2/(p+3))/k=3/linucb/cdt/simulation/seed0" in names
    assert all(c.label.startswith(f"T1={c.tags['T1']}/k={c.tags['k']}/") for c in cells)


def test_candidate_lists_are_tagged_by_their_label_k_not_the_whole_list(composer):
    overrides = ["+exp=candidate_size", "algorithm=linucb", "seeds=1"]
    cells = list(expand(composer(overrides), composer, overrides))
    op = {c.tags["k"]: c.label for c in cells if c.tags["tuner"] == "op"}
    assert sorted(op, key=int) == ["2", "3", "6", "13", "25", "50"]
    assert op["50"] == "k=50/linucb/op/simulation/seed0"
    (cdt,) = [c for c in cells if c.tags["tuner"] == "cdt"]  # CDT has no candidate set
    assert "k" not in cdt.tags and cdt.label == "linucb/cdt/simulation/seed0"
    assert max(len(c.setting) for c in cells) < 40


def test_an_unnamed_axis_is_tagged_by_its_last_part_and_a_long_list_by_its_length():
    axis = pickle.loads(pickle.dumps(AxisKey("space.candidates")))  # as Ray ships a cell
    assert axis == "space.candidates" and axis.tag == "candidates"
    assert axis.text([0.1, 1.0]) == "[0.1,1]"
    assert axis.text([round(0.1 * i, 1) for i in range(1, 51)]) == "50 values"
    named = AxisKey("tuner.warmup_multiplier", "T1", {"0": 0.0, "T^(2/(p+3))": 1.0})
    assert named.tag == "T1" and named.text(1.0) == "T^(2/(p+3))"
    assert named.text(0) == "0" and named.text(2.0) == "2"
