"""Adaptive discretisation of [0, 1]^p by zooming: 000/003 Algorithm 1 and Kleinberg et al. 2019.

The space is the unit cube A = [0, 1]^p (each hyperparameter interval [a_i, b_i] is rescaled
to [0, 1], 000 Section 4), the metric is the sup-norm Dist(u, v) = max_i |u_i - v_i|, so a
confidence ball B(v, r) is an axis-aligned cube; for p = 1 it is the interval [v - r, v + r].
With cubes the question "do the active balls still cover what remains of the space?" has an
exact answer at a cost that depends only on the active set (see ``uncovered_point``), which
makes the activation rule of Algorithm 1 (line 7) exact in any dimension p.

Per active arm v: n(v) pulls since the last restart, the running mean f_hat(v), the
confidence radius r(v) = sqrt(13 tau0^2 ln T / (2 n(v))) and the Thompson-sampling scale
s(v) = s0 / sqrt(n(v)) with s0 = sqrt(52 pi tau0^2 ln T) (000 Eq. 5). An arm that has not
been pulled yet is given the radius of one pull, r(1) (000 Algorithm 1 line 3 initialises
n(v) = 1), and is pulled before any Thompson draw is taken (line 8: "activate and pull").
"""

from __future__ import annotations

import itertools
import math

import numpy as np

CLIP = 1.0 / math.sqrt(2.0 * math.pi)
"""Lower clip of the Thompson draw: Z = max(1/sqrt(2 pi), N(0, 1)) (000 Eq. 6)."""

RULES = ("ts", "ucb")


