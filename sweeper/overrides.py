"""The command line checked before Hydra runs the app: a misspelled group, option or
setting, a setting of the wrong type, an override Hydra cannot parse, a config file that is
not valid YAML or a ``--config-dir`` that does not exist is bad input (exit status 2), said
in one paragraph (with the closest valid names where there are some).

Hydra would report each itself, with exit status 1 (which this tool keeps for "a cell
FAILED"), and for ``algoritm=linucb`` with the advice to write ``+algoritm=linucb``, which
only moves the mistake into the config. :func:`check_command_line` parses the arguments with
Hydra's own parser, checks every group option against the config search path
(``--config-dir`` and ``hydra.searchpath`` included), then composes the root config once with
the overrides (the first value of each swept one), as the app will, and turns a composition
error into such a paragraph (:func:`sweeper.schema.composition_error`).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from sweeper import schema
from sweeper.configs import ConfigSearch
from sweeper.errors import SweepError
from sweeper.paths import CONF_DIR

EXP = "exp"
"""The group of experiments (``+exp=NAME``)."""
NOT_IN_STRUCT = re.compile(r"Could not override '([^']+)'")
GRAMMAR = "https://hydra.cc/docs/advanced/override_grammar/basic/"


def check_command_line(argv: Sequence[str]) -> None:
    """Raise :class:`SweepError` for bad input on the command line ``argv`` (module
    docstring); return quietly for anything else (Hydra's own flags, help, completion)."""
    from hydra._internal.utils import get_args_parser

    args, _ = get_args_parser().parse_known_args(list(argv))
    if args.help or args.hydra_help or args.shell_completion or args.info or args.cfg:
        return
    if args.config_dir and not Path(args.config_dir).expanduser().is_dir():
        raise SweepError(
            f"--config-dir {args.config_dir}: no such directory. It is the directory that "
            "holds your own configs (DIR/exp/NAME.yaml, DIR/tuner/NAME.yaml, ...): "
            "docs/running.md, 'Your own experiments'"
        )
    parsed = [parse_override(o) for o in args.overrides]
    searchpath = [o.value() for o in parsed if o.key_or_group == "hydra.searchpath"]
    extra = [args.config_dir] if args.config_dir else []
    configs = ConfigSearch.of(
        [*extra, str(CONF_DIR), *(p for value in searchpath for p in value or [])]
    )
    job = [o for o in parsed if not o.is_hydra_override()]
    for override in job:
        _check_options(override, configs)
    schema.check(_compose_once(job, configs))


def parse_override(text: str) -> Any:
    """One override parsed by Hydra's grammar; a :class:`SweepError` naming it when it
    cannot be parsed or sets no key (``=5``)."""
    from hydra.core.override_parser.overrides_parser import OverridesParser
    from hydra.errors import HydraException

    try:
        override = OverridesParser.create().parse_override(text)
    except HydraException as err:
        reason = schema.one_line(str(err).split("\nSee https://")[0])
        raise SweepError(
            f"the override {text!r} cannot be parsed: {reason}. An override is KEY=VALUE in "
            f"Hydra's grammar ({GRAMMAR}): close every bracket and quote (seeds=[1,2]), and "
            "quote a value holding spaces, commas or brackets in single quotes inside the "
            "shell's double quotes (\"experiment.description='a, b'\")"
        ) from None
    if not override.key_or_group:
        raise SweepError(
            f"the override {text!r} sets no key: an override is KEY=VALUE (e.g. seeds=5)"
        )
    return override


def _check_options(override: Any, configs: ConfigSearch) -> None:
    key = override.key_or_group
    if override.is_delete() or "." in key or "/" in key or not configs.is_group(key):
        return
    values = list(override.sweep_iterator()) if override.is_sweep_override() else [override.value()]
    options = configs.options(key)
    for value in values:
        if isinstance(value, str) and value not in options:
            sizes = _experiment_sizes(value, options, configs) if key == EXP else None
            raise SweepError(
                f"unknown {key} '{value}'{did_you_mean(value, options, sizes)} Valid {key} "
                f"names are: {', '.join(options)}. An option of your own goes into DIR/{key}/"
                f"{value}.yaml with --config-dir DIR"
            )


def _compose_once(job: Sequence[Any], configs: ConfigSearch) -> Any:
    """The root config composed with the job's overrides (a swept one at its first value),
    as the app composes it; a :class:`SweepError` for anything composition refuses."""
    from hydra import compose, initialize_config_dir

    overrides = [_first(o) for o in job]
    hydra_overrides = configs.searchpath_override()
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        try:
            return compose(config_name="config", overrides=[*overrides, *hydra_overrides])
        except schema.COMPOSITION_ERRORS as err:
            found = NOT_IN_STRUCT.search(str(err))
            if found is None:
                raise schema.composition_error(err) from None
            others = [o for o in overrides if o.split("=", 1)[0].lstrip("+~") != found[1]]
            try:  # the config the name was looked for in: every other override applied
                root = compose(config_name="config", overrides=[*others, *hydra_overrides])
            except schema.COMPOSITION_ERRORS:
                root = compose(config_name="config", overrides=hydra_overrides)
            raise SweepError(_unknown_setting(found[1], root, configs)) from None


def _first(override: Any) -> str:
    """The override as one job of a multirun would have it (its first swept value)."""
    if not override.is_sweep_override():
        return override.input_line
    first = next(iter(override.sweep_iterator()))
    prefix = {"ADD": "+", "FORCE_ADD": "++"}.get(override.type.name, "")
    return f"{prefix}{override.key_or_group}={first}"


def _unknown_setting(key: str, root: Any, configs: ConfigSearch) -> str:
    parent, _, name = key.rpartition(".")
    node = OmegaConf.select(root, parent) if parent else root
    siblings = [str(k) for k in node.keys()] if hasattr(node, "keys") else []
    if not parent:
        siblings = sorted({*siblings, *configs.groups()})
    where = f"in '{parent}'" if parent else "at the top of the config"
    there = f"; the settings there are: {', '.join(sorted(siblings))}" if siblings else ""
    return (
        f"unknown group or setting '{key}'{did_you_mean(name, siblings)} There is no "
        f"'{name}' {where}{there}. `sweeper --help` lists the groups and their options"
    )


def did_you_mean(
    name: str, candidates: Sequence[str], sizes: Mapping[str, int] | None = None
) -> str:
    """'; did you mean 'x'?' for the closest candidates, else '.' (ends a sentence); a
    candidate experiment with its size ('main' (a grid of 1,120 cells)), so following the
    hint never starts a far larger sweep unawares."""
    close = _close(name, candidates)
    if not close:
        return "."
    sizes = sizes or {}
    said = [f"'{c}'" + (f" (a grid of {sizes[c]:,} cells)" if c in sizes else "") for c in close]
    return "; did you mean " + " or ".join(said) + "?"


def _close(name: str, candidates: Sequence[str]) -> list[str]:
    return difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)


def _experiment_sizes(name: str, options: Sequence[str], configs: ConfigSearch) -> dict[str, int]:
    """The grid size of each experiment the hint for ``+exp=name`` names (one composition
    each; an experiment that does not compose is named without a size)."""
    from hydra import compose, initialize_config_dir
    from hydra.errors import HydraException

    from sweeper.grid import written_size

    sizes = {}
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        for option in _close(name, options):
            try:
                cfg = compose("config", [f"+{EXP}={option}", *configs.searchpath_override()])
                sizes[option] = written_size(cfg)
            except (HydraException, ValueError):
                continue
    return sizes
