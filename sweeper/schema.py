"""The sweep's own settings, declared with their types (docs/configuration.md, "Settings").

Hydra composes every config on top of this schema: :func:`register` stores it in Hydra's
ConfigStore as ``sweeper_schema`` (as Hydra's own launcher plugins store theirs; this app's
plugin, ``hydra_plugins/sweeper_launcher``, calls it when Hydra scans its plugins), and
conf/config.yaml names it first in its defaults list. So a setting of the wrong type
(``rerun=maybe``, ``launcher.max_retries=null``) and an unknown key of a declared section
(``launcher.max_retrys`` in an experiment file) are refused while the config is composed,
before anything runs; :func:`composition_error` says Hydra's message as the tool's one
paragraph (exit status 2). The root stays open to the family's own keys (``cell``,
``horizon``, its groups): only the settings below are typed.

The values are conf/config.yaml's (``???`` here: every setting declared has its value
there); a report section's are its defaults. What a type cannot say, ranges and relations
between settings, :mod:`sweeper.settings` checks.

``seeds`` is a whole number or a seed budget (a mapping, :class:`sweeper.seeds.SeedBudget`).
OmegaConf types unions of primitive types only, not of a number and a mapping, so the
schema declares it ``Any`` and :func:`check` types it right after composition, with
OmegaConf too: a number as an ``int`` setting, a mapping as a ``SeedBudget``.
"""

from __future__ import annotations

import dataclasses
import re
import typing
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any

from omegaconf import MISSING, DictConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from sweeper.errors import SweepError
from sweeper.seeds import SeedBudget

NAME = "sweeper_schema"
"""The schema's name in Hydra's ConfigStore (conf/config.yaml's first default)."""


class LauncherName(StrEnum):
    """``launcher.name``: Ray (embedded or a cluster), or serial in this process."""

    ray = "ray"
    local = "local"


class Strategy(StrEnum):
    """``launcher.scheduling_strategy``: Ray's placement of the cells."""

    DEFAULT = "DEFAULT"
    SPREAD = "SPREAD"


@dataclass
class Experiment:
    name: str = MISSING  # the MLflow experiment
    description: str | None = MISSING


@dataclass
class Sweep:
    grid: Any = MISSING  # null, {key: [values]} or a list of such blocks (sweeper/grid.py)
    max_cells: int = MISSING


@dataclass
class Tracking:
    uri: str = MISSING
    database: str | None = MISSING
    artifacts_destination: str | None = MISSING
    direct_writes: bool = MISSING
    batch_size: int = MISSING
    batch_s: float = MISSING
    log_threads: int | None = MISSING
    patience_s: float = MISSING


@dataclass
class Launcher:
    name: LauncherName = MISSING
    address: str | None = MISSING
    num_cpus: int | None = MISSING
    cpus_per_cell: float = MISSING
    max_in_flight: int | None = MISSING
    max_retries: int = MISSING
    timeout_s: float | None = MISSING
    scheduling_strategy: Strategy = MISSING
    batch: int | str | None = field(default=MISSING, metadata={"words": "null, auto or N >= 1"})


SHAPES = {
    "sweep.grid": ("null", "mapping", "list"),
    "report.pivot": ("null", "text", "list"),
    "report.paired": ("false", "mapping"),
    "report.optimum": ("null", "text", "mapping"),
    "report.reference": ("null", "text", "number"),
}
"""The settings typed ``Any`` because their value is one of several shapes, a value or a
container (OmegaConf types unions of primitive types only): :func:`check` checks the shape.
``seeds`` is the other one (a number or a seed budget: :func:`seed_budget`)."""


@dataclass
class Report:
    """An experiment's ``report:`` section (docs/reports.md). Its defaults mean what an
    absent key means; the keys whose value is one of several shapes are ``Any`` and
    :data:`SHAPES` says which; what is inside them sweeper/report/spec.py checks."""

    title: str = ""
    axes: dict[str, Any] = field(default_factory=dict)
    pivot: Any = None
    tables: list[Any] | None = None
    paired: Any = field(default_factory=dict)
    optimum: Any = None
    figures: dict[str, Any] = field(default_factory=dict)
    reference: Any = None