class ZoomingCore:
    """The active set, statistics and covering of one zooming learner on [0, 1]^p.

    ``rule='ts'``: Zooming TS of 000 Algorithm 1, I(v) = f_hat(v) + s(v) Z with
    Z = max(1/sqrt(2 pi), N(0, 1)) (Eq. 6), and the removal rule (line 4).
    ``rule='ucb'``: the stationary Zooming algorithm of Kleinberg et al. (2019), index
    I(v) = f_hat(v) + 2 r(v), no removal.

    A round is ``remove_dominated()`` (TS only), ``select()``, then ``update(reward)``;
    ``update`` restores the covering invariant before it returns, so after every round the
    active balls cover A_0, the part of A not removed. ``restart()`` starts a new epoch.
    """

    def __init__(
        self,
        dim: int,
        horizon: int,
        rng: np.random.Generator,
        tau0: float = 0.5,
        rule: str = "ts",
        removal: bool | None = None,
        radius_constant: float = 13.0 / 2.0,
        ts_constant: float = 52.0 * math.pi,
        ts_draw: bool = True,
        ts_log_horizon: bool = True,
        random_start: bool = False,
    ) -> None:
        if dim < 1:
            raise ValueError(f"zooming needs at least one dimension, got {dim}")
        if not tau0 > 0:
            raise ValueError(f"tau0 (the reward's sub-Gaussian parameter) must be > 0, got {tau0}")
        if rule not in RULES:
            raise ValueError(f"unknown zooming rule '{rule}'; choose one of {RULES}")
        self.dim = int(dim)
        self.rng = rng
        self.rule = rule
        self.ts_draw = bool(ts_draw)
        self.random_start = bool(random_start)
        self.removal = (rule == "ts") if removal is None else bool(removal)
        log_t = math.log(max(int(horizon), 2))
        if not (radius_constant > 0 and ts_constant > 0):
            raise ValueError(
                f"radius_constant and ts_constant must be > 0, got {radius_constant}, {ts_constant}"
            )
        self.radius_scale = math.sqrt(radius_constant * tau0**2 * log_t)  # r(v) = this / sqrt(n)
        ts_log = log_t if ts_log_horizon else 1.0
        self.ts_scale = math.sqrt(ts_constant * tau0**2 * ts_log)  # s0
        self.restart()

    # -- state -------------------------------------------------------------------------
    def restart(self) -> None:
        """A new epoch: A_0 = A and an active set J whose balls B(v, r(1)) cover A (line 3).

        Line 3 leaves J free. By default J is the centres of the k^p cubes of side
        1/k <= 2 r(1) (one point, the centre of A, when r(1) >= 1/2). With ``random_start``
        J starts from a uniformly random point and grows by activating uncovered points
        until A is covered, as the authors' released code starts from one random point.
        """
        r1 = self.radius_scale
        k = max(1, math.ceil(1.0 / (2.0 * r1)))  # k^p cubes of side 1/k <= 2 r(1)
        capacity = max(16, 2 * k**self.dim)
        self.centers = np.zeros((capacity, self.dim))
        self.counts = np.zeros(capacity)
        self.means = np.zeros(capacity)
        self.m = 0
        self.removed_centers = np.zeros((0, self.dim))
        self.removed_radii = np.zeros(0)
        self.last = -1
        self.removals = 0
        if self.random_start:
            point = self.rng.uniform(size=self.dim)
            while point is not None:
                self._activate(point)
                point = self.uncovered_point()
            return
        axis = (np.arange(k) + 0.5) / k
        for point in itertools.product(axis, repeat=self.dim):
            self._activate(np.asarray(point, dtype=float))

    def _activate(self, point: np.ndarray) -> int:
        if self.m == len(self.counts):
            grow = len(self.counts)
            self.centers = np.concatenate([self.centers, np.zeros((grow, self.dim))])
            self.counts = np.concatenate([self.counts, np.zeros(grow)])
            self.means = np.concatenate([self.means, np.zeros(grow)])
        i = self.m
        self.centers[i] = point
        self.counts[i] = 0.0
        self.means[i] = 0.0  # f_hat(v) = 0 while n(v) = 0 (000 Section 4.1)
        self.m += 1
        return i

    def radii(self) -> np.ndarray:
        """r(v) of every active arm (an unpulled arm has the radius of one pull)."""
        return self.radius_scale / np.sqrt(np.maximum(self.counts[: self.m], 1.0))

    @property
    def active_centers(self) -> np.ndarray:
        return self.centers[: self.m]

    # -- one round ---------------------------------------------------------------------
    def remove_dominated(self) -> bool:
        """Line 4-5: if f_hat(v) - f_hat(u) > r(v) + 2 r(u) for some pulled u, v in J, drop u
        from J and B(u, r(u)) from A_0. One arm per round, the most dominated one.

        u is dominated by some v iff max_v (f_hat(v) - r(v)) > f_hat(u) + 2 r(u); the
        maximiser cannot be u itself, so one pass over J finds every dominated arm.
        """
        if not self.removal or self.m < 2:
            return False
        n = self.counts[: self.m]
        pulled = n > 0
        if pulled.sum() < 2:
            return False
        f, r = self.means[: self.m], self.radii()
        lower = np.where(pulled, f - r, -np.inf)
        margin = lower.max() - (f + 2.0 * r)
        margin[~pulled] = -np.inf
        u = int(np.argmax(margin))
        if not margin[u] > 0:
            return False
        self.removed_centers = np.vstack([self.removed_centers, self.centers[u]])
        self.removed_radii = np.append(self.removed_radii, r[u])
        self._delete(u)
        self.removals += 1
        return True

    def _delete(self, i: int) -> None:
        last = self.m - 1
        if i != last:
            self.centers[i] = self.centers[last]
            self.counts[i] = self.counts[last]
            self.means[i] = self.means[last]
        self.m -= 1
        if self.last == i:
            self.last = -1
        elif self.last == last:
            self.last = i

    def index(self) -> np.ndarray:
        """I(v) of every active arm: Eq. 6 (TS) or f_hat + 2 r (UCB); +inf when unpulled."""
        n = self.counts[: self.m]
        f = self.means[: self.m]
        safe = np.maximum(n, 1.0)
        if self.rule == "ts":
            z = np.maximum(CLIP, self.rng.standard_normal(self.m)) if self.ts_draw else 1.0
            score = f + self.ts_scale / np.sqrt(safe) * z
        else:
            score = f + 2.0 * self.radius_scale / np.sqrt(safe)
        return np.where(n > 0, score, np.inf)

    def select(self) -> np.ndarray:
        """Lines 7-10: pull a newly activated arm first, else argmax_v I(v)."""
        unpulled = np.flatnonzero(self.counts[: self.m] == 0)
        self.last = int(unpulled[0]) if unpulled.size else int(np.argmax(self.index()))
        return self.centers[self.last].copy()

    def update(self, reward: float) -> None:
        """Line 12: n(v_t) += 1 and the running mean; then restore the covering (line 7)."""
        i = self.last
        if i < 0:
            raise RuntimeError("update called before select")
        old_radius = self.radius_scale / math.sqrt(max(self.counts[i], 1.0))
        self.counts[i] += 1.0
        self.means[i] += (float(reward) - self.means[i]) / self.counts[i]
        new_radius = self.radius_scale / math.sqrt(self.counts[i])
        if new_radius < old_radius:
            self._restore_cover(self.centers[i].copy(), old_radius, new_radius)

    # -- covering ----------------------------------------------------------------------
    def _restore_cover(self, center: np.ndarray, old: float, new: float) -> None:
        """Only the pulled arm's ball shrank, so only B(v, old) \\ B(v, new) can have lost
        cover; activate uncovered points there until the active balls cover A_0 again."""
        if self.dim == 1 and center[0] - new <= 0.0 and center[0] + new >= 1.0:
            return  # the shrunken interval still holds all of [0, 1]
        lo = np.maximum(center - old, 0.0)
        hi = np.minimum(center + old, 1.0)
        if (center - new <= lo).all() and (center + new >= hi).all():
            return  # the shrunken ball still holds the whole region it covered
        while True:
            point = self.uncovered_point(lo, hi)
            if point is None:
                return
            self._activate(point)

    def uncovered_point(
        self, lo: np.ndarray | None = None, hi: np.ndarray | None = None
    ) -> np.ndarray | None:
        """A point of the box [lo, hi] (default A) in A_0 but in no active ball, or None.

        Exact: the faces of the cubes that meet the box cut it into cells; inside a cell
        every cube either contains all points or none, and the uncovered set (A_0 minus
        closed balls) is relatively open, so it is non-empty iff some cell's midpoint is
        uncovered. The cost depends on the number k of cubes meeting the box, not on t:
        at most (2k + 1)^p cells. The widest uncovered cell's midpoint is returned.
        """
        lo = np.zeros(self.dim) if lo is None else np.asarray(lo, dtype=float)
        hi = np.ones(self.dim) if hi is None else np.asarray(hi, dtype=float)
        radii = np.concatenate([self.radii(), self.removed_radii])
        centers = np.concatenate([self.centers[: self.m], self.removed_centers])
        lower = centers - radii[:, None]
        upper = centers + radii[:, None]
        if self.dim == 1:  # a sweep over intervals, no cells needed
            return _largest_gap(
                float(lo[0]), float(hi[0]), lower[:, 0].tolist(), upper[:, 0].tolist()
            )
        meets = (lower <= hi).all(axis=1) & (upper >= lo).all(axis=1)
        lower, upper = lower[meets], upper[meets]
        if ((lower <= lo).all(axis=1) & (upper >= hi).all(axis=1)).any():
            return None  # one ball holds the whole box
        covered = None
        volume = None
        mids = []
        for d in range(self.dim):
            cuts = np.unique(
                np.clip(
                    np.concatenate([lower[:, d], upper[:, d], lo[d : d + 1], hi[d : d + 1]]),
                    lo[d],
                    hi[d],
                )
            )
            width = np.diff(cuts)
            keep = width > 1e-12
            mid = ((cuts[:-1] + cuts[1:]) / 2.0)[keep]
            width = width[keep]
            if mid.size == 0:
                return None
            mids.append(mid)
            member = (lower[:, d] <= mid[:, None]) & (mid[:, None] <= upper[:, d])  # (n_d, k)
            if covered is None:
                covered, volume = member, width
            else:
                covered = (covered[:, None, :] & member[None, :, :]).reshape(-1, len(lower))
                volume = np.multiply.outer(volume, width).reshape(-1)
        uncovered = ~covered.any(axis=1)  # neither removed (outside A_0) nor in an active ball
        if not uncovered.any():
            return None
        cell = int(np.argmax(np.where(uncovered, volume, -1.0)))
        index = np.unravel_index(cell, tuple(len(m) for m in mids))
        return np.array([m[i] for m, i in zip(mids, index, strict=True)])

    def in_remaining(self, points: np.ndarray) -> np.ndarray:
        """Whether each point lies in A_0 (not inside a removed ball)."""
        points = np.atleast_2d(points)
        if len(self.removed_radii) == 0:
            return np.ones(len(points), dtype=bool)
        dist = np.abs(points[:, None, :] - self.removed_centers[None]).max(axis=2)
        return ~(dist <= self.removed_radii[None, :]).any(axis=1)

    def covered(self, points: np.ndarray) -> np.ndarray:
        """Whether each point lies in some active ball B(v, r(v))."""
        points = np.atleast_2d(points)
        dist = np.abs(points[:, None, :] - self.active_centers[None]).max(axis=2)
        return (dist <= self.radii()[None, :]).any(axis=1)


def _largest_gap(
    lo: float, hi: float, lefts: list[float], rights: list[float]
) -> np.ndarray | None:
    """p = 1: the midpoint of the widest part of [lo, hi] outside the closed intervals, or None.

    A sweep over the intervals sorted by left end; the same answer as the cell method, whose
    cells in one dimension are exactly these gaps.
    """
    best, best_width = None, 1e-12
    reach = lo
    for left, right in sorted(zip(lefts, rights, strict=True)):
        if left > reach:
            end = min(left, hi)
            if end - reach > best_width:
                best, best_width = (reach + end) / 2.0, end - reach
        if right > reach:
            reach = right
        if reach >= hi:
            break
    if hi - reach > best_width:
        best = (reach + hi) / 2.0
    return None if best is None else np.array([best])
