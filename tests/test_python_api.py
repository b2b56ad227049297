"""The Python API (issue #38, item 1): ``sweeper.run`` takes the command line's path and
leaves the process as it found it; ``sweeper.load`` reads a live store and a published
folder alike."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import sweeper

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["seeds=2", "horizon=200", "algorithm=linucb"]

STATE = """
import json, logging, os, signal, sys
import pyarrow as pa

def state():
    loggers = {name: (log.level, [type(f).__name__ for f in log.filters],
                      [type(h).__name__ for h in log.handlers], log.propagate)
               for name, log in logging.Logger.manager.loggerDict.items()
               if isinstance(log, logging.Logger)}
    root = logging.getLogger()
    return {
        "environ": dict(os.environ),
        "pool": pa.default_memory_pool().backend_name,
        "loggers": loggers,
        "root": [root.level, [type(h).__name__ for h in root.handlers]],
        "signals": [str(signal.getsignal(s)) for s in (signal.SIGINT, signal.SIGTERM)],
        "disable": logging.root.manager.disable,
    }
"""


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=900)  # fmt: skip


def test_the_public_names_are_few_and_documented():
    assert sweeper.__all__ == ["Results", "SweepError", "SweepResult", "load", "run"]
    for name in sweeper.__all__:
        assert getattr(sweeper, name).__doc__, name
    with pytest.raises(AttributeError, match="no attribute 'run_sweep'"):
        sweeper.run_sweep  # noqa: B018  (internal names are not public)


@pytest.mark.e2e
def test_run_leaves_the_process_as_it_found_it(tmp_path):
    """Environment, Arrow's pool, loggers, signal handlers: equal after two sweeps (the
    second resumes) as before any; no Ray left running; the results are the command's."""
    code = STATE + textwrap.dedent(f"""
        import ray, sweeper
        # what a process of a notebook may have: the stores' log filters installed by an
        # earlier import, a logger of its own
        logging.getLogger("mine").setLevel(logging.INFO)
        import sweeper.store.tracking, sweeper.execute
        before = state()
        first = sweeper.run("smoke", {SMALL!r}, tracking_uri="sqlite:///{tmp_path}/m.db")
        second = sweeper.run("smoke", {SMALL!r}, tracking_uri="sqlite:///{tmp_path}/m.db")
        after = state()
        # loggers that a sweep created (ray's, mlflow's) may stay; those that were there
        # must be as they were, and no new logger keeps a filter of sweeper's
        changed = {{k: (before["loggers"][k], v) for k, v in after["loggers"].items()
                   if k in before["loggers"] and v != before["loggers"][k]}}
        filtered = [k for k, v in after["loggers"].items() if k not in before["loggers"] and v[1]]
        print(json.dumps({{
            "environ": before["environ"] == after["environ"],
            "added": sorted(set(after["environ"]) - set(before["environ"])),
            "pool": [before["pool"], after["pool"]],
            "changed": {{k: str(v) for k, v in changed.items()}},
            "filtered": filtered,
            "root": before["root"] == after["root"],
            "signals": before["signals"] == after["signals"],
            "disable": [before["disable"], after["disable"]],
            "ray": ray.is_initialized(),
            "codes": [first.exit_code, second.exit_code],
            "cells": [first.finished, second.skipped],
        }}))
    """)
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {
        "environ": True, "added": [], "pool": [found["pool"][0]] * 2, "changed": {},
        "filtered": [], "root": True, "signals": True, "disable": [0, 0], "ray": False,
        "codes": [0, 0], "cells": [6, 6],
    }  # fmt: skip


@pytest.mark.e2e
def test_run_reuses_a_ray_the_caller_started_and_leaves_it_running(tmp_path):
    code = textwrap.dedent(f"""
        import json, ray, sweeper
        ray.init(address="local", num_cpus=2, include_dashboard=False)
        node = ray.get_runtime_context().get_node_id()
        result = sweeper.run("smoke", {SMALL!r}, tracking_uri="sqlite:///{tmp_path}/m.db")
        table = result.table
        print(json.dumps({{"running": ray.is_initialized(),
                           "same": ray.get_runtime_context().get_node_id() == node,
                           "code": result.exit_code, "rows": len(table)}}))
        ray.shutdown()
    """)
    done = _python(code, tmp_path)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout.strip().splitlines()[-1])
    assert found == {"running": True, "same": True, "code": 0, "rows": 6}


def test_bad_input_raises_and_never_exits(tmp_path):
    with pytest.raises(sweeper.SweepError, match="unknown exp 'nope'"):
        sweeper.run("nope", tracking_uri=f"sqlite:///{tmp_path}/m.db")
    with pytest.raises(sweeper.SweepError, match="baseline=cdt is not a tuner of this sweep"):
        sweeper.run("smoke", ["baseline=cdt"], tracking_uri=f"sqlite:///{tmp_path}/m.db")
    assert not (tmp_path / "m.db").exists()


def test_load_reads_a_live_store_and_its_published_folder_alike(tmp_path, ray_local):
    store = f"sqlite:///{tmp_path}/m.db"
    result = sweeper.run("smoke", ["seeds=3", "horizon=300"], tracking_uri=store,
                         out=open(os.devnull, "w"))  # fmt: skip
    assert result.exit_code == 0 and result.finished == 18
    live = sweeper.load("smoke", tracking_uri=store)
    from sweeper.report import build_report

    build_report("smoke", tmp_path / "published", store)
    folder = sweeper.load(tmp_path / "published")
    pd.testing.assert_frame_equal(
        live.cells.sort_values("cell_key").reset_index(drop=True),
        folder.cells.sort_values("cell_key").reset_index(drop=True),
    )
    pd.testing.assert_frame_equal(live.compare(), folder.compare())
    assert list(live.cells.columns[:7]) == ["cell_key", "run_id", "status", "seed", "algorithm",
                                            "tuner", "dataset"]  # fmt: skip
    assert live.cells.columns[7] == "final_regret"  # the lead, then the other metrics
    curves = live.curves("regret")
    assert set(curves.columns) >= {"cell_key", "seed", "tuner", "step", "value"}
    assert curves.groupby("cell_key")["step"].max().eq(300).all()  # rounds 1..T
    assert curves["cell_key"].nunique() == 18
    best = live.best()
    assert list(best["algorithm"]) == ["linucb", "lints"]
    means = live.cells.groupby(["algorithm", "tuner"])["final_regret"].mean()
    for row in best.itertuples():
        assert row.mean == pytest.approx(means.loc[row.algorithm].min(), rel=1e-12)
        assert row.tuner == means.loc[row.algorithm].idxmin()


@pytest.mark.e2e
def test_main_rerun_equals_the_published_cells(tmp_path, ray_local):
    """Four cells of main, rerun now into a fresh store, equal docs/results/main's to the
    last digit under the same keys (the published folder and a live store, one reader)."""
    store = f"sqlite:///{tmp_path}/m.db"
    overrides = ["seeds=2", "algorithm=linucb", "dataset=simulation"]
    result = sweeper.run("main", overrides, tracking_uri=store, out=open(os.devnull, "w"))
    assert result.exit_code == 0 and result.finished == 8
    live = sweeper.load("main", tracking_uri=store).cells.set_index("cell_key")
    published = sweeper.load(ROOT / "docs" / "results" / "main").cells.set_index("cell_key")
    assert set(live.index) <= set(published.index)
    mine = published.loc[live.index]
    assert list(mine["tuner"]) == list(live["tuner"])
    for column in ("final_regret", "cumulative_reward", "warmup_rounds"):
        np.testing.assert_array_equal(live[column].to_numpy(), mine[column].to_numpy())
