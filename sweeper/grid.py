"""Expand a composed experiment into cells (docs/architecture.md, step 2).

An experiment's ``sweep.grid`` is a mapping from a config key to its values, or a list of
such blocks whose products are united; a group key takes option names and is composed by
Hydra, any other key is set on the composed config; ``seeds: N`` adds seeds 0..N-1. The
syntax, with an example: docs/configuration.md, "Experiments".

``expand`` returns a :class:`Grid`: the composed blocks and each cell's key, a cell's config
being built again whenever the cell is read, so the driver's memory holds keys, not configs
(flat in the number of cells).
"""

from __future__ import annotations

import bisect
import copy
import itertools
import math
import pickle
from array import array
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, overload

from omegaconf import DictConfig, OmegaConf

from sweeper.cells import (
    ORCHESTRATION_KEYS,
    TASK_KEY,
    AxisKey,
    Cell,
    Variation,
    canonical_json,
    cell_key,
    option_name,
    select,
)
from sweeper.configs import ConfigSearch
from sweeper.errors import SweepError, whole_number
from sweeper.overrides import did_you_mean
from sweeper.seeds import seed_count
from sweeper.task import Task, parse_task

Composer = Callable[[list[str]], DictConfig]


def group_options(group: str, configs: ConfigSearch | None = None) -> list[str]:
    """The option names of a config group on Hydra's search path (``GROUP/*.yaml``)."""
    return (configs or ConfigSearch.current()).options(group)


def is_group(key: str, configs: ConfigSearch | None = None) -> bool:
    return (configs or ConfigSearch.current()).is_group(key)


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


def written_size(cfg: DictConfig) -> int:
    """The cells of the experiment ``cfg`` as its ``sweep.grid`` is written: over its blocks,
    the product of their axes' lengths, times the seeds (a seed budget's ``max``); no option
    is composed, so a duplicate cell counts twice (:func:`expand` gives the exact count)."""
    grid = OmegaConf.select(cfg, "sweep.grid")
    blocks = _blocks(OmegaConf.to_container(grid, resolve=True) if grid is not None else None)
    seeds = seed_count(cfg) or 1
    return sum(
        math.prod(len(v) for k, v in block.items() if k != "seed")
        * (len(block["seed"]) if "seed" in block else seeds)
        for block in blocks
    )


def expand(
    cfg: DictConfig,
    compose: Composer,
    cli_overrides: Sequence[str] = (),
    configs: ConfigSearch | None = None,
) -> Grid:
    """All cells of the experiment ``cfg``, without duplicates, in a stable order.

    ``compose(overrides)`` composes the root config with the command line's overrides
    plus the cell's group choices; ``cli_overrides`` are the command line's overrides.
    Each cell's config is built once here, to hash its key, and again when it is read
    from the returned :class:`Grid`. Group names and options are those of Hydra's config
    search path (``configs``, by default the running app's: ``--config-dir`` included).
    """
    configs = configs or ConfigSearch.current()
    blocks, value_keys = _compose_blocks(cfg, compose, cli_overrides, configs)
    positions: dict[str, int] = {}  # cell key -> its first position in the blocks' products
    names = OmegaConf.select(cfg, "report.axes")  # the axes' short names for the run tags
    variation = Variation(value_keys, OmegaConf.to_container(names) if names else None)
    position = 0
    for block in blocks:
        for index in range(block.size):
            config = block.config(index)
            key = cell_key(config)
            if key not in positions:
                positions[key] = position
                variation.add(config)
            position += 1
    return Grid(
        blocks,
        array("q", positions.values()),
        list(positions),
        task_of(cfg).groups,
        variation.varying,
    )


