"""The benches' one harness (bench/harness.py): a complete header, medians of repeats,
ratios paired by repeat; and every bench writes through it, with no timing of its own."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench"
BENCHES = sorted(BENCH.glob("bench_*.py"))
OWN_TIMING = ("perf_counter", "process_time", "getloadavg", "datetime", "platform")


@pytest.fixture(scope="module")
def harness():
    spec = importlib.util.spec_from_file_location("harness", BENCH / "harness.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    yield module
    del sys.modules[spec.name]


def _facts(harness, before: float, after: float, dirty: bool = False):
    return harness.Facts(
        started=datetime(2026, 11, 22, 3, 45, tzinfo=UTC),
        seconds=754.0,
        command="python bench/bench_x.py --repeats 3",
        commit="e4c17d0",
        dirty=dirty,
        cpus=2,
        usable=2,
        machine="x86_64 (Some CPU)",
        python="3.11.7",
        libraries={"numpy": "2.4.6"},
        load_before=before,
        load_after=after,
        busy=1,
    )


def test_the_header_says_when_what_where_and_the_load(harness):
    lines = harness.header(_facts(harness, 0.55, 1.40, dirty=True))
    assert lines == [
        "- Measured: 2026-11-22 03:45 UTC, for 12.6 min, by `python bench/bench_x.py --repeats 3`",
        "- Commit: e4c17d0 with uncommitted changes",
        "- Machine: 2 CPUs (2 usable by the bench), x86_64 (Some CPU); Python 3.11.7, numpy 2.4.6",
        "- Load average (1 min): 0.55 before, 1.40 after (the bench itself keeps about 1 CPU busy)",
    ]


@pytest.mark.parametrize(
    ("before", "after", "loaded"),
    [(1.99, 2.99, False), (2.0, 0.5, True), (0.5, 3.0, True), (0.1, 1.0, False)],
)
def test_a_load_at_or_above_the_cpus_is_said(harness, before, after, loaded):
    """The load after less the bench's own CPUs (1 here), or the load before, >= 2 CPUs."""
    lines = harness.header(_facts(harness, before, after))
    assert any(line.startswith("- **Measured under load**") for line in lines) == loaded


def test_a_live_header_names_this_checkout(harness):
    commit = subprocess.run(
        ["git", "rev-parse", "--short", "HEAD"], cwd=BENCH, capture_output=True, text=True
    ).stdout.strip()
    bench = harness.Bench(libraries=("numpy",), command="python bench/bench_x.py")
    lines = bench.header()
    assert [line.split(":")[0] for line in lines[:4]] == [
        "- Measured",
        "- Commit",
        "- Machine",
        "- Load average (1 min)",
    ]
    if commit:
        assert lines[1].startswith(f"- Commit: {commit}")
    assert re.search(r"numpy \d", lines[2])


def test_medians_of_repeats_and_interleaved_order(harness):
    calls: list[str] = []
    timing = harness.measure(lambda: calls.append("m") or len(calls), 3)
    assert timing.values == [1, 2, 3] and len(timing.walls) == len(timing.cpus) == 3
    assert timing.wall == sorted(timing.walls)[1]
    calls.clear()
    names = ("a", "b", "c")
    timings = harness.interleaved({n: (lambda n=n: calls.append(n)) for n in names}, 3)
    assert "".join(calls) == "abcbcacab"  # each repeat rotated: load changes hit them alike
    assert all(len(t.walls) == 3 for t in timings.values())


def test_a_ratio_pairs_the_repeats_of_one_run(harness):
    slow, fast = harness.Timing(walls=[1.0, 6.0, 3.0]), harness.Timing(walls=[1.0, 2.0, 1.0])
    assert harness.ratio(slow, fast).value == 3.0  # median of 1, 3, 3
    said = harness.ratio(slow, fast)
    assert f"{said}" == str(said) == "3.00x (wall time, median of 3 repeats of this run)"
    assert f"{said:.1f}" == "3.0"
    with pytest.raises(ValueError, match="pairs repeats"):
        harness.ratio(slow, harness.Timing(walls=[1.0]))


@pytest.mark.parametrize("path", BENCHES, ids=lambda p: p.stem)
def test_every_bench_writes_through_the_harness(path):
    """It imports the harness, starts a Bench and writes its header; it times nothing, and
    reads no load, date or machine, by itself; it names no number of cores in its text."""
    tree = ast.parse(path.read_text())
    imported = {
        alias.name
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.module == "harness"
        for alias in node.names
    }
    assert "Bench" in imported
    called = {
        node.func.attr if isinstance(node.func, ast.Attribute) else getattr(node.func, "id", "")
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
    }
    assert "Bench" in called and called & {"write", "header"}
    names = {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute)}
    names |= {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    assert not names & set(OWN_TIMING), names & set(OWN_TIMING)
    texts = [n.value for n in ast.walk(tree) if isinstance(n, ast.Constant)]
    assert not [t for t in texts if isinstance(t, str) and re.search(r"\b2[ -](cores|CPUs)", t)]


def test_every_results_file_has_its_bench():
    """Each bench writes its results file, and each results file is a bench's (its own
    name, or its name and a part: ``bench_scale.py --fsync`` writes scale_fsync.md)."""
    results = {p.stem for p in (BENCH / "results").glob("*.md")}
    benches = {p.stem.removeprefix("bench_") for p in BENCHES}
    assert benches <= results, benches - results
    orphans = [r for r in results if r not in benches and not r.startswith(tuple(benches))]
    assert not orphans, orphans
