"""Zooming (Kleinberg et al. 2019), the stationary contender of 003 Appendix A.3."""

from __future__ import annotations

import math

from sweeper_tasks.bandit_tuning.tuners.base import Tuner
from sweeper_tasks.bandit_tuning.tuners.zooming_core import ZoomingCore


class ZoomingTuner(Tuner):
    """Common plumbing of the zooming tuners: a ZoomingCore on the unit cube [0, 1]^p.

    Each tuned hyperparameter's interval [a_i, b_i] is rescaled to [0, 1] (000 Section 4);
    proposals map the chosen point back with ``Hyperparameter.from_unit``. Options: ``tau0``,
    the sub-Gaussian parameter of the reward (rewards in [0, 1] are 1/2-sub-Gaussian, so
    0.5); ``radius_constant`` and ``ts_constant``, the constants of r and s0 (000 Eq. 5);
    ``removal`` (Algorithm 1 line 4); and the released code's variants, off by default:
    ``ts_draw`` (false: index f + s, no draw), ``ts_log_horizon`` (false: s0 without ln T),
    ``random_start`` (each epoch starts from a random point of ``start_range``),
    ``pseudo_observation`` (false: an epoch's first arms start unpulled; null: true for TS),
    ``gap_rule`` ('released': the released check_1d's choice of the activated point),
    ``log_full_horizon`` (true: ln T of the whole horizon in r and s0 instead of the
    horizon T - T1 of Algorithm 1) and ``interval`` (a box [a, b] for every tuned
    hyperparameter instead of the space's own intervals, e.g. the released [0, 4]).
    See ``ZoomingCore``.
    """

    rule = "ts"

    def __init__(
        self,
        tau0: float = 0.5,
        warmup_rounds: int = 0,
        radius_constant: float = 13.0 / 2.0,
        ts_constant: float = 52.0 * math.pi,
        removal: bool = True,
        ts_draw: bool = True,
        ts_log_horizon: bool = True,
        random_start: bool = False,
        pseudo_observation: bool | None = None,
        start_range: tuple[float, float] = (0.0, 1.0),
        gap_rule: str = "widest",
        log_full_horizon: bool = False,
        interval: tuple[float, float] | None = None,
    ) -> None:
        if not tau0 > 0:
            raise ValueError(f"tau0 (the reward's sub-Gaussian parameter) must be > 0, got {tau0}")
        if int(warmup_rounds) < 0:
            raise ValueError(f"warmup_rounds must be >= 0, got {warmup_rounds}")
        self.tau0 = float(tau0)
        self._warmup = int(warmup_rounds)
        self.radius_constant = float(radius_constant)
        self.ts_constant = float(ts_constant)
        self.removal = bool(removal)
        self.ts_draw = bool(ts_draw)
        self.ts_log_horizon = bool(ts_log_horizon)
        self.random_start = bool(random_start)
        self.pseudo_observation = None if pseudo_observation is None else bool(pseudo_observation)
        self.start_range = tuple(float(v) for v in start_range)
        self.gap_rule = str(gap_rule)
        self.log_full_horizon = bool(log_full_horizon)
        if interval is not None:
            a, b = (float(v) for v in interval)
            if not b > a:
                raise ValueError(
                    f"tuner.interval must be [a, b] with a < b (the box searched for every "
                    f"tuned hyperparameter), got {interval}; or null for the space's intervals"
                )
            interval = (a, b)
        self.interval = interval

    def proposes(self, hyperparameter):
        """The box: ``tuner.interval`` for every hyperparameter, else the space's own."""
        return ("interval", tuple(self.interval or hyperparameter.interval))

    def reset(self, space, horizon, rng, theory) -> None:
        super().reset(space, horizon, rng, theory)
        self.T1 = min(self._warmup, self.horizon - 1)
        self.core = ZoomingCore(
            len(self.space),
            self.horizon if self.log_full_horizon else self.horizon - self.T1,
            rng,
            tau0=self.tau0,
            rule=self.rule,
            radius_constant=self.radius_constant,
            ts_constant=self.ts_constant,
            removal=self.removal and self.rule == "ts",
            ts_draw=self.ts_draw,
            ts_log_horizon=self.ts_log_horizon,
            random_start=self.random_start,
            pseudo_observation=self.pseudo_observation,
            start_range=self.start_range,
            gap_rule=self.gap_rule,
        )
        self.restarts = 0

    def warmup_rounds(self) -> int:
        return self.T1

    def _propose_unit(self) -> dict[str, float]:
        self.core.remove_dominated()
        point = self.core.select()
        if self.interval is not None:
            a, b = self.interval
            return {h.name: a + (b - a) * float(u) for h, u in zip(self.space, point, strict=True)}
        return {h.name: float(h.from_unit(u)) for h, u in zip(self.space, point, strict=True)}

    def propose(self, t: int) -> dict[str, float]:
        return self._propose_unit()

    def observe(self, reward: float) -> None:
        self.core.update(reward)

    def params(self) -> dict[str, float | str]:
        return {
            "T1": self.T1,
            "zooming.tau0": self.tau0,
            "zooming.radius_1": self.core.radius_scale,
            "zooming.ts_scale": self.core.ts_scale,
        }

    def state(self) -> dict[str, float]:
        return {"active_arms": self.core.m, "restarts": self.restarts}


class Zooming(ZoomingTuner):
    """The Zooming algorithm for stationary Lipschitz bandits (Kleinberg et al. 2019).

    Index f_hat(v) + 2 r(v) with the confidence radius r of 000 Eq. 5, activation of an
    uncovered point whenever the balls stop covering [0, 1]^p, no removal, no restart: it
    "would fail in theory under the switching environment" (003 Appendix A.3).
    """

    rule = "ucb"
