"""Sweep expansion and cell keys."""

from __future__ import annotations

import subprocess
import sys

import pytest

from sweeper.cells import cell_key
from sweeper.grid import expand


def test_smoke_expands_to_eighteen_distinct_cells(composer):
    cells = expand(composer(["+exp=smoke"]), composer, ["+exp=smoke"])
    assert len(cells) == 18
    assert len({c.key for c in cells}) == 18
    combos = {(c.tags["algorithm"], c.tags["tuner"], c.tags["seed"]) for c in cells}
    assert ("lints", "tl", "2") in combos and ("linucb", "theory", "0") in combos


def test_a_command_line_group_choice_pins_that_axis(composer):
    overrides = ["+exp=smoke", "algorithm=lints", "seeds=2"]
    cells = expand(composer(overrides), composer, overrides)
    assert {c.tags["algorithm"] for c in cells} == {"lints"}
    assert len(cells) == 3 * 2


def test_unknown_option_in_a_grid_names_the_valid_ones(composer):
    overrides = ["+exp=smoke", "sweep.grid.tuner=[theory,nope]"]
    with pytest.raises(ValueError, match="unknown tuner 'nope'; valid tuner names are: .*theory"):
        expand(composer(overrides), composer, overrides)


def test_cell_key_ignores_order_tracking_and_launcher(composer):
    base = expand(composer(["+exp=smoke"]), composer, ["+exp=smoke"])
    elsewhere = ["+exp=smoke", "tracking.uri=sqlite:////elsewhere.db", "launcher.name=local"]
    moved = expand(composer(elsewhere), composer, elsewhere)
    assert [c.key for c in base] == [c.key for c in moved]
    reordered = dict(reversed(list(base[0].config.items())))
    assert cell_key(reordered) == base[0].key


@pytest.mark.parametrize(
    "override",
    [
        "horizon=2001",
        "dataset.n_arms=60",
        "dataset.noise_sd=0.4",
        "algorithm.confidence=0.05",
        "tuner=fixed",
        "seed=9",
    ],
)
def test_cell_key_changes_with_any_experiment_parameter(composer, override):
    (base,) = expand(composer([]), composer, [])
    (changed,) = expand(composer([override]), composer, [override])
    assert base.key != changed.key


def test_cell_key_is_stable_across_processes(composer):
    (cell,) = expand(composer([]), composer, [])
    code = (
        "import json,sys; from sweeper.cells import cell_key; "
        "print(cell_key(json.loads(sys.stdin.read())))"
    )
    import json

    other = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(cell.config),
        capture_output=True,
        text=True,
        check=True,
    )
    assert other.stdout.strip() == cell.key


def test_space_overrides_reach_every_tuned_hyperparameter(composer):
    from sweeper_tasks.bandit_tuning.cell import build_parts

    overrides = ["space.candidates=[0.5,1.5]", "space.interval=[0.2,3]"]
    (cell,) = expand(composer(overrides), composer, overrides)
    algorithm, _, _ = build_parts(cell.config)
    (h,) = algorithm.space
    assert h.candidates == (0.5, 1.5) and h.interval == (0.2, 3.0)


def test_bad_input_fails_before_any_cell_runs(composer, tracking_uri):
    import io

    from sweeper.sweep import run_sweep

    overrides = ["+exp=smoke", "space.interval=[5,0.1]", f"tracking.uri={tracking_uri}"]
    with pytest.raises(ValueError, match=r"interval \[5.0, 0.1\] is empty or inverted"):
        run_sweep(composer(overrides), composer, overrides, out=io.StringIO())


def _reference_expand(cfg, compose, overrides):
    """The obvious expansion: one Hydra composition per group combination and OmegaConf
    for every cell (what expand() does faster)."""
    import itertools

    from omegaconf import OmegaConf

    from sweeper.grid import _blocks, cell_config, is_group

    grid = OmegaConf.to_container(cfg.sweep.grid, resolve=True)
    seeds = range(int(cfg.seeds)) if cfg.get("seeds") is not None else [int(cfg.seed)]
    configs = {}
    for block in _blocks(grid):
        groups = [k for k in block if is_group(k)]
        values_axes = [k for k in block if k not in groups]
        for choice in itertools.product(*(block[g] for g in groups)):
            base = compose([*overrides, *(f"{g}={v}" for g, v in zip(groups, choice, strict=True))])
            for values in itertools.product(*(block[k] for k in values_axes)):
                for seed in seeds:
                    node = OmegaConf.create(OmegaConf.to_container(base, resolve=False))
                    for key, value in zip(values_axes, values, strict=True):
                        OmegaConf.update(node, key, value, force_add=True)
                    node.seed = seed
                    config = cell_config(node)
                    configs[cell_key(config)] = config
    return configs


@pytest.mark.parametrize(
    "overrides",
    [
        ["+exp=smoke"],
        ["+exp=syndicated", "seeds=1"],
        # an interpolation inside a cell's config takes the OmegaConf path
        ["+exp=smoke", "seeds=2", "+dataset.note=${horizon}", "+sweep.grid.horizon=[100,200]"],
    ],
)
def test_expand_equals_the_obvious_expansion(composer, overrides):
    cells = expand(composer(overrides), composer, overrides)
    reference = _reference_expand(composer(overrides), composer, overrides)
    assert {c.key: c.config for c in cells} == reference


def test_an_interpolation_follows_the_value_axis(composer):
    overrides = [
        "+exp=smoke",
        "seeds=1",
        "+dataset.note=${horizon}",
        "+sweep.grid.horizon=[100,200]",
    ]
    cells = expand(composer(overrides), composer, overrides)
    assert {(c.config["horizon"], c.config["dataset"]["note"]) for c in cells} == {
        (100, 100),
        (200, 200),
    }


def test_a_pinned_value_keeps_only_the_blocks_that_list_it(composer):
    overrides = ["+exp=main", "seeds=1", "algorithm=gloc"]
    cells = expand(composer(overrides), composer, overrides)
    assert {c.tags["tuner"] for c in cells} == {"theory", "op", "syndicated", "cdt"}
    assert len(cells) == 4 * 2


def test_a_grid_builds_its_cells_when_read_and_holds_only_their_keys(composer):
    """The driver of a large sweep keeps keys, not configs (issue #15): 20,000 toy cells
    take a few hundred bytes each, and reading a cell twice builds equal, separate configs."""
    import tracemalloc

    overrides = ["task=toy", "seeds=20000"]
    cfg = composer(overrides)
    tracemalloc.start()
    try:
        grid = expand(cfg, composer, overrides)
        held = tracemalloc.get_traced_memory()[0] / len(grid)
    finally:
        tracemalloc.stop()
    assert held < 400, f"{held:.0f} bytes per cell"
    first, again = grid[123], grid[123]
    assert first.config == again.config and first.config is not again.config
    assert first.config["seed"] == 123 and first.key == grid.keys[123]
    assert grid[-1].config["seed"] == 19_999
    odd = grid.where(lambda key: int(key, 16) % 2 == 1)
    assert [c.key for c in odd[:5]] == [k for k in grid.keys if int(k, 16) % 2 == 1][:5]
    assert [c.config["seed"] for c in odd[:3]] == sorted(c.config["seed"] for c in odd[:3])
