"""``make test-faults``: kill -9 of the driver and of a worker mid-batch, double Ctrl-C,
concurrent drivers and a poller against real sweeps of batched cells, each followed by a
run to the end (trials: ``bench/bench_faults.py``).

It writes what it saw to bench/results/faults.md (quoted by docs/faults.md)
and fails if any trial broke "exactly one FINISHED run per cell, nothing RUNNING, the
table's rows equal to the runs". About 15 minutes on this 2-core machine when idle;
``make test-faults KILLS=10`` (CI) draws 10 kill moments instead of 30, about 10 minutes.
"""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "bench" / "bench_faults.py"


def _faults(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.syspath_prepend(str(BENCH.parent))  # its harness (bench/harness.py)
    spec = importlib.util.spec_from_file_location("bench_faults", BENCH)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.slow
def test_every_fault_ends_with_exactly_one_finished_run_per_cell(
    tmp_path, ray_address, monkeypatch
):
    faults = _faults(monkeypatch)
    bench = faults.started("make test-faults (tests/test_faults_injection.py)")
    kills = int(os.environ.get("SWEEPER_FAULT_KILLS", "30"))  # make test-faults KILLS=10
    trials, clean_s = faults.run_trials(tmp_path, ray_address, kills=kills, seed=0)
    faults.write_results(trials, clean_s, bench, faults.RESULTS)
    assert len([t for t in trials if t.kind == "kill"]) == kills
    assert len([t for t in trials if t.kind == "worker-kill"]) == 5
    broken = [(t.kind, t.moment_s, t.violations) for t in trials if t.violations]
    assert not broken, broken
