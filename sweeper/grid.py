"""Expand a composed experiment into cells (docs/architecture.md, step 2).

An experiment declares ``sweep.grid``: a mapping from a config key to the list of values
it takes, or a list of such mappings (blocks; the union of their products, for grids that
are not a full product, such as TL for one hyperparameter and Syndicated for two)::

    sweep:
      grid:
        - algorithm: [linucb, lints]          # a group key: option names (conf/algorithm/)
          tuner: [tl, cdt]
          space.candidates: [[0.1, 1], [0.1, 0.5, 1]]   # a value key: each value is set
        - algorithm: [gloc]
          algorithm.tuned: [[exploration_rate]]        # a list value: wrap it in a list
          tuner: [syndicated]
    seeds: 20                                  # adds seed = 0..19 to every block

A key that names a config group (``algorithm``, ``tuner``, ``dataset``) takes option names
and is composed by Hydra; any other key (``tuner.value``, ``dataset.n_arms``, ``horizon``)
is set on the composed config (a mapping value merges into a mapping). An axis the user
sets on the command line (``algorithm=gloc``) keeps only the blocks whose axis lists that
value and shrinks it to that value; when no block lists it, every block takes it. Cells
with the same config (hence the same key) are kept once.
"""

from __future__ import annotations

import copy
import itertools
import pickle
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweeper.cells import ORCHESTRATION_KEYS, TASK_KEY, Cell, cell_key, varying_keys
from sweeper.errors import SweepError, whole_number
from sweeper.paths import CONF_DIR
from sweeper.task import Task, parse_task

Composer = Callable[[list[str]], DictConfig]


def group_options(group: str, conf_dir: Path = CONF_DIR) -> list[str]:
    """The option names of a config group (the YAML files in conf/GROUP/)."""
    return sorted(p.stem for p in (conf_dir / group).glob("*.yaml"))


def is_group(key: str, conf_dir: Path = CONF_DIR) -> bool:
    return "." not in key and (conf_dir / key).is_dir()


def check_option(group: str, value: str, conf_dir: Path = CONF_DIR) -> None:
    options = group_options(group, conf_dir)
    if str(value) not in options:
        raise ValueError(
            f"unknown {group} '{value}'; valid {group} names are: {', '.join(options)}"
        )


def _blocks(grid: Any) -> list[dict[str, list[Any]]]:
    if grid is None:
        return [{}]
    blocks = grid if isinstance(grid, Sequence) and not isinstance(grid, str) else [grid]
    out = []
    for block in blocks:
        if not isinstance(block, Mapping):
            raise ValueError(f"sweep.grid must map keys to lists of values, got {block!r}")
        axes = {}
        for key, values in block.items():
            values = (
                list(values)
                if isinstance(values, Sequence) and not isinstance(values, str)
                else [values]
            )
            if not values:
                raise ValueError(f"sweep axis '{key}' has no values; give at least one")
            axes[str(key)] = values
        out.append(axes)
    return out


