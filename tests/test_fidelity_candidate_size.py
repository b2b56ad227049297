"""The candidate-set size ablation (conf/exp/candidate_size.yaml) and its figure."""

from __future__ import annotations

import io

import numpy as np
from omegaconf import OmegaConf

from sweeper.paths import CONF_DIR
from sweeper.report import build_report
from sweeper.sweep import run_sweep


def test_the_sets_are_evenly_spaced_on_the_interval_with_the_asked_sizes():
    spec = OmegaConf.to_container(OmegaConf.load(CONF_DIR / "exp" / "candidate_size.yaml"))
    sets = spec["sweep"]["grid"][0]["space.candidates"]
    assert [len(s) for s in sets] == [2, 3, 6, 13, 25, 50]
    for values in sets:
        np.testing.assert_allclose(values, np.linspace(0.1, 5.0, len(values)), atol=5e-5)
    labels = spec["report"]["axes"]["space.candidates"]["labels"]
    assert {int(k): len(v) for k, v in labels.items()} == {k: k for k in (2, 3, 6, 13, 25, 50)}


def test_reduced_run_draws_regret_against_k_with_cdt_as_a_reference_line(
    composer, tracking_uri, tmp_path
):
    overrides = [
        "+exp=candidate_size",
        "seeds=2",
        "horizon=100",
        "algorithm=linucb",
        "launcher.name=local",
        f"tracking.uri={tracking_uri}",
    ]
    result = run_sweep(composer(overrides), composer, overrides, out=io.StringIO())
    assert result.ok and result.finished == (2 * 6 + 1) * 2
    report = build_report("candidate_size", tmp_path / "out", tracking_uri)
    text = (tmp_path / "out" / "report.md").read_text()
    assert "figures/against_k_final_regret.png" in text
    assert "dashed: a line without k" in text  # CDT has no k: drawn as a reference
    rows = report.tables["regret"].rows
    assert sum(1 for row in rows if row[-1]) == 1  # CDT fills one row (its own, k unset)
