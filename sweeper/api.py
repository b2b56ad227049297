"""sweeper from Python: :func:`run` a sweep and :func:`load` one (docs/python.md).

``run`` takes the path ``python -m sweeper`` takes: Hydra composes the root config with the
experiment and the overrides (given once), the grid is expanded into the same cells and
keys, the same store is opened and resumed. It returns the
:class:`~sweeper.sweep.SweepResult` whose ``exit_code`` is the command's exit status, and
never exits the process: bad input raises :class:`~sweeper.errors.SweepError` (a
``ValueError``: the command's exit status 2), another driver on the store
:class:`~sweeper.errors.StoreBusy` (4), a store that fails before a cell runs
:class:`~sweeper.errors.StoreFailed` (3). It leaves the process as it found it: environment
variables, Arrow's memory pool, log filters and levels, signal handlers and Hydra's global
state are restored, a Ray it started is shut down and a Ray the caller started is reused.

``load`` reads a sweep back, from a live store or a published report folder, as a
:class:`~sweeper.report.results.Results` (DataFrames in raw option names).
"""

from __future__ import annotations

import logging
import os
import signal
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO

from sweeper.configs import ConfigSearch
from sweeper.errors import SweepError
from sweeper.paths import CONF_DIR

SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGALRM)


def run(
    exp: str | None = None,
    overrides: Sequence[str] = (),
    config_dir: str | Path | Sequence[str | Path] | None = None,
    tracking_uri: str | None = None,
    out: TextIO | None = None,
) -> Any:
    """Run (or resume) a sweep, as ``python -m sweeper [+exp=EXP] [overrides]`` does.

    Parameters
    ----------
    exp : str, optional
        An experiment of ``conf/exp/`` or of ``config_dir`` (``+exp=EXP``); None runs the
        ad hoc cells ``overrides`` name (``["algorithm=linucb", "tuner=op", "seed=1"]``).
    overrides : sequence of str
        Hydra overrides, as on the command line (``"seeds=3"``, ``"baseline=op"``).
    config_dir : path or sequence of paths, optional
        Directories of your own configs (``--config-dir``): options, experiments.
    tracking_uri : str, optional
        The MLflow store (``tracking.uri=``); default ``$MLFLOW_TRACKING_URI``, else
        ``sqlite:///mlflow.db`` in the working directory.
    out : text stream, optional
        Where the progress and the summary go (default: standard output).

    Returns
    -------
    sweeper.sweep.SweepResult
        Its ``exit_code`` (0 every cell finished, 1 a cell failed, 3 the store failed, 4
        another driver took the store over, 130 interrupted), ``finished``, ``failed``,
        ``skipped``, ``resume_command``, and ``table`` (the sweep's cells).
    """
    from sweeper.configs import compose
    from sweeper.overrides import check_command_line
    from sweeper.sweep import run_sweep

    given = [*([f"+exp={exp}"] if exp else []), *overrides]
    given += [f"tracking.uri={tracking_uri}"] if tracking_uri else []
    dirs = _dirs(config_dir)
    with process_kept():
        check_command_line([*given, *_config_dir_args(dirs)])
        with hydra_app(dirs):
            cfg = _composed(compose, given)
            return run_sweep(cfg, compose, given, out=out or sys.stdout)


def _config_dir_args(dirs: Sequence[str]) -> list[str]:
    """``--config-dir`` (the first directory) and ``hydra.searchpath`` (the others), as
    the command line names them."""
    if not dirs:
        return []
    rest = [f"hydra.searchpath=[{','.join(repr(f'file://{d}') for d in dirs[1:])}]"]
    return ["--config-dir", dirs[0], *(rest if dirs[1:] else [])]


def _composed(compose: Any, overrides: list[str]) -> Any:
    """``compose(overrides)``, Hydra's composition errors said as bad input."""
    from hydra.errors import HydraException

    try:
        return compose(list(overrides))
    except HydraException as err:
        raise SweepError(" ".join(str(err).split())) from None