def _compose_blocks(
    cfg: DictConfig, compose: Composer, cli_overrides: Sequence[str], configs: ConfigSearch
) -> tuple[list[_Block], list[str]]:
    """The blocks of ``sweep.grid`` (pinned by the command line), composed; and the value
    axes they sweep.

    Hydra composes each option of each group once (a block of 5 algorithms x 4 tuners x 2
    datasets takes 11 compositions, not 40): a group's node depends on its own option, the
    experiment and the command line only, so the nodes are put together per combination.
    """
    pinned = _pinned(cli_overrides)
    _refuse_option_lists(pinned, configs)
    seeds = seed_count(cfg)  # seeds: N, or a seed budget's max (sweeper/seeds.py)
    seed_axis = list(range(seeds)) if seeds is not None else [whole_number(cfg.seed, "seed", 0)]
    grid = OmegaConf.select(cfg, "sweep.grid")
    sweep_grid = OmegaConf.to_container(grid, resolve=True) if grid is not None else None
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

    blocks, value_keys = [], []
    for block in _pin(_blocks(sweep_grid), _pinned_values(pinned, cfg, configs), configs):
        groups = [k for k in block if configs.is_group(k)]
        for group in groups:
            for value in block[group]:
                configs.check_option(group, value)
        values_axes = [k for k in block if k not in groups and k != "seed"]
        seeds_here = (
            [whole_number(s, "seed", 0) for s in block["seed"]] if "seed" in block else seed_axis
        )
        value_keys += [bare(k) for k in values_axes]
        first = {g: block[g][0] for g in groups}
        base = _with_identity(OmegaConf.to_container(_compose(first, groups), resolve=False), task)
        nodes = {
            (g, v): _unlabelled(
                OmegaConf.to_container(_compose({**first, g: v}, groups)[g], resolve=False)
            )
            for g in groups
            for v in block[g]
        }
        combinations = []
        for group_values in itertools.product(*(block[g] for g in groups)):
            config = copy.deepcopy(base)
            for g, v in zip(groups, group_values, strict=True):
                config[g] = copy.deepcopy(nodes[(g, v)])
            resolved = not _has_interpolation(
                {k: v for k, v in config.items() if k not in ORCHESTRATION_KEYS}
            )
            combinations.append((config, resolved))
        _check_keys(values_axes, [config for config, _ in combinations], configs)
        axes = (*(bare(k) for k in values_axes), "seed")
        values = (*(tuple(block[k]) for k in values_axes), tuple(seeds_here))
        blocks.append(_Block(tuple(combinations), axes, values))
    return blocks, value_keys


def bare(key: str) -> str:
    """A ``sweep.grid`` key without its ``+``: ``+toy.shift`` adds a key the composed config
    does not have, as the same override does on the command line."""
    return key.lstrip("+")


def _check_keys(keys: Sequence[str], configs: Sequence[dict[str, Any]], search: ConfigSearch):
    """Refuse a grid key that is neither a config group nor a setting of the block's composed
    configs (a misspelling such as ``tunr: [tl, op]`` would run the default tuner under new
    cell keys), unless it is written ``+KEY``: the command line's rule (Hydra refuses
    ``tunr=tl`` and adds ``+tunr=tl``)."""
    for key in keys:
        if key.startswith("+") or any(_holds(config, key) for config in configs):
            continue
        parent, _, name = key.rpartition(".")
        node = _node(configs[0], parent) if parent else configs[0]
        known = [str(k) for k in node] if isinstance(node, Mapping) else []
        known = sorted({*known, *([] if parent else search.groups())} - ORCHESTRATION_KEYS)
        where = f"in '{parent}'" if parent else "at the top of the config"
        raise SweepError(
            f"sweep.grid key '{key}' is neither a config group nor a setting of the composed "
            f"config{did_you_mean(name, known)} There is no '{name}' {where} (it has: "
            f"{', '.join(known)}). To add a key the config does not have, write it '+{key}' "
            "in the grid, as on the command line"
        )


def _node(config: Any, key: str) -> Any:
    for name in key.split("."):
        if not isinstance(config, Mapping) or name not in config:
            return None
        config = config[name]
    return config


def _holds(config: Mapping[str, Any], key: str) -> bool:
    parent, _, name = key.rpartition(".")
    node = _node(config, parent) if parent else config
    return isinstance(node, Mapping) and name in node


