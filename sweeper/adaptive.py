"""Seeds until decided: which cells to run next, as outcomes arrive (docs/seeds.md).

A group is every setting of the grid but the compared axis and the seed (the experiment's
``report.paired.axis``, else the task block's ``compare``: sweeper/baseline.py). Each option
of that axis is paired with the baseline by seed on the family's ``lead`` metric; each
pair's confidence sequence (:mod:`sweeper.confseq`) decides it. A group starts with ``min``
seeds of every option; while one of its comparisons is undecided, that option and the
baseline get ``step`` more seeds (once every cell of the
option's seeds so far has an outcome), up to ``max``; an option already decided gets no
more. The driver streams: cells of other groups and options run meanwhile.

When the rule has nothing to hand out and CPUs would idle (the last cells of a step), the
launcher asks for speculative cells (:meth:`AdaptiveSeeds.speculate`): the next step of
comparisons still open on the seeds they have so far. Their values count only once the rule
asks for their seeds, so the decisions, and the cells the rule asks for, are those of a
sweep without speculation; a speculative cell the rule never asks for is a cell run for
nothing but a CPU that was free (it is kept, and a later fixed-seed sweep reuses it).

The per-comparison error rate is ``alpha``; with K comparisons in a group the chance of any
wrong decision is at most K x alpha (Bonferroni): the report states the count, it does not
adjust alpha.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from sweeper.cells import Cell, canonical_json, select
from sweeper.confseq import UNDECIDED, Interval, decide, interval, path
from sweeper.seeds import SeedBudget
from sweeper.task import Task


@dataclass
class Group:
    """One group: its cells by (option, seed), each option's seeds wanted so far (the
    reference's: the most any option wants), the lead values."""

    name: str
    cells: dict[tuple[str, int], int] = field(default_factory=dict)  # -> index in the grid
    start: int = 0
    wanted_by: dict[str, int] = field(default_factory=dict)

    def wanted(self, option: str) -> int:
        return self.wanted_by.get(option, self.start)

    values: dict[tuple[str, int], float] = field(default_factory=dict)
    outcomes: set[tuple[str, int]] = field(default_factory=set)  # every cell with an outcome

    def options(self) -> list[str]:
        return sorted({option for option, _ in self.cells})

    def seeds(self) -> list[int]:
        return sorted({seed for _, seed in self.cells})


@dataclass(frozen=True)
class Decision:
    """A comparison's state at the end: option vs the reference in one group."""

    group: str
    option: str
    reference: str
    interval: Interval
    state: str
    seeds: int
    differences: tuple[float, ...] = ()


