"""Issue #37, item 4: the sweep's own settings are typed (sweeper/schema.py) and checked once,
while Hydra composes the config.

Every setting the schema declares (a new one is covered by being declared) is given a value
of the wrong type and null on the command line: a wrong type is refused at composition, in
one paragraph naming the setting (exit status 2); null is refused where the setting may not
be null, and where it may, a real sweep on Ray with every such setting null runs to the end
(``launcher.max_retries=null`` once passed the checks and failed the sweep at ``int(None)``).
"""

from __future__ import annotations

import io
import typing
from enum import StrEnum

import pytest
from omegaconf import OmegaConf

from sweeper import schema
from sweeper.configs import compose
from sweeper.errors import SweepError
from sweeper.overrides import check_command_line
from sweeper.seeds import SeedBudget
from sweeper.sweep import run_sweep

SETTINGS = [*schema.settings(), *schema.settings(SeedBudget, "seeds.")]
WRONG = {bool: "maybe", int: "abc", float: "abc", str: "[1,2]", dict: "5", list: "5"}
"""A value of another type for each kind of setting (Hydra reads ``[1,2]`` as a list)."""
SHAPED = ["5", "true", "abc", "[1]", "{a: 1}"]
"""Candidates of another shape for the settings of schema.SHAPES (the first that is not)."""


def wrong_value(setting: schema.Setting) -> str:
    """A value ``setting``'s type refuses, as the command line writes it."""
    if setting.key == "seeds":
        return "abc"
    if setting.key in schema.SHAPES:
        shapes = schema.SHAPES[setting.key]
        return next(v for v in SHAPED if _shape(v) not in shapes)
    kinds = setting.kinds
    if isinstance(kinds[0], type) and issubclass(kinds[0], StrEnum):
        return "nonsense"
    if set(kinds) == {int, str}:
        return "2.5"
    return WRONG[typing.get_origin(kinds[0]) or kinds[0]]


def _shape(text: str) -> str:
    from hydra.core.override_parser.overrides_parser import OverridesParser

    value = OverridesParser.create().parse_override(f"x={text}").value()
    shape = schema.shape(value)
    return "number" if shape == "whole number" else shape


def override(key: str, value: str) -> str:
    """``KEY=VALUE``; a key of the seed budget goes inside ``seeds={until: decided, ...}``."""
    if key.startswith("seeds."):
        return f"seeds={{until: decided, {key.removeprefix('seeds.')}: {value}}}"
    return f"{key}={value}"


def may_be_null(setting: schema.Setting) -> bool:
    if setting.key in schema.SHAPES:
        return "null" in schema.SHAPES[setting.key]
    return setting.optional


def _refused(argv: list[str]) -> str:
    with pytest.raises(SweepError) as raised:
        check_command_line([*argv, "task=toy"])
    said = str(raised.value)
    assert "\n" not in said
    return said


def test_the_schema_declares_the_settings_the_issue_names():
    keys = {s.key for s in SETTINGS}
    sections = {k.split(".")[0] for k in keys}
    assert {"tracking", "launcher", "seeds", "sweep", "report", "experiment"} <= sections
    assert {"rerun", "dry_run", "baseline", "launcher.batch", "launcher.max_retries"} <= keys


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.key for s in SETTINGS])
def test_a_wrong_type_is_refused_at_composition_naming_the_setting(setting):
    value = wrong_value(setting)
    said = _refused([override(setting.key, value)])
    assert setting.key in said, said
    assert setting.words() in said or "seeds must be a whole number" in said, said


@pytest.mark.parametrize("setting", SETTINGS, ids=[s.key for s in SETTINGS])
def test_null_is_refused_where_a_setting_may_not_be_null(setting):
    if may_be_null(setting):
        check_command_line(["task=toy", override(setting.key, "null")])
        return
    said = _refused([override(setting.key, "null")])
    assert setting.key in said and setting.words() in said, said


def test_every_setting_that_may_be_null_is_null_in_a_sweep_that_runs_to_the_end(
    composer, tracking_uri, ray_local
):
    nullable = [s.key for s in SETTINGS if may_be_null(s) and not s.key.startswith("seeds.")]
    assert "launcher.timeout_s" in nullable and "launcher.batch" in nullable
    overrides = [
        "task=toy",
        "horizon=20",
        f"tracking.uri={tracking_uri}",
        "experiment.name=nulls",
        *(f"{key}=null" for key in nullable),
    ]
    result = run_sweep(compose(overrides), compose, overrides, out=io.StringIO())
    assert (result.finished, result.exit_code) == (1, 0)


def test_conf_config_yaml_gives_every_declared_setting_a_value(composer):
    cfg = composer(["task=toy"])
    missing = [s.key for s in SETTINGS if not s.key.startswith("seeds.")]
    missing = [key for key in missing if OmegaConf.is_missing(cfg, key)]
    assert not missing, f"conf/config.yaml has no value for {missing}"


def test_an_experiment_files_unknown_key_and_wrong_type_are_refused(tmp_path):
    (tmp_path / "exp").mkdir()
    (tmp_path / "exp/retrys.yaml").write_text("# @package _global_\nlauncher:\n  max_retrys: 3\n")
    (tmp_path / "exp/typed.yaml").write_text("# @package _global_\ntracking:\n  batch_s: soon\n")
    said = _refused(["--config-dir", str(tmp_path), "+exp=retrys"])
    assert "exp/retrys.yaml sets launcher.max_retrys" in said
    assert "did you mean 'max_retries'?" in said
    said = _refused(["--config-dir", str(tmp_path), "+exp=typed"])
    assert "exp/typed.yaml gives tracking.batch_s a value it cannot hold" in said
    assert "tracking.batch_s is a number" in said


def test_a_key_added_to_a_declared_section_with_plus_is_refused():
    said = _refused(["+launcher.max_retrys=1"])
    assert "sets launcher.max_retrys, which is not a setting of launcher" in said
    assert "did you mean 'max_retries'?" in said


def test_the_seed_budget_is_typed_by_its_dataclass():
    said = _refused(["seeds={until: decided, mn: 3}"])
    assert "the seed budget has no key 'mn'; did you mean 'min'?" in said
    assert "seeds.until='soon'" in _refused(["seeds={until: soon}"])


def test_no_declared_setting_is_part_of_a_cell_key():
    """A setting says how a sweep runs, never what a cell computes: each top-level one is an
    orchestration key, left out of every cell's config and key."""
    from sweeper.cells import ORCHESTRATION_KEYS

    top = {s.key.split(".")[0] for s in schema.settings()}
    assert top <= ORCHESTRATION_KEYS, top - ORCHESTRATION_KEYS
