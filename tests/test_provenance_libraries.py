"""Runs carry the versions of the numerical libraries their cell loaded; a sweep resumed
under other versions says so, and the report marks cells computed under several (issue
#26, item 4)."""

from __future__ import annotations

import io
from importlib import metadata

from mlflow import MlflowClient

from sweeper import execute
from sweeper.provenance import LIBRARIES_TAG, changed_libraries, mixed_libraries
from sweeper.report.load import load_experiment
from sweeper.sweep import run_sweep


def _sweep(composer, tracking_uri: str, seeds: int):
    overrides = ["task=toy", "launcher.name=local", f"seeds={seeds}", "horizon=5",
                 f"tracking.uri={tracking_uri}", "experiment.name=libs"]  # fmt: skip
    out = io.StringIO()
    return run_sweep(composer(overrides), composer, overrides, out=out), out.getvalue()


def test_library_versions_are_tagged_compared_on_resume_and_marked_in_the_report(
    composer, tracking_uri, monkeypatch
):
    numpy = f"numpy={metadata.version('numpy')}"
    first, _ = _sweep(composer, tracking_uri, 2)
    client = MlflowClient(tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name("libs").experiment_id])
    cells = [r for r in runs if "cell_key" in r.data.tags]
    assert len(cells) == 2 and all(numpy in r.data.tags[LIBRARIES_TAG].split() for r in cells)
    assert load_experiment("libs", tracking_uri).notes == []  # one set of versions

    # The parent remembers the driver's versions: pretend the first sweep ran under another.
    client.set_tag(first.parent_run_id, LIBRARIES_TAG, "numpy=0.0.1")
    _, out = _sweep(composer, tracking_uri, 2)
    assert "resumes under other library versions" in out and "numpy 0.0.1 -> " in out

    # A third cell computed under another numpy (as on a node with another environment).
    monkeypatch.setattr(execute, "loaded_libraries", lambda: "numpy=0.0.1")
    _sweep(composer, tracking_uri, 3)
    notes = load_experiment("libs", tracking_uri).notes
    assert any(f"several library versions (numpy 0.0.1, {numpy[6:]})" in n for n in notes), notes


def test_changed_libraries_compares_only_what_both_name():
    assert changed_libraries("numpy=1.0 scipy=1.1", "numpy=2.0 scipy=1.1 optuna=3") == (
        "numpy 1.0 -> 2.0"
    )
    assert changed_libraries(None, "numpy=2.0") == ""


def test_a_library_only_some_cells_loaded_is_not_a_mix():
    # MovieLens cells load pandas, simulation cells do not: one set of versions.
    assert mixed_libraries(["numpy=2.4 scipy=1.17", "numpy=2.4 pandas=3.1 scipy=1.17", None]) == ""
    assert mixed_libraries(["numpy=2.4 scipy=1.17", "numpy=2.3 pandas=3.1 scipy=1.17"]) == (
        "numpy 2.3, 2.4"
    )
