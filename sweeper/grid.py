"""Expand a composed experiment into cells (DESIGN.md, Data flow step 2).

An experiment declares ``sweep.grid``: a mapping from a config key to the list of values
it takes, or a list of such mappings (the union of their products, for grids that are
not a full product, such as TL for one hyperparameter and Syndicated for two). A key
that names a config group (``algorithm``, ``tuner``, ``dataset``) takes option names
and is composed by Hydra; any other key (``tuner.warmup``, ``horizon``) is set on the
composed config. ``seeds: N`` adds the axis seed = 0..N-1. An axis the user overrides
on the command line (``algorithm=linucb``) shrinks to that one value.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf

from sweeper.cells import ORCHESTRATION_KEYS, Cell

CONF_DIR = Path(__file__).resolve().parent.parent / "conf"
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
    """
    pinned = _pinned(cli_overrides)
    seeds = cfg.get("seeds")
    if seeds is not None and int(seeds) <= 0:
        raise ValueError(f"seeds must be a positive count, got {seeds}")
    seed_axis = list(range(int(seeds))) if seeds is not None else [int(cfg.seed)]
    grid = OmegaConf.select(cfg, "sweep.grid")
    sweep_grid = OmegaConf.to_container(grid, resolve=True) if grid is not None else None

    composed: dict[tuple[str, ...], DictConfig] = {}
    cells: dict[str, Cell] = {}
    for block in _blocks(sweep_grid):
        for key in block:
            if key in pinned:
                block[key] = [
                    pinned[key] if is_group(key, conf_dir) else OmegaConf.select(cfg, key)
                ]
        groups = [k for k in block if is_group(k, conf_dir)]
        for group in groups:
            for value in block[group]:
                check_option(group, value, conf_dir)
        values_axes = [k for k in block if k not in groups]
        for group_values in itertools.product(*(block[g] for g in groups)):
            overrides = [o for o in cli_overrides if _key(o) not in groups] + [
                f"{g}={v}" for g, v in zip(groups, group_values, strict=True)
            ]
            signature = tuple(overrides)
            if signature not in composed:
                composed[signature] = compose(overrides)
            base = composed[signature]
            for values in itertools.product(*(block[k] for k in values_axes)):
                for seed in seed_axis:
                    config = OmegaConf.create(OmegaConf.to_container(base, resolve=False))
                    for key, value in zip(values_axes, values, strict=True):
                        OmegaConf.update(config, key, value, force_add=True)
                    config.seed = seed
                    cell = Cell(cell_config(config))
                    cells.setdefault(cell.key, cell)
    return list(cells.values())


def cell_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config of one cell: everything but the orchestration keys."""
    container = OmegaConf.to_container(cfg, resolve=True)
    return {k: v for k, v in container.items() if k not in ORCHESTRATION_KEYS}


def _key(override: str) -> str:
    return override.split("=", 1)[0].lstrip("+~")


def _pinned(overrides: Iterable[str]) -> dict[str, str]:
    """Keys fixed on the command line: ``algorithm=linucb`` -> {'algorithm': 'linucb'}."""
    return {_key(o): o.split("=", 1)[1] for o in overrides if "=" in o and _key(o) != "exp"}