def load(
    name_or_folder: str | Path,
    tracking_uri: str | None = None,
    config_dir: str | Path | Sequence[str | Path] | None = None,
    baseline: str | None = None,
) -> Any:
    """A sweep's results: experiment ``name_or_folder`` of the store at ``tracking_uri``
    (default ``$MLFLOW_TRACKING_URI``, else ``sqlite:///mlflow.db``), or a published report
    folder (``docs/results/main``, which needs no store).

    Parameters
    ----------
    name_or_folder : str or path
        An MLflow experiment's name, or a folder ``python -m sweeper.report`` wrote.
    tracking_uri : str, optional
    config_dir : path or sequence of paths, optional
        Directories of your own configs, for the experiment file's report section and
        labels (``--config-dir``).
    baseline : str, optional
        The default baseline of ``compare()`` (else the sweep's).

    Returns
    -------
    sweeper.report.results.Results
    """
    from sweeper.report import read_experiment
    from sweeper.report.results import Results, is_folder

    configs = ConfigSearch.with_dirs(_dirs(config_dir))
    folder = is_folder(name_or_folder)
    with process_kept():
        loaded = read_experiment(
            "" if folder else str(name_or_folder),
            tracking_uri,
            configs,
            source=name_or_folder if folder else None,
        )
        return Results(loaded, configs, baseline)


def _dirs(config_dir: str | Path | Sequence[str | Path] | None) -> list[str]:
    if config_dir is None:
        return []
    dirs = [config_dir] if isinstance(config_dir, str | Path) else list(config_dir)
    found = [Path(d).expanduser().resolve() for d in dirs]
    for directory in found:
        if not directory.is_dir():
            raise SweepError(
                f"config_dir {directory}: no such directory (a directory of your own configs, "
                "as given to `sweeper --config-dir DIR`)"
            )
    return [str(d) for d in found]


@contextmanager
def hydra_app(config_dirs: Sequence[str]) -> Iterator[None]:
    """Hydra initialised as ``python -m sweeper --config-dir DIR`` initialises it (the
    shipped configs, each ``config_dirs`` where ``--config-dir`` puts it), its global state
    restored after."""
    from hydra import version
    from hydra._internal.hydra import Hydra
    from hydra._internal.utils import create_config_search_path
    from hydra.core.config_search_path import SearchPathQuery
    from hydra.initialize import get_gh_backup, restore_gh_from_backup

    backup = get_gh_backup()
    try:
        version.setbase("1.3")
        search_path = create_config_search_path(str(CONF_DIR))
        for directory in config_dirs:
            search_path.prepend(
                provider="command-line",
                path=f"file://{directory}",
                anchor=SearchPathQuery(provider="schema"),
            )
        Hydra.create_main_hydra2(task_name="sweeper", config_search_path=search_path)
        yield
    finally:
        restore_gh_from_backup(backup)


@contextmanager
def process_kept() -> Iterator[None]:
    """What a sweep changes in its process, put back as it was: environment variables,
    Arrow's memory pool, every logger's level, filters and handlers, the handlers of
    SIGINT, SIGTERM and SIGALRM; a Ray started inside is shut down (one the caller started
    stays)."""
    import pyarrow as pa

    environ = dict(os.environ)
    pool = pa.default_memory_pool()
    loggers = _loggers()
    handlers = {sig: signal.getsignal(sig) for sig in SIGNALS}
    ray_before = _ray_running()
    try:
        yield
    finally:
        if not ray_before and _ray_running():
            import ray

            ray.shutdown()
        for sig, handler in handlers.items():
            if handler is not None:
                signal.signal(sig, handler)
        _restore_loggers(loggers)
        pa.set_memory_pool(pool)
        for key in set(os.environ) - set(environ):
            del os.environ[key]
        os.environ.update(environ)


def _ray_running() -> bool:
    if "ray" not in sys.modules:
        return False
    import ray

    return ray.is_initialized()


def _all_loggers() -> dict[str, logging.Logger]:
    found = logging.Logger.manager.loggerDict.items()
    named = {name: log for name, log in found if isinstance(log, logging.Logger)}
    return {**named, "": logging.getLogger()}


def _loggers() -> dict[str, Any]:
    """Every logger's level, filters, handlers and propagation, and logging's disable level."""
    saved: dict[str, Any] = {
        name: (log.level, list(log.filters), list(log.handlers), log.propagate)
        for name, log in _all_loggers().items()
    }
    saved[DISABLED] = logging.root.manager.disable
    return saved


DISABLED = "\0disable"


def _restore_loggers(saved: dict[str, Any]) -> None:
    """Loggers that existed before as they were; a logger made since (a library imported
    during the sweep) keeps its own level and handlers, and loses the filters added to it."""
    for name, log in _all_loggers().items():
        if name not in saved:
            log.filters.clear()
            continue
        level, filters, handlers, propagate = saved[name]
        log.setLevel(level)
        log.filters[:] = filters
        log.handlers[:] = handlers
        log.propagate = propagate
    logging.disable(saved[DISABLED])