def expand(
    cfg: DictConfig,
    compose: Composer,
    cli_overrides: Sequence[str] = (),
    conf_dir: Path = CONF_DIR,
) -> list[Cell]:
    """All cells of the experiment ``cfg``, without duplicates, in a stable order.

    ``compose(overrides)`` composes the root config with the command line's overrides
    plus the cell's group choices; ``cli_overrides`` are the command line's overrides.

    Hydra composes each option of each group once (a block of 5 algorithms x 4 tuners x 2
    datasets takes 11 compositions, not 40): a group's node depends on its own option, the
    experiment and the command line only, so the nodes are put together per combination.
    Value axes and seeds are set on plain dicts when the cell's config has no
    interpolation; otherwise OmegaConf resolves each cell (slower, same result).
    """
    pinned = _pinned(cli_overrides)
    _refuse_option_lists(pinned, conf_dir)
    seeds = cfg.get("seeds")
    if seeds is not None:
        seeds = whole_number(seeds, "seeds", 1, "seeds=N runs seeds 0..N-1")
    seed_axis = list(range(seeds)) if seeds is not None else [whole_number(cfg.seed, "seed", 0)]
    grid = OmegaConf.select(cfg, "sweep.grid")
    sweep_grid = OmegaConf.to_container(grid, resolve=True) if grid is not None else None
    blocks = _pin(_blocks(sweep_grid), _pinned_values(pinned, cfg, conf_dir), conf_dir)

    task = task_of(cfg)
    composed: dict[tuple[str, ...], DictConfig] = {}

    def _compose(choice: Mapping[str, Any], groups: Sequence[str]) -> DictConfig:
        overrides = [o for o in cli_overrides if _key(o) not in groups] + [
            f"{g}={v}" for g, v in choice.items()
        ]
        signature = tuple(overrides)
        if signature not in composed:
            composed[signature] = compose(overrides)
        return composed[signature]

    configs: dict[str, dict[str, Any]] = {}
    value_keys: list[str] = []
    for block in blocks:
        groups = [k for k in block if is_group(k, conf_dir)]
        for group in groups:
            for value in block[group]:
                check_option(group, value, conf_dir)
        values_axes = [k for k in block if k not in groups and k != "seed"]
        seeds_here = (
            [whole_number(s, "seed", 0) for s in block["seed"]] if "seed" in block else seed_axis
        )
        value_keys += values_axes
        first = {g: block[g][0] for g in groups}
        base = _with_identity(OmegaConf.to_container(_compose(first, groups), resolve=False), task)
        nodes = {
            (g, v): OmegaConf.to_container(_compose({**first, g: v}, groups)[g], resolve=False)
            for g in groups
            for v in block[g]
        }
        for group_values in itertools.product(*(block[g] for g in groups)):
            config = copy.deepcopy(base)
            for g, v in zip(groups, group_values, strict=True):
                config[g] = copy.deepcopy(nodes[(g, v)])
            plain = not _has_interpolation(
                {k: v for k, v in config.items() if k not in ORCHESTRATION_KEYS}
            )
            for values in itertools.product(*(block[k] for k in values_axes)):
                for seed in seeds_here:
                    settings = [*zip(values_axes, values, strict=True), ("seed", seed)]
                    cell = _cell(config, settings, plain)
                    configs.setdefault(cell_key(cell), cell)
    varying = tuple(varying_keys(list(configs.values()), value_keys))
    cells = []
    for key, config in configs.items():
        cell = Cell(config, task.groups, varying)
        cell.__dict__["key"] = key  # Cell.key is a cached_property: hashed once, here
        cells.append(cell)
    return cells


def task_of(cfg: DictConfig) -> Task:
    """The family's vocabulary from the composed config's ``task`` block."""
    block = cfg.get(TASK_KEY)
    return parse_task(OmegaConf.to_container(block, resolve=True) if block is not None else None)


def _with_identity(config: dict[str, Any], task: Task) -> dict[str, Any]:
    """The config with its ``task`` block cut to the family's identity (what a key hashes)."""
    if TASK_KEY in config:
        config[TASK_KEY] = task.identity
    return config


def _cell(config: dict[str, Any], settings: Sequence[tuple[str, Any]], plain: bool):
    """The resolved cell config with ``settings`` (dotted key, value) applied."""
    if plain:  # a pickle round trip: a deep copy of plain data, several times faster
        base = {k: v for k, v in config.items() if k not in ORCHESTRATION_KEYS}
        cell = pickle.loads(pickle.dumps(base, pickle.HIGHEST_PROTOCOL))
        for key, value in settings:
            _set_path(cell, key, copy.deepcopy(value))
        return cell
    node = OmegaConf.create(config)
    for key, value in settings:
        OmegaConf.update(node, key, value, force_add=True)
    return cell_config(node)


