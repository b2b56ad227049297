"""Batches of seeds in the launcher (issue #40): a group's pending seeds go as one Ray task,
and each cell stays its own run: recorded once, failing alone, resumed alone.

The cells are ``sweeper.toy.batched_toy_cell`` (``toy_cell`` with a batched form that runs
the configs one after the other, so a seed that fails, hangs or dies does so inside its
batch; ``toy.batch_dir`` records which seeds each batch held), on the session's Ray.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from sweeper import signals
from sweeper.cells import Cell
from sweeper.grid import expand
from sweeper.launch import MAX_BATCH, Batcher, Fixed, batch_size, in_flight_cap, launch
from tests.test_orchestration import _assert_one_finished_run_per_cell, _cell_runs, _sweep

BATCHED = ["task=toy", "horizon=50", "cell=sweeper.toy.batched_toy_cell"]


def _overrides(tracking_uri: str, name: str, *extra: str) -> list[str]:
    return [*BATCHED, f"tracking.uri={tracking_uri}", f"experiment.name={name}", *extra]


def _batches(directory: Path) -> list[list[int]]:
    """The seeds of every batch the toy's batched form ran, by first seed."""
    return sorted(json.loads(p.read_text()) for p in directory.glob("batch-*.json"))


def test_the_batch_size_leaves_two_tasks_per_cpu_and_shrinks_at_the_end():
    assert batch_size(None, 1120, 2) == MAX_BATCH  # main on this machine: 20 seeds a task
    assert batch_size(None, 1120, 256) == 2  # 560 tasks for 256 CPUs
    assert batch_size(None, 1120, 1024) == 1  # more CPUs than pairs of cells: one a task
    assert [batch_size(None, n, 2) for n in (79, 40, 8, 7, 3)] == [19, 10, 2, 1, 1]
    assert batch_size(None, None, 2) == MAX_BATCH  # a source that does not know its size
    assert batch_size(1, 1120, 2) == 1 and batch_size(5, 3, 2) == 5  # launcher.batch decides
    assert in_flight_cap({"max_in_flight": None}, 256) == 512
    assert in_flight_cap({"max_in_flight": None}, 2) == 64
    assert in_flight_cap({"max_in_flight": 3}, 256) == 3


def _cells(function: str, groups: int, seeds: int) -> list[Cell]:
    return [
        Cell({"cell": function, "task": {"name": "toy"}, "horizon": 10 + g, "seed": s})
        for g in range(groups)
        for s in range(seeds)
    ]


def test_the_batcher_hands_out_one_groups_seeds_at_a_time():
    batcher = Batcher(Fixed(_cells("sweeper.toy.batched_toy_cell", groups=2, seeds=5)))
    assert batcher.pending() == 10
    first = batcher.take(4)
    assert [(c.config["horizon"], c.config["seed"]) for c in first] == [(10, s) for s in range(4)]
    assert [c.config["seed"] for c in batcher.take(4)] == [4]  # the group's last seed alone
    second = batcher.take(4)
    assert {c.config["horizon"] for c in second} == {11} and len(second) == 4
    batcher.again(first[1:3])  # a batch that crashed: its cells come back one at a time
    assert [batcher.take(4) for _ in range(2)] == [[first[1]], [first[2]]]
    assert batcher.starts(first) == first and batcher.starts(first) == []  # announced once
    assert [c.config["seed"] for c in batcher.take(4)] == [4]
    assert batcher.take(4) == [] and not batcher.more()
    # a cell function without a batched form: one cell per task
    plain = Batcher(Fixed(_cells("sweeper.toy.toy_cell", groups=1, seeds=3)))
    assert [len(plain.take(4)) for _ in range(4)] == [1, 1, 1, 0]