class AdaptiveSeeds:
    """The cells of a seed budget's sweep to run next (see the module docstring).

    Parameters
    ----------
    cells : sequence of Cell
        The grid at ``budget.max`` seeds (seeds 0..max-1 of every setting).
    budget : SeedBudget
    task : Task
        Its ``lead`` metric and that metric's better direction.
    finished : mapping of str to float
        Cell key -> lead value of the cells already finished (a resumed sweep).
    axis : str
        The compared axis (a group, or a dotted config key).
    baseline : object
        The axis value every other option is paired with (sweeper/baseline.py).
    """

    def __init__(
        self,
        cells: Sequence[Cell],
        budget: SeedBudget,
        task: Task,
        finished: Mapping[str, float],
        axis: str,
        baseline: Any,
    ) -> None:
        if not task.lead:
            raise ValueError(
                f"seeds until decided compares the task block's lead metric; task {task.name} "
                "sets none"
            )
        self.cells, self.budget, self.task = cells, budget, task
        self.axis, self.reference = axis, option_text(baseline)
        self.lower_is_better = task.better(task.lead) != "max"
        self.groups: dict[str, Group] = {}
        self.place: dict[str, tuple[str, str, int]] = {}  # cell key -> group, option, seed
        for i, cell in enumerate(cells):
            group, option, seed = self._locate(cell)
            g = self.groups.setdefault(group, Group(group, start=budget.min))
            g.cells[(option, seed)] = i
            self.place[cell.key] = (group, option, seed)
            if cell.key in finished:
                g.values[(option, seed)] = finished[cell.key]
                g.outcomes.add((option, seed))
        self.handed: set[int] = set()
        self.ahead: set[int] = set()  # handed out by speculate()
        for g in self.groups.values():
            self._advance(g)

    def _locate(self, cell: Cell) -> tuple[str, str, int]:
        value = select(cell.config, self.axis)
        option = option_text(value.get("name") if isinstance(value, Mapping) else value)
        rest = _without(cell.config, self.axis)
        rest.pop("seed", None)
        return canonical_json(rest), option, int(cell.config.get("seed", 0))

    # --- what the launcher asks -------------------------------------------------------
    def take(self, n: int) -> list[Cell]:
        """Up to ``n`` cells to dispatch now: those of each group's wanted seeds that have
        no outcome and were not handed out yet."""
        out: list[Cell] = []
        for g in self.groups.values():
            for (option, seed), i in sorted(g.cells.items(), key=lambda kv: kv[0][1]):
                if len(out) >= n:
                    return out
                if (
                    seed < g.wanted(option)
                    and (option, seed) not in g.outcomes
                    and i not in self.handed
                ):
                    self.handed.add(i)
                    out.append(self.cells[i])
        return out

    def speculate(self, n: int) -> list[Cell]:
        """Up to ``n`` cells of the next ``step`` seeds of each option whose comparison is
        undecided on the seeds it has so far (two at least: an interval, not a guess), and
        of the reference; lowest seeds first across groups (see the module docstring).
        None when ``budget.speculate`` is off."""
        if not self.budget.speculate or n <= 0:
            return []
        candidates = {
            (seed, i)
            for g in self.groups.values()
            for d in self.decisions_of(g)
            if d.state == UNDECIDED and d.seeds >= 2
            for option in (d.option, self.reference)
            for seed in range(g.wanted(option), min(g.wanted(d.option) + self.budget.step,
                                                    self.budget.max))
            if (i := self._free(g, option, seed)) is not None
        }  # fmt: skip
        chosen = sorted(candidates)[:n]
        self.handed.update(i for _, i in chosen)
        self.ahead.update(i for _, i in chosen)
        return [self.cells[i] for _, i in chosen]

    def ahead_used(self) -> tuple[int, int]:
        """How many cells were handed out ahead of the rule, and how many of those the rule
        then asked for (the rest ran on CPUs that were free, for nothing)."""
        used = sum(
            1 for g in self.groups.values() for (option, seed), i in g.cells.items()
            if i in self.ahead and seed < g.wanted(option)
        )  # fmt: skip
        return len(self.ahead), used

    def _free(self, g: Group, option: str, seed: int) -> int | None:
        """The grid index of (option, seed) if it has no outcome and was not handed out."""
        i = g.cells.get((option, seed))
        return None if i is None or i in self.handed or (option, seed) in g.outcomes else i

    def more(self) -> bool:
        """Whether any cell may still be handed out."""
        return any(
            seed < g.wanted(option) and (option, seed) not in g.outcomes
            and g.cells[(option, seed)] not in self.handed
            for g in self.groups.values() for option, seed in g.cells
        )  # fmt: skip

    def observe(self, cell: Cell, value: float | None) -> None:
        """A cell's outcome: its lead value, or None when it failed."""
        group, option, seed = self.place[cell.key]
        g = self.groups[group]
        g.outcomes.add((option, seed))
        if value is not None and np.isfinite(value):
            g.values[(option, seed)] = float(value)
        self._advance(g)

    # --- the decisions ----------------------------------------------------------------
    def _advance(self, g: Group) -> None:
        """Give each undecided option (and the reference) ``step`` more seeds while all the
        cells of its seeds so far have outcomes."""
        reference, moved = self.reference, True
        while moved:
            moved = False
            for d in self.decisions_of(g):
                n = g.wanted(d.option)
                if d.state == UNDECIDED and n < self.budget.max and self._complete(g, d.option):
                    g.wanted_by[d.option] = min(n + self.budget.step, self.budget.max)
                    moved = True
            others = [g.wanted(o) for o in g.options() if o != reference]
            g.wanted_by[reference] = max([g.start, *others])

    def _complete(self, g: Group, option: str) -> bool:
        n = g.wanted(option)
        return all(
            (o, s) in g.outcomes for o in (option, self.reference) for s in range(n)
            if (o, s) in g.cells
        )  # fmt: skip

    def decisions_of(self, g: Group) -> list[Decision]:
        """Each option's comparison with the reference over the option's wanted seeds."""
        reference = self.reference
        decisions = []
        for option in g.options():
            if option == reference:
                continue
            diffs = [
                g.values[(option, s)] - g.values[(reference, s)]
                for s in range(g.wanted(option))
                if (option, s) in g.values and (reference, s) in g.values
            ]
            iv = interval(np.asarray(diffs), self.budget.alpha, n_star=self.budget.max)
            scale = abs(np.mean([g.values[(reference, s)] for s in range(g.wanted(option))
                                 if (reference, s) in g.values] or [0.0]))  # fmt: skip
            state = decide(iv, self.budget.precision * scale, self.lower_is_better)
            decisions.append(
                Decision(g.name, option, reference, iv, state, len(diffs), tuple(diffs))
            )
        return decisions

    def decisions(self) -> list[Decision]:
        return [d for g in self.groups.values() for d in self.decisions_of(g)]

    def cells_left(self) -> int:
        """How many cells of the groups' wanted seeds, or handed out ahead of them, have no
        outcome yet."""
        return sum(
            1 for g in self.groups.values() for key, i in g.cells.items()
            if (key[1] < g.wanted(key[0]) or i in self.handed) and key not in g.outcomes
        )  # fmt: skip

    def cells_wanted(self) -> int:
        """How many cells the groups' wanted seeds hold (run, running or to run)."""
        return sum(1 for g in self.groups.values() for o, s in g.cells if s < g.wanted(o))

    def label(self, group: str) -> str:
        """A readable name of a group: the parts of its run names (sans seed) that all its
        options share, i.e. without the compare axis."""
        g = self.groups[group]
        settings = [self.cells[g.cells[(option, 0)]].setting for option in g.options()
                    if (option, 0) in g.cells]  # fmt: skip
        if not settings:
            return "every cell"
        shared = set.intersection(*(set(s.split("/")) for s in settings))
        parts = [p for p in settings[0].split("/") if p in shared]
        return "/".join(parts) or "every cell"

    def table(self) -> list[dict[str, Any]]:
        """The decisions as rows (the parent run's ``decisions.json``, the report)."""
        return [
            {
                "group": self.label(d.group),
                "option": d.option,
                "reference": d.reference,
                "seeds": d.seeds,
                "mean_difference": d.interval.mean,
                "low": d.interval.low,
                "high": d.interval.high,
                "state": d.state,
                "path": [
                    [p.n, p.mean, p.low, p.high]
                    for p in path(np.asarray(d.differences), self.budget.alpha, self.budget.max)
                ],
            }
            for d in self.decisions()
        ]


def option_text(value: Any) -> str:
    """An option of the compared axis as text: its name, else its canonical JSON."""
    return value if isinstance(value, str) else canonical_json({"v": value})[5:-1]


def _without(config: Mapping[str, Any], dotted: str) -> dict[str, Any]:
    """A copy of ``config`` without the dotted key (the compare axis)."""
    head, _, rest = dotted.partition(".")
    out = dict(config)
    if not rest:
        out.pop(head, None)
    elif isinstance(out.get(head), Mapping):
        out[head] = _without(out[head], rest)
    return out
