"""Hydra multirun as one sweep: the jobs of ``python -m sweeper -m ...`` become a grid.

``python -m sweeper -m algorithm=linucb,lints tuner=theory,op seed=0,1`` makes Hydra's basic
sweeper list eight jobs, each a list of overrides. Hydra's own launchers would run eight
programs; this app's launcher (``hydra_plugins/sweeper_launcher``, the default of
``conf/config.yaml``) hands them to :func:`sweeps_of`, which turns them into the sweeps the
driver runs (``run_sweep``, the same path as ``+exp``): one Ray start, one parent run,
cells logged as they finish, resume and failure isolation.

* An override that is the same in every job (``+exp=main``, ``launcher.num_cpus=2``) is the
  sweep's command line.
* An override that varies is an axis: each job pins its value in the experiment's
  ``sweep.grid`` (:func:`sweeper.grid.pin_blocks`), and the union of the jobs' blocks is the
  sweep's grid. ``-m +exp=main horizon=2000,4000`` is main's grid at both horizons.
* A varying override of a sweep-level setting (``+exp``, ``task``, ``seeds``, ``rerun``,
  ``experiment.*``, ``tracking.*``, ``launcher.*``, ``sweep.*``) cannot be an axis of one
  sweep (a sweep has one experiment, one store, one launcher): the jobs are split into one
  sweep per value, run one after another on the same Ray instance.

Hydra writes the multirun's config (``multirun.yaml``, the command line's URIs included) into
``hydra.sweep.dir`` before the launcher runs. conf/config.yaml puts that in a new directory
only this user can enter (:func:`private_sweep_dir`, mode 0700), and the launcher removes it
as soon as it starts (:func:`settle_sweep_dir`; the sweeps' parent runs keep the config, with
passwords redacted): a sweep killed with ``kill -9`` leaves no copy behind, and a directory a
killed process left before that is removed by the next multirun.
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from sweeper.command import resume_lines
from sweeper.configs import ConfigSearch
from sweeper.errors import StoreFailed
from sweeper.grid import Composer, pin_blocks
from sweeper.process import pid_alive
from sweeper.store.failures import damaged
from sweeper.store.lock import StoreBusy
from sweeper.sweep import (
    EXIT_STORE_BUSY,
    EXIT_STORE_FAILED,
    SweepResult,
    print_interrupted,
    run_sweep,
)
from sweeper.uri import redact

SWEEP_LEVEL = (
    "exp", "task", "seeds", "rerun", "experiment", "tracking", "launcher", "sweep", "baseline",
)  # fmt: skip
"""Keys (and prefixes of dotted keys) that say how a sweep runs, not what a cell computes."""

EXIT_CODES: list[int] = []
"""The exit status of each sweep this process ran (``sweeper.__main__.entry`` exits with
the largest)."""


@dataclass
class MultirunSweep:
    """One sweep of a multirun: its command line (the overrides common to its jobs), the
    grid its jobs make, and the jobs (their indices in the multirun)."""

    overrides: list[str]
    grid: list[dict[str, list[Any]]]
    jobs: list[int]


SWEEP_DIR_PREFIX = "sweeper-multirun-"
_SWEEP_DIR: list[str] = []  # this process's, made once


def private_sweep_dir() -> str:
    """``hydra.sweep.dir`` (conf/config.yaml's resolver ``sweeper.sweep_dir``): a new directory
    under ``$TMPDIR`` that only this user can enter (``tempfile.mkdtemp``, mode 0700), the same
    one for every resolution in this process. The directories of dead processes of this user
    are removed first."""
    if not _SWEEP_DIR:
        _remove_stale_sweep_dirs(Path(tempfile.gettempdir()))
        prefix = f"{SWEEP_DIR_PREFIX}{os.getpid()}-"
        _SWEEP_DIR.append(tempfile.mkdtemp(prefix=prefix))
    return _SWEEP_DIR[0]


def _remove_stale_sweep_dirs(parent: Path) -> None:
    for path in parent.glob(f"{SWEEP_DIR_PREFIX}*"):
        pid = path.name.removeprefix(SWEEP_DIR_PREFIX).split("-", 1)[0]
        try:
            mine = path.is_dir() and path.stat().st_uid == os.getuid()
        except OSError:
            continue
        if mine and (not pid.isdigit() or not pid_alive(int(pid))):
            shutil.rmtree(path, ignore_errors=True)


def settle_sweep_dir(path: Path) -> None:
    """Leave no multirun config behind in ``hydra.sweep.dir``: this tool's own temporary
    directory (:data:`SWEEP_DIR_PREFIX`) is removed; a directory the user chose
    (``hydra.sweep.dir=...``) keeps its YAML files, their credentials redacted, mode 0600."""
    path = Path(path)
    if path.name.startswith(SWEEP_DIR_PREFIX):
        shutil.rmtree(path, ignore_errors=True)
        return
    for file in path.glob("**/*.yaml") if path.is_dir() else []:
        file.chmod(0o600)
        text = file.read_text()
        if redact(text) != text:
            file.write_text(redact(text))


OmegaConf.register_new_resolver("sweeper.sweep_dir", private_sweep_dir, replace=True)


def override_key(override: str) -> str:
    """``+dataset.n_arms=10`` -> ``dataset.n_arms``."""
    return override.split("=", 1)[0].lstrip("+~")


def is_sweep_level(key: str) -> bool:
    return key.split(".", 1)[0] in SWEEP_LEVEL


def sweeps_of(job_overrides: Sequence[Sequence[str]], compose: Composer) -> list[MultirunSweep]:
    """Group a multirun's jobs into sweeps and build each one's grid (module docstring).

    Parameters
    ----------
    job_overrides : one list of overrides per job, as Hydra's sweeper makes them.
    compose : composes the root config with a list of overrides (the sweep's base config,
        whose ``sweep.grid`` the jobs pin).
    """
    from hydra.core.override_parser.overrides_parser import OverridesParser

    parser = OverridesParser.create()
    configs = ConfigSearch.current()
    jobs = [{override_key(o): o for o in overrides} for overrides in job_overrides]
    for job in jobs:
        _refuse_deletions(job)
    varying = {k for job in jobs for k in job if len({j.get(k) for j in jobs}) > 1}
    by_level: dict[tuple[str | None, ...], list[int]] = {}
    level_keys = sorted(k for k in varying if is_sweep_level(k))
    for index, job in enumerate(jobs):
        by_level.setdefault(tuple(job.get(k) for k in level_keys), []).append(index)
    sweeps = []
    for indices in by_level.values():
        members = [jobs[i] for i in indices]
        axes = [k for k in dict.fromkeys(k for j in members for k in j) if k in varying]
        axes = [k for k in axes if not is_sweep_level(k)]
        common = [o for k, o in members[0].items() if k not in axes]
        base = compose(common)
        grid_node = OmegaConf.select(base, "sweep.grid")
        grid = OmegaConf.to_container(grid_node, resolve=True) if grid_node is not None else None
        blocks: list[dict[str, list[Any]]] = []
        for job in members:
            values = {
                _axis_key(job[k]): _value(parser, configs, k, job[k]) for k in axes if k in job
            }
            for block in pin_blocks(grid, values, configs):
                if block not in blocks:
                    blocks.append(block)
        sweeps.append(MultirunSweep(common, blocks, indices))
    return sweeps


def _axis_key(override: str) -> str:
    """The grid key of a swept override: ``+toy.sleep_s=0,1`` adds a key the config does not
    have, so its axis is ``+toy.sleep_s`` (sweeper/grid.py refuses an unknown key without)."""
    return ("+" if override.startswith("+") else "") + override_key(override)


def _value(parser: Any, configs: ConfigSearch, key: str, override: str) -> Any:
    """An override's value: the option name of a group, else the typed value (``2000``)."""
    value = parser.parse_override(override).value()
    return str(value) if configs.is_group(key) else value


def _refuse_deletions(job: dict[str, str]) -> None:
    for key, override in job.items():
        if override.startswith("~"):
            raise ValueError(
                f"{override} deletes a key in a multirun; sweeper turns a multirun's jobs into "
                f"one grid, where a key is set, not deleted. Delete {key} for every job in an "
                "experiment file, or run the jobs without -m"
            )


def run_multirun(job_overrides: Sequence[Sequence[str]], compose: Composer) -> list[int]:
    """Run a multirun's jobs as sweeps (:func:`sweeps_of`); the exit status of each job.

    Bad input exits with status 2 and a one-paragraph message before anything runs (as
    ``python -m sweeper`` does); an interrupted sweep exits with 130 at once.
    """
    statuses = [0] * len(job_overrides)
    try:
        sweeps = sweeps_of(job_overrides, compose)
    except ValueError as err:
        exit_bad_input(err)
    for sweep in sweeps:
        cfg = with_grid(compose(sweep.overrides), sweep.grid)
        print(
            f"multirun: {len(sweep.jobs)} job(s) as one sweep of {len(sweep.grid)} grid "
            f"block(s) ({' '.join(sweep.overrides) or 'no common overrides'})",
            file=sys.stdout,
        )
        result = run_or_exit(cfg, compose, sweep.overrides)
        EXIT_CODES.append(result.exit_code)
        for index in sweep.jobs:
            statuses[index] = result.exit_code
        if result.interrupted:  # its resume line is the whole multirun's command
            sys.exit(result.exit_code)
    return statuses


def with_grid(cfg: DictConfig, grid: list[dict[str, list[Any]]]) -> DictConfig:
    """``cfg`` with its ``sweep.grid`` replaced by ``grid`` (the sweep's base config)."""
    with open_dict(cfg):
        OmegaConf.update(cfg, "sweep.grid", grid, merge=False, force_add=True)
    return cfg


def run_or_exit(cfg: DictConfig, compose: Composer, overrides: Sequence[str]) -> SweepResult:
    """``run_sweep``, with what stops it before a cell runs said once, no traceback: bad
    input (exit status 2), another driver on the store (4), the store failing (3), a
    signal (130, :func:`interrupted`)."""
    try:
        return run_sweep(cfg, compose, list(overrides))
    except KeyboardInterrupt:  # a signal outside the sweep's dispatch: stopped at once
        return interrupted(cfg, overrides)
    except ValueError as err:
        exit_bad_input(err)
    except StoreBusy as err:
        print(f"error: {err}", file=sys.stderr)
        sys.exit(EXIT_STORE_BUSY)
    except StoreFailed as err:
        print(f"error: {store_failed(err)}", file=sys.stderr)
        sys.exit(EXIT_STORE_FAILED)


def store_failed(err: StoreFailed) -> str:
    """What a store that failed before the first cell means: nothing of this sweep was
    written; what the store held is kept, unless its file is damaged (then it is said)."""
    if damaged(err):
        return (
            f"the MLflow store failed ({err}): its file is damaged, so runs it held may be "
            "lost (this sweep wrote nothing into it). Keep a copy of the file, recover what "
            "SQLite can (sqlite3 FILE .recover | sqlite3 RECOVERED.db) and point tracking.uri "
            "at the recovered file, or at a new file to start again"
        )
    return (
        f"the MLflow store failed ({err}). Nothing was lost: fix the store (free disk space, "
        "restart the tracking server, ...) and run the same command again"
    )


def interrupted(cfg: DictConfig, overrides: Sequence[str]) -> SweepResult:
    """The result of a sweep a signal stopped before or after its dispatch (the store
    opening, Ray starting, the summary): its parent run, if it had one, ended KILLED
    (sweeper/sweep.py), and how to resume is said."""
    result = SweepResult(
        str(cfg.experiment.get("name")), "", 0, 0, interrupted=True,
        resume_command=resume_lines(overrides),
    )  # fmt: skip
    print_interrupted(result.resume_command)
    return result


def exit_bad_input(err: ValueError) -> None:
    """Print a bad-input error as one paragraph and exit with status 2
    (``HYDRA_FULL_ERROR=1`` raises it instead, with its traceback)."""
    if os.environ.get("HYDRA_FULL_ERROR") == "1":
        raise err
    print(f"error: {err}", file=sys.stderr)
    sys.exit(2)