def test_a_groups_seeds_run_as_one_task_each_cell_its_own_run(
    composer, tracking_uri, ray_local, tmp_path
):
    record = tmp_path / "batches"
    record.mkdir()
    overrides = _overrides(tracking_uri, "b", "seeds=8", f"+toy.batch_dir={record}")
    result, _ = _sweep(composer, [*overrides, "launcher.batch=4"])
    assert result.ok and result.finished == 8
    assert _batches(record) == [[0, 1, 2, 3], [4, 5, 6, 7]]
    runs = _cell_runs(tracking_uri, "b")
    _assert_one_finished_run_per_cell(runs, 8)
    assert sorted(int(r.data.tags["seed"]) for r in runs) == list(range(8))

    # a resume with more seeds runs the new ones only, in batches that leave two tasks per
    # CPU (2 here) for the cells still to hand out: 16 // 4, then 12 // 4, 9 // 4, then
    # one cell per task for the last 7
    for path in record.iterdir():
        path.unlink()
    more = [o if o != "seeds=8" else "seeds=24" for o in overrides]
    result, _ = _sweep(composer, more)
    assert result.skipped == 8 and result.finished == 16
    assert _batches(record) == [[8, 9, 10, 11], [12, 13, 14], [15, 16]]
    _assert_one_finished_run_per_cell(_cell_runs(tracking_uri, "b"), 24)

    # launcher.batch=1: one cell per task, as without batches
    for path in record.iterdir():
        path.unlink()
    result, _ = _sweep(composer, [*more, "rerun=true", "launcher.batch=1"])
    assert result.finished == 24 and _batches(record) == []


def test_a_seed_that_fails_or_diverges_in_a_batch_fails_its_own_cell_only(
    composer, tracking_uri, ray_local
):
    overrides = _overrides(
        tracking_uri, "f", "seeds=6", "+toy.fail_seeds=[1]", "+toy.nan_seeds=[4]"
    )
    result, _ = _sweep(composer, [*overrides, "launcher.batch=6"])
    assert result.finished == 4
    failed = {f.label.rsplit("seed", 1)[1]: f.error for f in result.failed}
    assert set(failed) == {"1", "4"}
    assert "injected failure for seed 1" in failed["1"] and "diverged" in failed["4"]
    runs = _cell_runs(tracking_uri, "f")
    assert sorted(r.info.status for r in runs) == ["FAILED"] * 2 + ["FINISHED"] * 4


def test_a_batch_whose_worker_dies_runs_its_cells_again_one_at_a_time(
    composer, tracking_uri, ray_local, tmp_path
):
    markers = tmp_path / "markers"
    markers.mkdir()
    once = _overrides(tracking_uri, "c", "seeds=4", f"+toy.crash_once_dir={markers}")
    result, _ = _sweep(composer, [*once, "launcher.batch=4", "launcher.max_retries=1"])
    # the batch died in seed 0; alone, seed 0 (marked) finishes, 1-3 die once and finish
    assert result.ok and result.finished == 4
    assert sorted(p.name for p in markers.iterdir()) == [f"seed{s}.crashed" for s in range(4)]
    _assert_one_finished_run_per_cell(_cell_runs(tracking_uri, "c"), 4)

    always = _overrides(tracking_uri, "d", "seeds=4", "+toy.crash_seeds=[2]")
    result, _ = _sweep(composer, [*always, "launcher.batch=4", "launcher.max_retries=1"])
    assert result.finished == 3
    (failure,) = result.failed
    assert failure.label.endswith("seed2") and "2 attempt(s)" in failure.error


def test_a_batch_over_the_time_limit_runs_its_cells_alone(composer, tracking_uri, ray_local):
    overrides = _overrides(
        tracking_uri, "t", "seeds=4", "+toy.hang_seeds=[1]", "launcher.timeout_s=3"
    )
    result, _ = _sweep(composer, [*overrides, "launcher.batch=4"])
    assert result.finished == 3
    (failure,) = result.failed
    assert failure.label.endswith("seed1") and "TimeoutError" in failure.error
    _assert_one_finished_run_per_cell(_cell_runs(tracking_uri, "t"), 3)


@pytest.mark.parametrize("value", ["0", "two"])
def test_a_bad_batch_size_is_refused_before_anything_runs(composer, tracking_uri, value):
    with pytest.raises(Exception, match="seeds per Ray task are null or auto"):
        _sweep(composer, _overrides(tracking_uri, "bad", "seeds=2", f"launcher.batch={value}"))