@dataclass
class Settings:
    """Every setting of how a sweep runs (never part of a cell key: sweeper/cells.py's
    ORCHESTRATION_KEYS)."""

    seeds: Any = MISSING  # null, N, or a seed budget (sweeper/seeds.py): see check()
    baseline: str | None = MISSING  # the option every paired comparison is against
    rerun: bool = MISSING
    dry_run: bool = MISSING
    experiment: Experiment = field(default_factory=Experiment)
    sweep: Sweep = field(default_factory=Sweep)
    tracking: Tracking = field(default_factory=Tracking)
    launcher: Launcher = field(default_factory=Launcher)
    report: Report = field(default_factory=Report)


def root() -> DictConfig:
    """The schema as Hydra composes on it: a root open to the family's keys, whose settings
    are :class:`Settings`' typed nodes."""
    typed = OmegaConf.structured(Settings)
    return OmegaConf.create({key: typed._get_node(key) for key in typed})


def register() -> None:
    """Store the schema in Hydra's ConfigStore (idempotent)."""
    from hydra.core.config_store import ConfigStore

    ConfigStore.instance().store(name=NAME, node=root(), provider="sweeper")


# --- what each setting is, said in words ----------------------------------------------------


@dataclass(frozen=True)
class Setting:
    """One declared setting: its dotted key and its type annotation."""

    key: str
    annotation: Any
    said: str = ""  # the words of a setting whose type alone does not say it all

    @property
    def optional(self) -> bool:
        return self.annotation is Any or type(None) in typing.get_args(self.annotation)

    @property
    def kinds(self) -> tuple[Any, ...]:
        """The types a value may have (None aside)."""
        args = typing.get_args(self.annotation)
        if typing.get_origin(self.annotation) in (typing.Union, type(int | None)):
            return tuple(a for a in args if a is not type(None))
        return (self.annotation,)

    def words(self) -> str:
        """``a whole number``, ``true or false``, ``one of ray, local``, ... (or null)."""
        if self.said:
            return self.said
        if self.key in SHAPES:
            return _either(SHAPES[self.key])
        said = " or ".join(_word(kind) for kind in self.kinds)
        return f"{said}, or null" if self.optional and self.annotation is not Any else said


def _word(kind: Any) -> str:
    origin = typing.get_origin(kind)
    if isinstance(kind, type) and issubclass(kind, StrEnum):
        return f"one of {', '.join(m.value for m in kind)}"
    return {
        bool: "true or false",
        int: "a whole number",
        float: "a number",
        str: "text",
        dict: "a mapping",
        list: "a list",
    }.get(origin or kind, "any value")


def settings(schema: type = Settings, prefix: str = "") -> Iterator[Setting]:
    """Every leaf setting of ``schema``, depth first (sections are dataclasses)."""
    hints = typing.get_type_hints(schema)
    for item in dataclasses.fields(schema):
        kind = hints[item.name]
        if dataclasses.is_dataclass(kind):
            yield from settings(kind, f"{prefix}{item.name}.")
        else:
            yield Setting(f"{prefix}{item.name}", kind, item.metadata.get("words", ""))


def find(key: str) -> Setting | None:
    """The declared setting ``key`` (dotted), or None."""
    return next((s for s in settings() if s.key == key), None)


def sections() -> dict[str, list[str]]:
    """Each declared section (``launcher``, ...) and its keys."""
    hints = typing.get_type_hints(Settings)
    return {
        name: [f.name for f in dataclasses.fields(kind)]
        for name, kind in hints.items()
        if dataclasses.is_dataclass(kind)
    }


# --- after composition -------------------------------------------------------------------


