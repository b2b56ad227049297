"""``python -m sweeper.check [GROUP=OPTION ...] [--config-dir DIR]``: the conformance check.

Like scikit-learn's ``check_estimator``, it holds every component (an option of a family's
group: an algorithm, a tuner, a dataset, an estimator, ...) to the contract every cell
relies on, whoever wrote it. Without arguments it checks every option of every group of
every family on Hydra's config search path (``--config-dir`` directories included). Each
component:

1. **builds from its YAML alone**: the family's defaults plus this one option compose, and
   the family's ``validate`` hook accepts the cell;
2. **is deterministic**: the same config run twice gives the same numbers (summary, curves
   and trace; the family's timing metrics aside);
3. **keeps to its declaration**: the family's ``conformance`` hook, if it has one, finds
   nothing wrong with the finished cell (bandit tuners: every proposal inside the interval
   or set the tuner declares);
4. **runs with every partner**: with every option of the groups the family pairs it with;
5. **survives a pickle round trip** (Ray ships configs and results; the family's
   ``build`` hook, if any, gives the built parts to pickle too);
6. **returns the family's declared metrics**: the lead metric, finite, and every declared
   curve;
7. **gives the same numbers in a batch**: when the cell function has a batched form
   (``function.batch``, docs/architecture.md "Batches of seeds"), two seeds run as one
   batch give each the numbers it has alone, exactly. The family's ``paths`` hook, if any,
   says how the component runs in a batch (its own batched implementation, one object per
   seed, or one seed at a time), and the report prints it.

A family says how to check its components in its task block, ``task.check``::

    check:
      overrides: [horizon=120]                  # a small cell
      pairs: {tuner: [algorithm]}               # a tuner runs with every algorithm
      options: {dataset/lipschitz: [cell=...]}  # what an option needs to run at all
      needs_data: [dataset/yahoo]               # may be reported "not run: no data"
      timing: [runtime_s]                       # summary values that are wall times

Exit status: 0 when every checked component conforms, 1 when one does not, 2 for bad input.
"""

from __future__ import annotations

import argparse
import pickle
import sys
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import yaml

from sweeper.configs import ConfigSearch
from sweeper.task import Task, parse_task


@dataclass
class Report:
    """The outcome of one component's check."""

    component: str  # GROUP/OPTION
    family: str
    cells: int = 0
    problems: list[str] = field(default_factory=list)
    not_run: str = ""  # why it could not run (declared missing data)
    path: str = ""  # how it runs in a batch of seeds (the family's ``paths`` hook)

    @property
    def ok(self) -> bool:
        return not self.problems and not self.not_run


def families(configs: ConfigSearch) -> dict[str, Task]:
    """Each family of ``task/*.yaml`` on the search path, by name."""
    found = {}
    for option in configs.options("task"):
        loaded = yaml.safe_load(configs.find("task", option).read_text()) or {}
        if isinstance(loaded.get("task"), Mapping):
            found[option] = parse_task(loaded["task"])
    return found


def components(configs: ConfigSearch, only: Sequence[str] = ()) -> Iterator[tuple[str, str]]:
    """(family, GROUP/OPTION) of every component, or of those named in ``only``."""
    for family, task in families(configs).items():
        for group in task.groups:
            for option in configs.options(group):
                name = f"{group}/{option}"
                if not only or name in only:
                    yield family, name