@dataclass(frozen=True)
class _Block:
    """One block of ``sweep.grid``, composed: a config per combination of its group options
    (``plain`` when no interpolation is left in it) and its value axes, the seed last.

    Its cells are the product of the combinations and the axes' values, the last axis
    varying fastest; cell ``index`` is that position in the product.
    """

    configs: tuple[tuple[dict[str, Any], bool], ...]
    axes: tuple[str, ...]
    values: tuple[tuple[Any, ...], ...]

    @property
    def size(self) -> int:
        return len(self.configs) * math.prod(len(v) for v in self.values)

    def texts(self, axis: str, groups: Sequence[str], varying: Sequence[str]) -> list[str]:
        """The tag values of ``axis`` (a group, or a varying setting by its tag) in this
        block, one per combination or value, unresolved interpolations as written."""
        if axis in groups:
            return [option_name(config.get(axis)) for config, _ in self.configs]
        key = next((k for k in varying if isinstance(k, AxisKey) and k.tag == axis), None)
        if key is None:
            return []
        if key in self.axes:
            return [key.text(value) for value in self.values[self.axes.index(key)]]
        return [key.text(select(config, key)) for config, _ in self.configs]

    def config(self, index: int) -> dict[str, Any]:
        """The resolved config of the block's cell ``index`` (0 <= index < size)."""
        settings = []
        for axis, values in zip(reversed(self.axes), reversed(self.values), strict=True):
            index, chosen = divmod(index, len(values))
            settings.append((axis, values[chosen]))
        config, plain = self.configs[index]
        return _cell(config, settings[::-1], plain)


class Grid(Sequence[Cell]):
    """The cells of an experiment, each built when it is read.

    A grid holds its composed blocks and, per distinct cell, only its key and its position
    in the blocks' products; ``grid[i]`` builds cell ``i`` (a copy of its block's config with
    its values set). The driver of a 100,000-cell sweep thus holds 100,000 keys, not
    100,000 configs, and the cells in flight. ``keys`` lists the keys without building any
    cell: use it where only keys are needed.

    Value axes and seeds are set on plain dicts when the block's config has no
    interpolation; otherwise OmegaConf resolves each cell (slower, same result).
    """

    def __init__(
        self,
        blocks: Sequence[_Block],
        positions: array,
        keys: list[str],
        groups: tuple[str, ...],
        varying: tuple[str, ...],
    ) -> None:
        self._blocks = tuple(blocks)
        self._starts = list(itertools.accumulate((b.size for b in blocks), initial=0))
        self._positions = positions
        self.keys = keys
        self.groups, self.varying = groups, varying

    def __len__(self) -> int:
        return len(self.keys)

    @overload
    def __getitem__(self, i: int) -> Cell: ...

    @overload
    def __getitem__(self, i: slice) -> Grid: ...

    def __getitem__(self, i: int | slice) -> Cell | Grid:
        if isinstance(i, slice):
            return self._view(range(len(self))[i])
        position = self._positions[i]
        b = bisect.bisect_right(self._starts, position) - 1
        cell = Cell(self._blocks[b].config(position - self._starts[b]), self.groups, self.varying)
        cell.__dict__["key"] = self.keys[i]  # Cell.key is a cached_property: hashed once
        return cell

    def values_of(self, axis: str) -> list[str]:
        """The values the grid's runs are tagged with on ``axis`` (a group's option names, a
        varying setting's labels by its tag), in the order of the blocks; no cell is built
        (a view made by :meth:`where` answers for its whole grid)."""
        found: dict[str, None] = {}
        for block in self._blocks:
            for text in block.texts(axis, self.groups, self.varying):
                found.setdefault(text)
        return list(found)

    def values_at(self, key: str) -> list[Any]:
        """The distinct values the grid's cells take at dotted ``key`` (a group: its options'
        names), in grid order, read from the blocks without building a cell."""
        found: list[Any] = []
        for block in self._blocks:
            if key in block.axes:
                values = block.values[block.axes.index(key)]
            else:
                values = tuple(_value_at(config, key) for config, _ in block.configs)
            found += [v for v in values if not any(_equal(v, f) for f in found)]
        return found

    def where(self, keep: Callable[[str], bool]) -> Grid:
        """The cells whose key ``keep`` accepts, in order (no cell is built)."""
        return self._view(i for i, key in enumerate(self.keys) if keep(key))

    def _view(self, indices: Iterable[int]) -> Grid:
        indices = list(indices)
        positions = array("q", (self._positions[i] for i in indices))
        keys = [self.keys[i] for i in indices]
        return Grid(self._blocks, positions, keys, self.groups, self.varying)


def _value_at(config: Mapping[str, Any], key: str) -> Any:
    """A group's option name (its node's ``name``), else the value at dotted ``key``."""
    value = select(config, key)
    return value.get("name") if isinstance(value, Mapping) else value


def _equal(a: Any, b: Any) -> bool:
    return canonical_json({"v": a}) == canonical_json({"v": b})