def check(cfg: DictConfig) -> None:
    """What composition cannot refuse by itself: a key added to a declared section with
    ``+`` (Hydra lets ``+launcher.x=1`` through), the shape of the settings of
    :data:`SHAPES`, and the type of ``seeds``."""
    for section, keys in sections().items():
        node = cfg.get(section)
        extra = sorted(set(node) - set(keys)) if isinstance(node, Mapping) else []
        if extra:
            raise SweepError(unknown_key(f"{section}.{extra[0]}", "the command line"))
    for key, shapes in SHAPES.items():
        value = OmegaConf.select(cfg, key)
        if shape(value) not in shapes and not (
            shape(value) == "whole number" and "number" in shapes
        ):
            raise SweepError(
                f"{key}={_shown(value)}: {key} is {_either(shapes)}, not {_either([shape(value)])}"
                f" ({DOCS})"
            )
    seed_budget(cfg.get("seeds"))


def shape(value: Any) -> str:
    """What ``value`` is, in the words of :data:`SHAPES`."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if OmegaConf.is_dict(value) or isinstance(value, Mapping):
        return "mapping"
    if OmegaConf.is_list(value) or isinstance(value, list | tuple):
        return "list"
    if isinstance(value, int):
        return "whole number"
    return "number" if isinstance(value, float) else "text"


def _either(shapes: Sequence[str]) -> str:
    """``null, a mapping or a list``."""
    words = [s if s in ("null", "false", "true", "text") else f"a {s}" for s in shapes]
    return " or ".join(words) if len(words) < 3 else f"{', '.join(words[:-1])} or {words[-1]}"


def _shown(value: Any) -> str:
    if OmegaConf.is_config(value):
        value = OmegaConf.to_container(value)
    return (
        "null" if value is None else str(value).lower() if isinstance(value, bool) else str(value)
    )


def seed_budget(seeds: Any) -> Any:
    """``seeds`` typed: None, a whole number, or a :class:`~sweeper.seeds.SeedBudget` (a
    mapping whose ``until`` is ``decided``; its other keys typed by the dataclass)."""
    if seeds is None:
        return None
    if OmegaConf.is_dict(seeds) or isinstance(seeds, Mapping):
        given = dict(OmegaConf.to_container(seeds) if OmegaConf.is_dict(seeds) else seeds)
        until = given.pop("until", None)
        if until != "decided":
            raise SweepError(
                f"seeds.until={until!r}: a seed budget is seeds={{until: decided, min: 10, "
                "max: 40, step: 5, alpha: 0.05, precision: 0.02, speculate: true}} (every key "
                "but until optional); or give a number of seeds (seeds=20)"
            )
        typed = OmegaConf.structured(SeedBudget)
        OmegaConf.set_readonly(typed, False)
        try:
            return OmegaConf.to_object(OmegaConf.merge(typed, given))
        except OmegaConfBaseException as err:
            raise SweepError(_said(err, "seeds.", "the seed budget")) from None
    if isinstance(seeds, bool) or not isinstance(seeds, int):
        raise SweepError(
            "seeds must be a whole number, at least 1 (seeds=N runs seeds 0..N-1), or a seed "
            f"budget (seeds={{until: decided, min: 10, max: 40}}: docs/seeds.md); got {seeds!r}"
        )
    return seeds


# --- Hydra's errors as one paragraph ----------------------------------------------------------


def _composition_errors() -> tuple[type[BaseException], ...]:
    import yaml
    from hydra.errors import HydraException

    return (HydraException, OmegaConfBaseException, yaml.YAMLError, ValueError)


COMPOSITION_ERRORS = _composition_errors()
"""What composing a config raises for bad input: Hydra's errors (a missing option, a
refused override), OmegaConf's (a wrong type, an unknown key), YAML's (a file that does not
parse) and ValueError (Hydra's defaults list)."""

FULL_KEY = re.compile(r"full_key: (\S+)")
IN_FILE = re.compile(r"^In '([^']+)': \w+ raised while composing config:\s*")
OVERRIDE = re.compile(r"^Error merging override (.+)$")
NOT_IN = re.compile(r"Key '([^']+)' not in '")
DOCS = "docs/configuration.md lists the settings and their types"


def composition_error(err: Exception) -> SweepError:
    """Hydra's (or OmegaConf's, or YAML's) refusal of a config, as one paragraph naming the
    setting, what it must be and where it was given."""
    import yaml

    if isinstance(err, yaml.MarkedYAMLError) and err.problem_mark is not None:
        mark = err.problem_mark
        what = "; ".join(one_line(str(t)) for t in (err.context, err.problem) if t)
        return SweepError(
            f"the config file {mark.name} is not valid YAML: {what} (line {mark.line + 1}, "
            f"column {mark.column + 1}). Fix the file there (a bracket or quote left open, "
            "a tab, a key without its colon)"
        )
    if isinstance(err, yaml.YAMLError):
        return SweepError(f"a config file is not valid YAML: {one_line(str(err))}")
    text = str(err)
    cause = err.__cause__ if isinstance(err.__cause__, OmegaConfBaseException) else None
    where = "the command line"
    found = IN_FILE.match(text)
    if found:
        where, text = f"the config file {found[1]}.yaml", text[found.end() :]
    override = OVERRIDE.match(text)
    if override and cause is not None:
        where, text = f"the override {override[1]}", str(cause)
    key = FULL_KEY.search(text)
    if key and NOT_IN.search(text):
        return SweepError(unknown_key(key[1], where))
    if key:
        return SweepError(_said_of(key[1], text, where))
    return SweepError(one_line(text))


def unknown_key(key: str, where: str) -> str:
    """An unknown key of a declared section, with the closest names and the section's keys."""
    from sweeper.overrides import did_you_mean

    section, _, name = key.rpartition(".")
    keys = sections().get(section, [])
    return (
        f"{where} sets {key}, which is not a setting of {section}"
        f"{did_you_mean(name, keys)} The settings of {section} are: {', '.join(keys)} ({DOCS})"
    )


def _said_of(key: str, text: str, where: str) -> str:
    setting = find(key) or find_in(SeedBudget, key, "seeds.")
    what = f"{key} is {setting.words()}{_example(key)}" if setting else f"{key} has another type"
    return f"{where} gives {key} a value it cannot hold ({_first_line(text)}): {what} ({DOCS})"


def find_in(schema: type, key: str, prefix: str) -> Setting | None:
    return next((s for s in settings(schema, prefix) if s.key == key), None)


def _example(key: str) -> str:
    """``, e.g. KEY=VALUE`` with conf/config.yaml's value, or ``""`` without one."""
    from sweeper.paths import CONF_DIR

    value = OmegaConf.select(OmegaConf.load(CONF_DIR / "config.yaml"), key, default=None)
    if value is None or isinstance(value, str) and "${" in value:
        return ""
    return f", e.g. {key}={str(value).lower() if isinstance(value, bool) else value}"


def _said(err: OmegaConfBaseException, prefix: str, where: str) -> str:
    text = str(err)
    key = FULL_KEY.search(text)
    if key and NOT_IN.search(text):
        from sweeper.overrides import did_you_mean

        names = [f.name for f in dataclasses.fields(SeedBudget)]
        return (
            f"{where} has no key '{key[1]}'{did_you_mean(key[1], names)} Its keys are: "
            f"until, {', '.join(names)} (docs/seeds.md)"
        )
    return _said_of(f"{prefix}{key[1]}" if key else prefix.rstrip("."), text, where)


def _first_line(text: str) -> str:
    return text.strip().splitlines()[0].strip() if text.strip() else text


def one_line(text: str) -> str:
    """``text`` as one paragraph (its lines joined, runs of spaces one)."""
    return " ".join(text.split())
