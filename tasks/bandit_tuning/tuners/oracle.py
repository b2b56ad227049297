"""Oracle: Zooming TS restarted at the true change points, the skyline of 003 Appendix A.3."""

from __future__ import annotations

from sweeper_tasks.bandit_tuning.tuners.zooming import ZoomingTuner


class Oracle(ZoomingTuner):
    """Zooming TS (000 Algorithm 1) restarted exactly when the environment changes.

    "We assume this algorithm knows the exact time for all switching points, and would
    renew the Zooming algorithm when reaching a new stationary environment" (003 A.3);
    as in the authors' experiment, the algorithm renewed is Zooming TS. It learns the
    change points only through ``notify_change``, which the switching Lipschitz cell calls
    before the first round of every new piece; in a cell that never calls it, the Oracle is
    Zooming TS without restarts. It is infeasible in practice: a skyline, not a contender.
    """

    rule = "ts"

    def notify_change(self) -> None:
        self.core.restart()
        self.restarts += 1