def task_of(cfg: DictConfig) -> Task:
    """The family's vocabulary from the composed config's ``task`` block."""
    block = cfg.get(TASK_KEY)
    return parse_task(OmegaConf.to_container(block, resolve=True) if block is not None else None)


LABEL = "label"
"""An option's display label (``label: UCB1`` in its YAML): how the report and the UI name
it. It describes, it does not compute: it is taken out of the cell (never part of a key, never
a constructor argument) and read from the option's file at report time."""


def _unlabelled(node: Any) -> Any:
    """A group option's node without its display label."""
    if isinstance(node, dict):
        node.pop(LABEL, None)
    return node


def _with_identity(config: dict[str, Any], task: Task) -> dict[str, Any]:
    """The config with its ``task`` block cut to the family's identity (what a key hashes)
    and its groups' options without their display labels."""
    if TASK_KEY in config:
        config[TASK_KEY] = task.identity
    for group in task.groups:
        _unlabelled(config.get(group))
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
    grid: Any, values: Mapping[str, Any], configs: ConfigSearch
) -> list[dict[str, list[Any]]]:
    """The blocks of ``grid`` (a ``sweep.grid``) as one job of a Hydra multirun sets them.

    ``values`` maps each key the multirun varies to this job's value (an option name for a
    group, the typed value otherwise). An axis some block has is pinned as on the command
    line (:func:`_pin`); a key no block has becomes a one-value axis of every block, so the
    union of all jobs' blocks is the multirun's grid (``-m +exp=main horizon=2000,4000``:
    main's blocks twice, once per horizon). A ``seed`` axis replaces the seed of ``seeds``.
    """
    blocks = _pin(_blocks(grid), values, configs)
    for block in blocks:
        for key, value in values.items():
            if _axis(block, key) is None:
                block[key] = [value]
    return blocks


def _pinned_values(
    pinned: Mapping[str, str], cfg: DictConfig, configs: ConfigSearch
) -> dict[str, Any]:
    """The command line's pinned values: option names for groups, typed values otherwise."""
    return {k: v if configs.is_group(k) else OmegaConf.select(cfg, k) for k, v in pinned.items()}


def _pin(
    blocks: list[dict[str, list[Any]]], values: Mapping[str, Any], configs: ConfigSearch
) -> list[dict[str, list[Any]]]:
    """Shrink the axes fixed on the command line to that one value.

    ``algorithm=linucb`` keeps the blocks whose algorithm axis lists linucb (and blocks
    without that axis); when no block lists the value, every block takes it instead (e.g.
    the smoke experiment run with another algorithm).
    """
    for key, value in values.items():
        with_axis = [b for b in blocks if _axis(b, key) is not None]
        if not with_axis:
            continue
        group = configs.is_group(bare(key))
        holding = [b for b in with_axis if any(_same(v, value, group) for v in b[_axis(b, key)])]
        keep = {id(b) for b in holding} if holding else {id(b) for b in with_axis}
        blocks = [b for b in blocks if _axis(b, key) is None or id(b) in keep]
        for block in blocks:
            if _axis(block, key) is not None:
                block[_axis(block, key)] = [value]
    return blocks


def _axis(block: Mapping[str, Any], key: str) -> str | None:
    """The key of ``block`` that sets ``key`` (written with or without its ``+``), or None."""
    return next((k for k in block if bare(k) == bare(key)), None)


def _same(a: Any, b: Any, group: bool) -> bool:
    return str(a) == str(b) if group else a == b


def cell_config(cfg: DictConfig) -> dict[str, Any]:
    """The resolved config of one cell: everything but the orchestration keys, with the
    ``task`` block cut to the family's identity."""
    container = OmegaConf.to_container(cfg, resolve=True)
    config = {k: v for k, v in container.items() if k not in ORCHESTRATION_KEYS}
    if isinstance(config.get(TASK_KEY), dict):
        task = parse_task(config[TASK_KEY])
        config[TASK_KEY] = task.identity
        for group in task.groups:
            _unlabelled(config.get(group))
    return config


def _refuse_option_lists(pinned: Mapping[str, str], configs: ConfigSearch) -> None:
    """``algorithm=[linucb,lints]`` makes Hydra merge both options into one config: refuse."""
    for key, value in pinned.items():
        if configs.is_group(key) and value.strip().startswith("["):
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
