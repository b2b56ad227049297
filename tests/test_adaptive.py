"""Seeds until decided (issue #29): a group whose comparison is settled stops at ``min``
seeds, one that stays open runs to ``max``; a later fixed-seed sweep reuses every cell; a
sweep killed midway resumes to the same decisions with one FINISHED run per cell."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest
from mlflow import MlflowClient

from sweeper.errors import SweepError
from sweeper.report import build_report
from sweeper.servers import finished_runs
from sweeper.sweep import run_sweep

ROOT = Path(__file__).resolve().parent.parent
BUDGET = "seeds={until:decided,min:5,max:15,step:5}"
GRID = [
    "task=toy", "horizon=10", "+task.compare=toy.shift", "baseline=0",
    "+sweep.grid=[{+toy.shift:[0,1],+toy.noise:[0.01,100]}]",
]  # fmt: skip
EXPECTED = {"noise=0.01": ("worse", 5), "noise=100": ("undecided", 15)}


def _overrides(tracking_uri: str, name: str, *extra: str) -> list[str]:
    return [*GRID, "launcher.name=local", f"tracking.uri={tracking_uri}",
            f"experiment.name={name}", *extra]  # fmt: skip


def _states(decisions: list[dict]) -> dict[str, tuple[str, int]]:
    return {d["group"]: (d["state"], d["seeds"]) for d in decisions}


def test_a_settled_group_stops_at_min_and_an_open_one_runs_to_max(composer, tracking_uri, tmp_path):
    overrides = _overrides(tracking_uri, "adaptive", BUDGET)
    out = io.StringIO()
    result = run_sweep(composer(overrides), composer, overrides, out=out)
    assert result.exit_code == 0, out.getvalue()
    assert _states(result.decisions) == EXPECTED
    assert result.finished == 2 * 5 + 2 * 15  # of the 60 cells at max seeds
    assert "1 worse, 1 undecided" in out.getvalue()
    client = MlflowClient(tracking_uri)
    path = client.download_artifacts(result.parent_run_id, "decisions.json")
    assert _states(json.loads(Path(path).read_text())) == EXPECTED

    report = build_report("adaptive", tmp_path / "report", tracking_uri)
    table = report.tables["decisions"].tidy.set_index("group")
    assert table.loc["noise=100", "state"] == "undecided" and table.loc["noise=100", "seeds"] == 15
    assert "1 worse, 1 undecided" in (tmp_path / "report" / "tables" / "decisions.md").read_text()
    figure = (tmp_path / "report" / "figures" / "decisions.png").read_bytes()
    assert figure[:8] == b"\x89PNG\r\n\x1a\n" and len(figure) > 1000
    rebuilt = build_report("adaptive", tmp_path / "rebuilt", source=tmp_path / "report")
    assert _states(rebuilt.tables["decisions"].tidy.to_dict("records")) == EXPECTED  # --from

    fixed = _overrides(tracking_uri, "adaptive", "seeds=15")  # the same cells, every seed
    again = run_sweep(composer(fixed), composer, fixed, out=io.StringIO())
    assert again.exit_code == 0 and again.skipped == 40 and again.finished == 20


def test_a_seed_budget_is_checked_before_anything_runs(composer, tracking_uri):
    bad = _overrides(tracking_uri, "bad", "seeds={until:decided,min:9,max:4}")
    with pytest.raises(SweepError, match="seeds.min=9 is above seeds.max=4"):
        run_sweep(composer(bad), composer, bad, out=io.StringIO())
    plain = ["task=toy", "launcher.name=local", BUDGET, f"tracking.uri={tracking_uri}"]
    with pytest.raises(SweepError, match="a seed budget needs an axis to compare along"):
        run_sweep(composer(plain), composer, plain, out=io.StringIO())
    unset = [o for o in _overrides(tracking_uri, "unset", BUDGET) if o != "baseline=0"]
    with pytest.raises(SweepError, match=r"baseline=<one of 0, 1>"):
        run_sweep(composer(unset), composer, unset, out=io.StringIO())


@pytest.mark.e2e
def test_killed_midway_it_resumes_to_the_same_decisions(tmp_path, composer):
    db = tmp_path / "mlflow.db"
    args = [sys.executable, "-m", "sweeper", *_overrides(f"sqlite:///{db}", "killed", BUDGET),
            "+toy.sleep_s=0.1", "tracking.batch_size=2"]  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("MLFLOW_TRACKING_URI", "RAY_ADDRESS")}
    first = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                             stderr=subprocess.DEVNULL, start_new_session=True)  # fmt: skip
    deadline = time.monotonic() + 120
    while finished_runs(f"sqlite:///{db}") < 14 and time.monotonic() < deadline:
        time.sleep(0.05)
    os.killpg(first.pid, signal.SIGKILL)
    first.wait()
    done = subprocess.run(args, cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    client = MlflowClient(f"sqlite:///{db}")
    experiment = client.get_experiment_by_name("killed").experiment_id
    runs = [r for r in client.search_runs([experiment], max_results=1000)
            if "cell_key" in r.data.tags]  # fmt: skip
    assert not [r for r in runs if r.info.status == "RUNNING"]
    finished = Counter(r.data.tags["cell_key"] for r in runs if r.info.status == "FINISHED")
    assert len(finished) == 40 and set(finished.values()) == {1}
    parent = client.search_runs([experiment], "tags.role = 'sweep'")[0]
    path = client.download_artifacts(parent.info.run_id, "decisions.json")
    assert _states(json.loads(Path(path).read_text())) == EXPECTED


# --- running ahead of the rule on CPUs that would idle (seeds.speculate) ---------------


def _stand_in_cells(groups: dict[str, float]) -> tuple[list, dict[str, float]]:
    """Cells of a two-option grid (``shift`` 0 = the reference, 1) per group, 15 seeds, and
    each cell's lead value: the option is worse by 1 plus normal noise of the group's sd."""
    from types import SimpleNamespace

    import numpy as np

    cells, value = [], {}
    rng = np.random.default_rng(7)
    for group, sd in groups.items():
        for seed in range(15):
            noise = rng.normal(0, sd)
            for shift in ("0", "1"):
                key = f"{group}/{shift}/{seed}"
                config = {"group": group, "shift": shift, "seed": seed}
                cells.append(SimpleNamespace(key=key, tags={"shift": shift}, config=config,
                                             setting=f"{group}/shift={shift}"))  # fmt: skip
                value[key] = 10.0 + float(shift) + (noise if shift == "1" else 0.0)
    return cells, value


def _rule(cells, speculate: bool):
    from sweeper.adaptive import AdaptiveSeeds
    from sweeper.seeds import SeedBudget
    from sweeper.task import Task

    budget = SeedBudget(min=5, max=15, step=5, speculate=speculate)
    task = Task("toy", compare="shift", lead="final", metrics={})
    return AdaptiveSeeds(cells, budget, task, finished={}, axis="shift", baseline="0")


def _drive(rule, value, capacity: int) -> list:
    """The launcher's loop with ``capacity`` CPUs and cells finishing first in, first out:
    take what the rule hands out, and when it is starved, what it speculates."""
    running, ran = [], []
    while True:
        running += rule.take(64)
        running += rule.speculate(capacity - len(running))
        if not running:
            return ran
        cell = running.pop(0)
        ran.append(cell.key)
        rule.observe(cell, value[cell.key])


def test_speculation_runs_ahead_only_where_a_comparison_is_open_and_changes_no_decision():
    cells, value = _stand_in_cells({"settled": 0.01, "open": 30.0})
    plain, ahead = _rule(cells, speculate=False), _rule(cells, speculate=True)
    _drive(plain, value, capacity=4)

    first = ahead.take(64)  # every cell of the first 5 seeds, and nothing to speculate yet
    assert len(first) == 20 and ahead.speculate(8) == []
    for cell in first[:-1]:  # all but one: the open group's step cannot end yet
        ahead.observe(cell, value[cell.key])
    early = ahead.speculate(100)
    assert {(c.config["group"], c.config["seed"]) for c in early} == {
        ("open", s) for s in range(5, 10)
    } and len(early) == 10  # the open comparison's next step, option and reference
    assert ahead.speculate(100) == []  # one step ahead, never two
    for cell in [first[-1], *early]:
        ahead.observe(cell, value[cell.key])
    _drive(ahead, value, capacity=4)

    assert ahead.table() == plain.table()  # the same decisions, seed by seed
    assert sorted(d["state"] for d in plain.table()) == ["undecided", "worse"]
    assert ahead.ahead_used() == (10, 10)  # the rule then asked for all of them


def test_speculation_off_or_a_decided_comparison_runs_nothing_ahead():
    cells, value = _stand_in_cells({"settled": 0.01})
    for speculate in (False, True):
        rule = _rule(cells, speculate)
        ran = _drive(rule, value, capacity=8)
        assert len(ran) == 10 and rule.ahead_used() == (0, 0)  # decided at min: 5 seeds x 2


def test_the_ray_launcher_fills_cpus_a_starved_source_leaves_idle(ray_local):
    from sweeper.cells import Cell
    from sweeper.launch import launch

    def toy(seed: int, sleep_s: float) -> Cell:
        return Cell({"cell": "sweeper.toy.toy_cell", "seed": seed, "horizon": 5,
                     "toy": {"sleep_s": sleep_s}})  # fmt: skip

    class Starved:  # one slow cell, then nothing but what it may run ahead
        def __init__(self):
            self.slow, self.asked = [toy(0, 3.0)], []

        def take(self, n):
            out, self.slow = self.slow, []
            return out

        def more(self):
            return bool(self.slow)

        def speculate(self, n):
            self.asked.append(n)
            return [toy(1, 0.0)] if len(self.asked) == 1 else []

    source = Starved()
    finished = [e.cell.config["seed"] for e in launch(source, {"name": "ray"})
                if e.kind == "finished"]  # fmt: skip
    assert source.asked[0] == 1  # 2 CPUs, the slow cell on one: one idle
    assert finished == [1, 0]  # the cell run ahead finished while the slow one ran


def test_on_ray_the_decisions_and_the_cells_asked_for_are_those_of_the_local_run(
    composer, tracking_uri, ray_local
):
    overrides = [*_overrides(tracking_uri, "ahead", BUDGET, "+toy.sleep_s=0.05")]
    overrides.remove("launcher.name=local")
    out = io.StringIO()
    result = run_sweep(composer(overrides), composer, overrides, out=out)
    assert result.exit_code == 0, out.getvalue()
    assert _states(result.decisions) == EXPECTED
    ahead, used = result.ahead
    assert used <= ahead and result.finished == 2 * 5 + 2 * 15 + (ahead - used)