@pytest.mark.parametrize("name", ["ray", "local"])
def test_a_stop_hands_out_no_more_cells(composer, ray_local, name):
    """After the first Ctrl-C or SIGTERM (``signals.STOP``) the launcher submits nothing
    more: under Slurm the head goes down with the driver, and a submission (its function's
    export to the cluster) would wait a minute on it, past the job's kill."""
    overrides = ["task=toy", "horizon=50", "seeds=8", f"launcher.name={name}",
                 "launcher.batch=1", "launcher.max_in_flight=1"]  # fmt: skip
    cfg = composer(overrides)
    finished = []
    try:
        for event in launch(expand(cfg, composer, overrides), cfg.launcher, None):
            if event.kind == "finished":
                finished.append(event.cell.key)
                signals.STOP.requested = True  # as the signal handler does
    finally:
        signals.reset()
    assert len(finished) == 1, finished


LEAVES = """
import ray
from sweeper import signals
from sweeper.cells import Cell
from sweeper.launch import launch

def stopped_sweep():
    cells = [Cell({"cell": "sweeper.toy.toy_cell", "task": {"name": "toy"}, "horizon": 50,
                   "seed": s}) for s in range(6)]
    launcher = {"name": "ray", "address": "local", "num_cpus": 1, "batch": 1, "max_in_flight": 1}
    for event in launch(cells, launcher):
        if event.kind == "finished":
            signals.STOP.requested = True  # as the signal handler does
    signals.reset()
    return ray.is_initialized()

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
print("caller's Ray after a stop:", stopped_sweep())
ray.shutdown()
print("joined Ray after a stop:", stopped_sweep())
"""


def test_after_a_stop_the_driver_leaves_the_ray_it_joined_and_keeps_the_callers():
    """A stop ends the launch's part in Ray: under Slurm the head is signalled with the
    driver, and a call into a Ray whose node has gone ends the driver with status 1 before
    it records its last cells (CI's Slurm trial, once). A Ray the caller started stays."""
    done = subprocess.run([sys.executable, "-c", LEAVES], capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    assert "caller's Ray after a stop: True" in done.stdout, done.stdout
    assert "joined Ray after a stop: False" in done.stdout, done.stdout


OUTLIVES = """
import gc, os, signal, time
import ray
from ray._private import ray_constants, worker
from sweeper.cells import Cell
from sweeper.launch import launch

ray.init(address="local", num_cpus=1, include_dashboard=False, log_to_driver=False)
cells = [Cell({"cell": "sweeper.toy.toy_cell", "task": {"name": "toy"}, "horizon": 40000,
               "seed": s}) for s in range(2)]
launcher = {"name": "ray", "address": "local", "num_cpus": 1, "batch": 1}
outcomes = [e.outcome for e in launch(cells, launcher) if e.kind == "finished"]
print("finished:", [o.status for o in outcomes], flush=True)
processes = worker._global_node.all_processes
for info in processes[ray_constants.PROCESS_TYPE_RAYLET]:  # the node goes, as under scancel
    os.kill(info.process.pid, signal.SIGKILL)
time.sleep(2)
print("final values:", [round(o.result["summary"]["final_value"], 6) for o in outcomes])
del outcomes
gc.collect()
print("the driver outlived its node", flush=True)
for infos in processes.values():  # the rest of this Ray: no shutdown, whose disconnect waits
    for info in infos:
        if info.process.poll() is None:
            os.kill(info.process.pid, signal.SIGKILL)
os._exit(0)
"""


def test_the_driver_holds_no_view_of_the_object_store_once_a_result_is_received():
    """A cell's result above Ray's inline limit arrives as arrays that view the node's
    object store; dropping such a view after the node has gone (a plain ``scancel``
    signals every Ray process of the job) ended the driver with status 1 and no word. The
    launcher hands out results in the driver's own memory, so the node may go at any time
    after they are received."""
    done = subprocess.run([sys.executable, "-c", OUTLIVES], capture_output=True, text=True,
                          timeout=180)  # fmt: skip
    assert "finished: ['FINISHED', 'FINISHED']" in done.stdout, done.stdout + done.stderr[-3000:]
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "the driver outlived its node" in done.stdout, done.stdout
