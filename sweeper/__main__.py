"""``sweeper +exp=NAME [overrides]`` (or ``python -m sweeper``): run an experiment's sweep.

Without ``+exp`` the same path runs ad hoc cells: ``sweeper algorithm=linucb tuner=tl
seed=1`` is one cell. ``-m`` (Hydra multirun) runs a product of them as ONE sweep: this
app's Hydra launcher (``hydra_plugins/sweeper_launcher``, selected by ``conf/config.yaml``)
turns the jobs into a grid (``sweeper.multirun``). With ``hydra/launcher=basic`` Hydra runs
each job as its own sweep, one after another.

The configs are the checkout's ``conf/`` or, installed from a wheel, the copy inside the
package (``sweeper.paths``); ``--config-dir DIR`` adds a directory of your own experiments.

Exit status: 0 when every cell finished, 1 when any cell failed, 2 for bad input (a
one-paragraph message, no traceback unless HYDRA_FULL_ERROR=1; nothing ran), 3 when the
MLflow store failed (disk full, server gone: what was logged is kept; fix it and rerun the
same command to resume), 4 when another driver writes into the store (nothing ran; the
message names it), 130 when interrupted (Ctrl-C or SIGTERM, from the first instruction to the
last: sweeper/signals.py; rerun the same command to resume).
"""

from __future__ import annotations

import sys

from sweeper import signals

signals.install()  # SIGINT and SIGTERM mean the same from here on (sweeper/signals.py)
try:
    import hydra
    from hydra.core.hydra_config import HydraConfig
    from hydra.types import RunMode
    from omegaconf import DictConfig

    from sweeper import command
    from sweeper.configs import compose
    from sweeper.errors import SweepError
    from sweeper.memory import trim_eagerly
    from sweeper.multirun import EXIT_CODES, exit_bad_input, run_or_exit
    from sweeper.overrides import check_command_line
    from sweeper.paths import CONF_DIR
except KeyboardInterrupt:
    signals.interrupted_early()


@hydra.main(config_path=str(CONF_DIR), config_name="config", version_base="1.3")
def main(cfg: DictConfig) -> None:
    hydra_cfg = HydraConfig.get()
    result = run_or_exit(cfg, compose, list(hydra_cfg.overrides.task))
    if hydra_cfg.mode == RunMode.MULTIRUN:  # hydra/launcher=basic: one sweep per job
        EXIT_CODES.append(result.exit_code)  # the other jobs still run; exit at the end
        if result.interrupted:
            sys.exit(result.exit_code)
    elif result.exit_code:
        sys.exit(result.exit_code)


def entry() -> None:
    """The ``sweeper`` console script; ``python -m sweeper`` runs the same.

    ``--dry-run`` is ``dry_run=true``: the plan of the sweep, nothing run (sweeper/dryrun.py).
    """
    command.record()  # the command as the user ran it: the resume line repeats it
    trim_eagerly()  # the driver's own process: glibc gives freed memory back at once
    if "--dry-run" in sys.argv[1:]:
        sys.argv = [a for a in sys.argv if a != "--dry-run"] + ["dry_run=true"]
    try:
        try:
            check_command_line(sys.argv[1:])
        except SweepError as err:
            exit_bad_input(err)
        code = _run()
        _shut_ray_down()
    except KeyboardInterrupt:  # outside a sweep (a sweep says its own)
        signals.interrupted_early()
    signals.exit_after(code)


def _run() -> int:
    """Hydra's main: the exit status of the sweeps it ran."""
    try:
        main()
    except SystemExit as done:  # Hydra's errors, and a sweep that did not finish every cell
        if not isinstance(done.code, int | None):
            raise
        return done.code or 0
    return max(EXIT_CODES, default=0)


def _shut_ray_down() -> None:
    """Stop the Ray this process started or joined now, while a signal is still answered
    (its exit handler would do it after the last instruction)."""
    ray = sys.modules.get("ray")
    if ray is not None and ray.is_initialized():
        ray.shutdown()


if __name__ == "__main__":
    entry()