class Checker:
    """Runs the checks (module docstring), composing cells through Hydra on ``configs`` and
    running each distinct cell once."""

    def __init__(self, configs: ConfigSearch) -> None:
        self.configs = configs
        self.tasks = families(configs)
        self._results: dict[str, Any] = {}

    def check(self, family: str, component: str) -> Report:
        task = self.tasks[family]
        settings = task.check
        report = Report(component, family)
        base = [f"task={family}", component.replace("/", "="), *settings.get("overrides", [])]
        base += list((settings.get("options") or {}).get(component, []))
        try:
            config = self._config(base)
            self._validate(config)
        except Exception as err:  # any failure to build is the finding
            if _missing_file(err) and component in (settings.get("needs_data") or []):
                report.not_run = f"no data: {str(err).splitlines()[0]}"
            else:
                report.problems.append(f"does not build: {_first_line(err)}")
            return report
        report.problems += self._deterministic(config, task)
        report.problems += self._batched(config, task)
        report.path = self._path(config, component)
        for overrides in self._partners(component, settings):
            try:
                partner = self._config([*base, *overrides])
                self._validate(partner)
                result = self._run(partner)
            except Exception as err:  # a failing partner is the finding
                report.problems.append(f"with {' '.join(overrides)}: {_first_line(err)}")
                continue
            report.cells += 1
            report.problems += [
                f"with {' '.join(overrides) or 'the defaults'}: {p}"
                for p in self._contract(partner, result, task)
            ]
        return report

    # --- the checks ------------------------------------------------------------------
    def _deterministic(self, config: dict[str, Any], task: Task) -> list[str]:
        first = self._run(config)
        again = self._function(config)(config)
        timing = set(task.check.get("timing") or [])
        if not _same(first, again, timing):
            return ["not deterministic: the same config gave different numbers twice"]
        return []

    def _batched(self, config: dict[str, Any], task: Task) -> list[str]:
        function = self._function(config)
        if not callable(getattr(function, "batch", None)):
            return []
        configs = [{**config, "seed": seed} for seed in (0, 1)]
        timing = set(task.check.get("timing") or [])
        together = function.batch(configs)
        if all(_same(function(c), r, timing) for c, r in zip(configs, together, strict=True)):
            return []
        return ["its batch of two seeds gives other numbers than each seed alone"]

    def _path(self, config: dict[str, Any], component: str) -> str:
        hook = getattr(self._function(config), "paths", None)
        if hook is None:
            return ""
        return str(hook(config).get(component.split("/", 1)[0], ""))

    def _contract(self, config: dict[str, Any], result: Any, task: Task) -> list[str]:
        problems = []
        hook = getattr(self._function(config), "conformance", None)
        if hook is not None:
            problems += list(hook(config, result))
        problems += _pickles(config, result, getattr(self._function(config), "build", None))
        summary, curves = result.get("summary", {}), result.get("curves", {})
        if task.lead and not np.isfinite(summary.get(task.lead, np.nan)):
            problems.append(f"the lead metric {task.lead} is missing or not finite")
        missing = [name for name in task.curves if len(np.asarray(curves.get(name, []))) == 0]
        if missing:
            problems.append(f"declared curve(s) {missing} missing")
        return problems

    def _partners(self, component: str, settings: Mapping[str, Any]) -> list[list[str]]:
        """One list of overrides per partner: every option of each paired group."""
        group = component.split("/", 1)[0]
        partners = [
            [f"{other}={option}"]
            for other in (settings.get("pairs") or {}).get(group, [])
            for option in self.configs.options(other)
            if f"{other}/{option}" not in (settings.get("needs_data") or [])
            and f"{other}/{option}" not in (settings.get("options") or {})
        ]
        return partners or [[]]

    # --- cells -----------------------------------------------------------------------
    def _config(self, overrides: list[str]) -> dict[str, Any]:
        from hydra import compose, initialize_config_dir

        from sweeper.grid import cell_config
        from sweeper.paths import CONF_DIR

        searchpath = self.configs.searchpath_override()
        with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
            return cell_config(compose("config", overrides=[*overrides, *searchpath]))

    @staticmethod
    def _function(config: Mapping[str, Any]) -> Any:
        from hydra.utils import get_method

        return get_method(config["cell"])

    def _validate(self, config: dict[str, Any]) -> None:
        hook = getattr(self._function(config), "validate", None)
        if hook is not None:
            hook(config)

    def _run(self, config: dict[str, Any]) -> Any:
        from sweeper.cells import cell_key

        key = cell_key(config)
        if key not in self._results:
            self._results[key] = self._function(config)(config)
        return self._results[key]


def _pickles(config: Any, result: Any, build: Any) -> list[str]:
    try:
        back = pickle.loads(pickle.dumps((config, result)))
        if back[0] != config or not _same(back[1], result, set()):
            return ["a pickle round trip changes the config or the result"]
        if build is not None:
            pickle.loads(pickle.dumps(build(config)))
    except Exception as err:  # what pickle raises depends on the object
        return [f"does not survive a pickle round trip (Ray ships it): {_first_line(err)}"]
    return []


def _same(a: Any, b: Any, timing: set[str]) -> bool:
    """Equal results, numbers compared exactly (NaN equal to NaN), ``timing`` keys aside."""
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        keys = set(a) - timing
        return keys == set(b) - timing and all(_same(a[k], b[k], timing) for k in keys)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(_same(x, y, timing) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray | float | int) and isinstance(b, np.ndarray | float | int):
        return np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)
    return a == b


def _missing_file(err: BaseException | None) -> bool:
    """Whether ``err`` is, or was raised from, a missing file (a dataset not obtained)."""
    while err is not None:
        if isinstance(err, FileNotFoundError):
            return True
        err = err.__cause__ or err.__context__
    return False


def _first_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m sweeper.check",
        description="Check that components (GROUP=OPTION, e.g. tuner=mine) keep the contract "
        "every cell relies on; without arguments, every option of every family.",
    )
    parser.add_argument("components", nargs="*", metavar="GROUP=OPTION")
    parser.add_argument("--config-dir", action="append", default=[], metavar="DIR")
    args = parser.parse_args(argv)
    configs = ConfigSearch.with_dirs(args.config_dir)
    wanted = [c.replace("=", "/", 1) for c in args.components]
    found = list(components(configs, wanted))
    unknown = sorted(set(wanted) - {name for _, name in found})
    if unknown:
        print(f"error: no such component: {', '.join(unknown)}", file=sys.stderr)
        return 2
    checker = Checker(configs)
    reports = [checker.check(family, name) for family, name in found]
    for report in reports:
        state = "ok" if report.ok else ("not run" if report.not_run else "FAILS")
        path = f"; in a batch of seeds: {report.path}" if report.path else ""
        print(f"{state:7s} {report.component} ({report.family}, {report.cells} cell(s)){path}")
        for problem in [report.not_run, *report.problems]:
            if problem:
                print(f"          {problem}")
    failing = [r for r in reports if r.problems]
    not_run = [r for r in reports if r.not_run and not r.problems]
    conform = len(reports) - len(failing) - len(not_run)
    print(
        f"{conform} of {len(reports)} component(s) conform, {len(failing)} do not, "
        f"{len(not_run)} not run (no data)"
    )
    return 1 if failing else 0


if __name__ == "__main__":
    sys.exit(main())