def _set_path(config: dict[str, Any], key: str, value: Any) -> None:
    """``config[a][b] = value`` for ``key = 'a.b'``; a mapping merges into a mapping, as
    ``OmegaConf.update`` does."""
    *parents, last = key.split(".")
    node = config
    for name in parents:
        if not isinstance(node.get(name), dict):
            node[name] = {}
        node = node[name]
    if isinstance(value, dict) and isinstance(node.get(last), dict):
        for k, v in value.items():
            _set_path(node[last], k, v)
    else:
        node[last] = value


def _has_interpolation(value: Any) -> bool:
    if isinstance(value, str):
        return "${" in value
    if isinstance(value, dict):
        return any(_has_interpolation(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_interpolation(v) for v in value)
    return False


def pin_blocks(
    grid: Any, values: Mapping[str, Any], conf_dir: Path = CONF_DIR
) -> list[dict[str, list[Any]]]:
    """The blocks of ``grid`` (a ``sweep.grid``) as one job of a Hydra multirun sets them.

    ``values`` maps each key the multirun varies to this job's value (an option name for a
    group, the typed value otherwise). An axis some block has is pinned as on the command
    line (:func:`_pin`); a key no block has becomes a one-value axis of every block, so the
    union of all jobs' blocks is the multirun's grid (``-m +exp=main horizon=2000,4000``:
    main's blocks twice, once per horizon). A ``seed`` axis replaces the seed of ``seeds``.
    """
    blocks = _pin(_blocks(grid), values, conf_dir)
    for block in blocks:
        for key, value in values.items():
            block.setdefault(key, [value])
    return blocks


def _pinned_values(pinned: Mapping[str, str], cfg: DictConfig, conf_dir: Path) -> dict[str, Any]:
    """The command line's pinned values: option names for groups, typed values otherwise."""
    return {k: v if is_group(k, conf_dir) else OmegaConf.select(cfg, k) for k, v in pinned.items()}


def _pin(
    blocks: list[dict[str, list[Any]]], values: Mapping[str, Any], conf_dir: Path
) -> list[dict[str, list[Any]]]:
    """Shrink the axes fixed on the command line to that one value.

    ``algorithm=linucb`` keeps the blocks whose algorithm axis lists linucb (and blocks
    without that axis); when no block lists the value, every block takes it instead (e.g.
    the smoke experiment run with another algorithm).
    """
    for key, value in values.items():
        with_axis = [b for b in blocks if key in b]
        if not with_axis:
            continue
        group = is_group(key, conf_dir)
        holding = [b for b in with_axis if any(_same(v, value, group) for v in b[key])]
        keep = {id(b) for b in holding} if holding else {id(b) for b in with_axis}
        blocks = [b for b in blocks if key not in b or id(b) in keep]
        for block in blocks:
            if key in block:
                block[key] = [value]
    return blocks


def _same(a: Any, b: Any, group: bool) -> bool:
    return str(a) == str(b) if group else a == b


def cell_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config of one cell: everything but the orchestration keys, with the
    ``task`` block cut to the family's identity."""
    container = OmegaConf.to_container(cfg, resolve=True)
    config = {k: v for k, v in container.items() if k not in ORCHESTRATION_KEYS}
    if isinstance(config.get(TASK_KEY), dict):
        config[TASK_KEY] = parse_task(config[TASK_KEY]).identity
    return config


def _refuse_option_lists(pinned: Mapping[str, str], conf_dir: Path) -> None:
    """``algorithm=[linucb,lints]`` makes Hydra merge both options into one config: refuse."""
    for key, value in pinned.items():
        if is_group(key, conf_dir) and value.strip().startswith("["):
            options = value.strip()[1:-1]
            raise SweepError(
                f"{key}={value} selects several {key} options at once, which Hydra merges into "
                f"one config. To run each of them, sweep the axis: python -m sweeper -m "
                f"{key}={options}, or list them in an experiment's sweep.grid ({key}: {value})"
            )


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _pinned(overrides: Iterable[str]) -> dict[str, str]:
    """Keys fixed on the command line: ``algorithm=linucb`` -> {'algorithm': 'linucb'}."""
    return {_key(o): o.split("=", 1)[1] for o in overrides if "=" in o and _key(o) != "exp"}
