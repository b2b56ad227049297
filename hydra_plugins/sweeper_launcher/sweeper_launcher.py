"""The ``hydra/launcher: sweeper`` plugin: hand every job of a multirun to one sweep.

Hydra finds launchers in the ``hydra_plugins`` namespace package (as it finds
``hydra_plugins.hydra_joblib_launcher`` or ``hydra_plugins.hydra_ray_launcher``); importing
this module registers the config ``hydra/launcher/sweeper`` in Hydra's ConfigStore, which
``conf/config.yaml`` selects, and the schema of the sweep's settings (``sweeper.schema``),
which ``conf/config.yaml`` composes on. Unlike those launchers, it does not call the task function
once per job: ``sweeper.multirun.run_multirun`` turns the jobs into a grid and runs it
through the driver (one Ray start, one parent run, streaming, resumable).
"""

# No `from __future__ import annotations`: Hydra's plugin scan executes this module without
# registering it in sys.modules, where dataclasses look string annotations up.
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from hydra.core.config_store import ConfigStore
from hydra.core.hydra_config import HydraConfig
from hydra.core.utils import JobReturn, JobStatus, setup_globals
from hydra.plugins.launcher import Launcher
from hydra.types import HydraContext, TaskFunction
from omegaconf import DictConfig

from sweeper.schema import register as register_schema


@dataclass
class SweeperLauncherConf:
    _target_: str = "hydra_plugins.sweeper_launcher.sweeper_launcher.SweeperLauncher"


ConfigStore.instance().store(
    group="hydra/launcher", name="sweeper", node=SweeperLauncherConf, provider="sweeper"
)
register_schema()  # the sweep's settings, typed (conf/config.yaml's first default)


class SweeperLauncher(Launcher):
    """Runs a multirun's jobs as sweeps of the sweeper driver (no per-job task call)."""

    def __init__(self) -> None:
        super().__init__()
        self.config: DictConfig | None = None

    def setup(
        self, *, hydra_context: HydraContext, task_function: TaskFunction, config: DictConfig
    ) -> None:
        self.config = config

    def launch(
        self, job_overrides: Sequence[Sequence[str]], initial_job_idx: int
    ) -> Sequence[JobReturn]:
        from sweeper.configs import compose
        from sweeper.multirun import run_multirun, settle_sweep_dir

        setup_globals()
        HydraConfig.instance().set_config(self.config)  # its hydra.searchpath, for compose
        sweep_dir = Path(self.config.hydra.sweep.dir)
        settle_sweep_dir(sweep_dir)  # the basic sweeper's multirun.yaml: the parent runs
        try:  # keep the config
            statuses = run_multirun(job_overrides, compose)
        finally:
            settle_sweep_dir(sweep_dir)
        return [
            JobReturn(
                overrides=list(overrides),
                task_name="sweeper",
                status=JobStatus.COMPLETED,
                _return_value=status,
            )
            for overrides, status in zip(job_overrides, statuses, strict=True)
        ]
