"""Adaptive discretisation of [0, 1]^p by zooming: 000/003 Algorithm 1 and Kleinberg et al. 2019.

The space is the unit cube A = [0, 1]^p (each hyperparameter interval [a_i, b_i] is rescaled
to [0, 1], 000 Section 4), the metric is the sup-norm Dist(u, v) = max_i |u_i - v_i|, so a
confidence ball B(v, r) is an axis-aligned cube; for p = 1 it is the interval [v - r, v + r].
With cubes the question "do the active balls still cover what remains of the space?" has an
exact answer at a cost that depends only on the active set (see ``uncovered_point``), which
makes the activation rule of Algorithm 1 (line 7) exact in any dimension p.

Per active arm v: n(v) pulls since the last restart, the running mean f_hat(v), the
confidence radius r(v) = sqrt(13 tau0^2 ln T / (2 n(v))) and the Thompson-sampling scale
s(v) = s0 / sqrt(n(v)) with s0 = sqrt(52 pi tau0^2 ln T) (000 Eq. 5).

A round follows the algorithm box line by line: removal of a dominated arm (lines 4-5), then,
if the active balls no longer cover A_0, the activation of ONE uncovered point which is
pulled in that same round (lines 7-8), else the Thompson-sampling selection (line 10); the
update (line 12) comes after the reward. A new epoch (line 3) starts with n_1(v) = 1 and
f_hat(v) = 0 for every v of the initial cover J: one pseudo-observation of reward 0, so the
first update of v gives f_hat = y / 2 and n = 2.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Sequence

import numpy as np

CLIP = 1.0 / math.sqrt(2.0 * math.pi)
"""Lower clip of the Thompson draw: Z = max(1/sqrt(2 pi), N(0, 1)) (000 Eq. 6)."""

RULES = ("ts", "ucb")
GAP_RULES = ("widest", "released")


class ZoomingCore:
    """The active set, statistics and covering of one zooming learner on [0, 1]^p.

    ``rule='ts'``: Zooming TS of 000 Algorithm 1, I(v) = f_hat(v) + s(v) Z with
    Z = max(1/sqrt(2 pi), N(0, 1)) (Eq. 6), and the removal rule (line 4).
    ``rule='ucb'``: the stationary Zooming algorithm of Kleinberg et al. (2019), index
    I(v) = f_hat(v) + 2 r(v), no removal; its arms start unpulled (no pseudo-observation).

    A round is ``remove_dominated()`` (lines 4-5), ``select()`` (lines 7-10: one activation
    if A_0 is not covered, else the argmax of I), then ``update(reward)`` (line 12).
    ``restart()`` starts a new epoch (line 3).

    Options of the authors' released code (all off by default): ``pseudo_observation=False``
    starts an epoch's arms unpulled (pulled first, their mean the first reward);
    ``random_start`` starts an epoch from one uniformly random point of ``start_range``^p
    (the rest of A is then covered one activation per round); ``gap_rule='released'``
    (p = 1) activates the midpoint of the gap at the left edge of [0, 1] first, then the one
    at the right edge, then the leftmost inner gap (``check_1d`` of the released code)
    instead of the midpoint of the widest gap (for p > 1 the widest rule stays: the
    released ``check_2d`` tests nine fixed vertices only and is not ported).

    Covering is tracked exactly and cheaply: between rounds only the pulled arm's ball
    shrinks (a removal takes B(u, r(u)) out of A_0 together with the ball), so A_0 stays
    covered outside the boxes B(v, old radius) of the shrinks not yet checked; these
    ``pending`` boxes are the only places ``select`` looks for an uncovered point.
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
        pseudo_observation: bool | None = None,
        start_range: tuple[float, float] = (0.0, 1.0),
        gap_rule: str = "widest",
    ) -> None:
        if dim < 1:
            raise ValueError(f"zooming needs at least one dimension, got {dim}")
        if not tau0 > 0:
            raise ValueError(f"tau0 (the reward's sub-Gaussian parameter) must be > 0, got {tau0}")
        if rule not in RULES:
            raise ValueError(f"unknown zooming rule '{rule}'; choose one of {RULES}")
        if gap_rule not in GAP_RULES:
            raise ValueError(f"unknown gap_rule '{gap_rule}'; choose one of {GAP_RULES}")
        lo, hi = (float(v) for v in start_range)
        if not 0.0 <= lo <= hi <= 1.0:
            raise ValueError(
                f"start_range must be [lo, hi] with 0 <= lo <= hi <= 1 (a part of the unit "
                f"interval the first point is drawn from), got {start_range}"
            )
        self.dim = int(dim)
        self.rng = rng
        self.rule = rule
        self.ts_draw = bool(ts_draw)
        self.random_start = bool(random_start)
        self.start_range = (lo, hi)
        self.gap_rule = gap_rule
        self.removal = (rule == "ts") if removal is None else bool(removal)
        self.pseudo_observation = (
            (rule == "ts") if pseudo_observation is None else bool(pseudo_observation)
        )
        log_t = math.log(max(int(horizon), 2))
        if not (radius_constant > 0 and ts_constant > 0):
            raise ValueError(
                f"radius_constant and ts_constant must be > 0, got {radius_constant}, {ts_constant}"
            )
        self.radius_scale = math.sqrt(radius_constant * tau0**2 * log_t)  # r(v) = this / sqrt(n)
        ts_log = log_t if ts_log_horizon else 1.0
        self.ts_scale = math.sqrt(ts_constant * tau0**2 * ts_log)  # s0
        # the index bonus per unit 1/sqrt(n): s0 (TS) or 2 r(1) (UCB)
        self.bonus_scale = self.ts_scale if rule == "ts" else 2.0 * self.radius_scale
        self.restart()

    # -- state -------------------------------------------------------------------------
    def restart(self) -> None:
        """A new epoch (line 3): A_0 = A and an active set J whose balls B(v, r_1(v)) cover A,
        with n_1(v) = 1 and f_hat(v) = 0 for v in J (a pseudo-observation of reward 0).

        Line 3 leaves J free. By default J is the centres of the k^p cubes of side
        1/k <= 2 r(1) (one point, the centre of A, when r(1) >= 1/2). With ``random_start``
        J is one uniformly random point of ``start_range``^p; if its ball does not cover A,
        the activation rule covers the rest, one point per round.
        """
        r1 = self.radius_scale
        k = max(1, math.ceil(1.0 / (2.0 * r1)))  # k^p cubes of side 1/k <= 2 r(1)
        capacity = max(16, 2 * k**self.dim)
        self.centers = np.zeros((capacity, self.dim))
        self.counts = np.zeros(capacity)
        self.means = np.zeros(capacity)
        self.radius = np.zeros(capacity)  # r(v), that of one pull while n(v) = 0
        self.bonus = np.zeros(capacity)  # s(v) (TS) or 2 r(v) (UCB)
        self.lower = np.zeros(capacity)  # f_hat - r, -inf while unpulled
        self.upper = np.zeros(capacity)  # f_hat + 2 r, +inf while unpulled
        self.m = 0
        self.unpulled = 0
        self.removed_centers = np.zeros((0, self.dim))
        self.removed_radii = np.zeros(0)
        self.pending: list[tuple[np.ndarray, np.ndarray]] = []
        self.last = -1
        self.removals = 0
        self.activations = 0  # activations by the rule of line 7 (not the initial cover)
        start = 1.0 if self.pseudo_observation else 0.0
        if self.random_start:
            lo, hi = self.start_range
            self._activate(lo + (hi - lo) * self.rng.uniform(size=self.dim), start)
            self.pending.append((np.zeros(self.dim), np.ones(self.dim)))
            return
        axis = (np.arange(k) + 0.5) / k
        for point in itertools.product(axis, repeat=self.dim):
            self._activate(np.asarray(point, dtype=float), start)

    def _grow(self) -> None:
        grow = len(self.counts)
        self.centers = np.concatenate([self.centers, np.zeros((grow, self.dim))])
        for name in ("counts", "means", "radius", "bonus", "lower", "upper"):
            setattr(self, name, np.concatenate([getattr(self, name), np.zeros(grow)]))

    def _activate(self, point: np.ndarray, count: float = 0.0) -> int:
        """Add v to J with n(v) = ``count`` and f_hat(v) = 0 (000 Section 4.1)."""
        if self.m == len(self.counts):
            self._grow()
        i = self.m
        self.centers[i] = point
        self.counts[i] = count
        self.means[i] = 0.0
        self.m += 1
        if count == 0:
            self.unpulled += 1
        self._refresh(i)
        return i

    def _refresh(self, i: int) -> None:
        """Recompute the derived statistics of arm i after its n or f_hat changed."""
        n = self.counts[i]
        root = math.sqrt(max(n, 1.0))
        r = self.radius_scale / root
        self.radius[i] = r
        self.bonus[i] = self.bonus_scale / root
        f = self.means[i]
        self.lower[i] = f - r if n > 0 else -math.inf
        self.upper[i] = f + 2.0 * r if n > 0 else math.inf

    def set_statistics(self, i: int, count: float, mean: float) -> None:
        """Set n(v) and f_hat(v) of arm i directly (white-box tests, hand-built states);
        the covering is then re-checked everywhere at the next ``select``."""
        if (self.counts[i] == 0) != (count == 0):
            self.unpulled += 1 if count == 0 else -1
        self.counts[i] = float(count)
        self.means[i] = float(mean)
        self._refresh(i)
        self.invalidate_cover()

    def invalidate_cover(self) -> None:
        """Make the next ``select`` check all of A for an uncovered point."""
        self.pending = [(np.zeros(self.dim), np.ones(self.dim))]

    def radii(self) -> np.ndarray:
        """r(v) of every active arm (an unpulled arm has the radius of one pull)."""
        return self.radius[: self.m].copy()

    @property
    def active_centers(self) -> np.ndarray:
        return self.centers[: self.m]

    # -- one round ---------------------------------------------------------------------
    def remove_dominated(self) -> bool:
        """Lines 4-5: if f_hat(v) - f_hat(u) > r(v) + 2 r(u) for some pulled u, v in J, drop u
        from J and B(u, r(u)) from A_0. One arm per round, the most dominated one.

        u is dominated by some v iff max_v (f_hat(v) - r(v)) > f_hat(u) + 2 r(u); the
        maximiser cannot be u itself (f - r <= f + 2r), so max(lower) > min(upper) says
        whether any arm is dominated, two reductions per round.
        """
        if not self.removal or self.m < 2:
            return False
        lower, upper = self.lower[: self.m], self.upper[: self.m]
        best = lower.max()
        if not best > upper.min():
            return False
        u = int(np.argmax(best - upper))
        self.removed_centers = np.vstack([self.removed_centers, self.centers[u]])
        self.removed_radii = np.append(self.removed_radii, self.radius[u])
        self._delete(u)
        self.removals += 1
        return True

    def _delete(self, i: int) -> None:
        last = self.m - 1
        if self.counts[i] == 0:
            self.unpulled -= 1
        if i != last:
            self.centers[i] = self.centers[last]
            for array in (self.counts, self.means, self.radius, self.bonus, self.lower, self.upper):
                array[i] = array[last]
        self.m -= 1
        if self.last == i:
            self.last = -1
        elif self.last == last:
            self.last = i

    def index(self) -> np.ndarray:
        """I(v) of every active arm: Eq. 6 (TS) or f_hat + 2 r (UCB); +inf when unpulled."""
        m = self.m
        if self.rule == "ts" and self.ts_draw:
            z = self.rng.standard_normal(m)
            np.maximum(z, CLIP, out=z)
            score = self.means[:m] + self.bonus[:m] * z
        else:
            score = self.means[:m] + self.bonus[:m]
        if self.unpulled:
            score[self.counts[:m] == 0] = np.inf
        return score

    def select(self) -> np.ndarray:
        """Lines 7-10: if A_0 is not covered, activate one uncovered point and pull it;
        else pull an arm not yet pulled (only without pseudo-observations), else argmax I."""
        point = self.activation_point()
        if point is not None:
            self.last = self._activate(point)
            self.activations += 1
        elif self.unpulled:
            self.last = int(np.flatnonzero(self.counts[: self.m] == 0)[0])
        else:
            self.last = int(np.argmax(self.index()))
        return self.centers[self.last].copy()

    def update(self, reward: float) -> None:
        """Line 12: n(v_t) += 1 and the running mean; a shrunken ball marks its old box."""
        i = self.last
        if i < 0:
            raise RuntimeError("update called before select")
        old_radius = self.radius[i]
        if self.counts[i] == 0:
            self.unpulled -= 1
        self.counts[i] += 1.0
        self.means[i] += (float(reward) - self.means[i]) / self.counts[i]
        self._refresh(i)
        new_radius = self.radius[i]
        if new_radius < old_radius:
            self._mark_shrink(self.centers[i], old_radius, new_radius)

    # -- covering ----------------------------------------------------------------------
    def _mark_shrink(self, center: np.ndarray, old: float, new: float) -> None:
        """Only B(v, old) \\ B(v, new) can have lost cover: keep its box for the next check,
        unless a cheap test shows every piece of it still inside one ball."""
        if self.dim == 1:  # scalars: this runs every round, on a handful of arms
            c = float(center[0])
            lo, hi = max(c - old, 0.0), min(c + old, 1.0)
            pieces = [(a, b) for a, b in ((lo, c - new), (c + new, hi)) if b > a]
            if not pieces or self._pieces_inside_balls(pieces):
                return
            self.pending.append((np.array([lo]), np.array([hi])))
            return
        lo = np.maximum(center - old, 0.0)
        hi = np.minimum(center + old, 1.0)
        if (center - new <= lo).all() and (center + new >= hi).all():
            return  # the shrunken ball still holds the whole region it covered
        self.pending.append((lo, hi))

    def _pieces_inside_balls(self, pieces: list[tuple[float, float]]) -> bool:
        """p = 1: whether each interval [a, b] lies inside one active or removed interval (a
        sufficient test for cover; plain Python, as the active set is a handful of arms)."""
        m = self.m
        centers = self.centers[:m, 0].tolist() + self.removed_centers[:, 0].tolist()
        radii = self.radius[:m].tolist() + self.removed_radii.tolist()
        for a, b in pieces:
            for c, r in zip(centers, radii, strict=True):
                if c - r <= a and c + r >= b:
                    break
            else:
                return False
        return True

    def activation_point(self) -> np.ndarray | None:
        """Line 7: a point of A_0 in no active ball, or None when A_0 is covered.

        Exact: A_0 is covered outside the pending boxes; a pending box found covered is
        dropped, one with an uncovered point stays pending until it is covered.
        """
        while self.pending:
            lo, hi = self.pending[-1]
            point = self.uncovered_point(lo, hi)
            if point is None:
                self.pending.pop()
                continue
            if self.gap_rule == "released" and self.dim == 1:
                return self._released_gap(point)
            return point
        return None

    def _released_gap(self, fallback: np.ndarray) -> np.ndarray:
        """The released ``check_1d``: intervals sorted by left end; the left edge's gap, then
        the right edge's, then the first inner gap; the midpoint of that gap."""
        radii = np.concatenate([self.radius[: self.m], self.removed_radii])
        centers = np.concatenate([self.centers[: self.m, 0], self.removed_centers[:, 0]])
        order = np.argsort(centers - radii, kind="stable")
        lefts, rights = (centers - radii)[order], (centers + radii)[order]
        if lefts[0] > 0.0:
            return np.array([lefts[0] / 2.0])
        if rights.max() < 1.0:
            return np.array([(rights.max() + 1.0) / 2.0])
        reach = rights[0]
        for left, right in zip(lefts[1:].tolist(), rights[1:].tolist(), strict=True):
            if left > reach:
                return np.array([(reach + left) / 2.0])
            reach = max(reach, right)
        return fallback  # a gap narrower than the exact check's 1e-12 tolerance

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
        radii = np.concatenate([self.radius[: self.m], self.removed_radii])[:, None]
        centers = np.concatenate([self.centers[: self.m], self.removed_centers])
        lower = centers - radii
        upper = centers + radii
        if self.dim == 1:  # a sweep over intervals, no cells needed
            return _largest_gap(
                float(lo[0]), float(hi[0]), lower[:, 0].tolist(), upper[:, 0].tolist()
            )
        meets = ((lower <= hi) & (upper >= lo)).all(axis=1)
        lower, upper = lower[meets], upper[meets]
        if self.dim == 2:  # nearly every call (a shrunken ball's box): one matrix product
            covered = _cells_covered_2d(lower, upper, lo, hi)
        else:  # one ball holds the whole box
            covered = ((lower <= lo).all(axis=1) & (upper >= hi).all(axis=1)).any()
        return None if covered else _widest_uncovered_cell(lower, upper, lo, hi)

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


def _cells_covered_2d(lower: np.ndarray, upper: np.ndarray, lo: np.ndarray, hi: np.ndarray) -> bool:
    """p = 2: whether every cell of the box [lo, hi] has its midpoint in a cube (lower,
    upper: (k, 2)), i.e. :func:`_widest_uncovered_cell` returns None.

    The same cells (each dimension's sorted faces, clipped to the box, repeats giving gaps
    of 0) and comparisons as the cell method, in a fixed handful of array operations: cube
    j holds the midpoint (a, b) iff it holds a in the first dimension and b in the second,
    so the number of cubes holding each cell's midpoint is the product H_1 H_2' of the
    (cells, k) 0/1 holding matrices (tests/test_tuners_zooming.py checks the two agree).
    """
    cuts = np.concatenate([lower, upper, lo[None], hi[None]])  # (2k + 2, 2)
    np.minimum(np.maximum(cuts, lo, out=cuts), hi, out=cuts)  # np.clip's numbers, faster
    cuts.sort(axis=0)
    mids = (cuts[:-1] + cuts[1:]) / 2.0  # (2k + 1, 2); a repeated face makes a gap of 0
    kept = cuts[1:] - cuts[:-1] > 1e-12
    holds = ((lower <= mids[:, None, :]) & (mids[:, None, :] <= upper)).astype(float)
    holding = holds[:, :, 0] @ holds[:, :, 1].T  # cubes holding cell (i, j)'s midpoint
    return not ((holding == 0.0) & kept[:, 0, None] & kept[None, :, 1]).any()


def _widest_uncovered_cell(
    lower: np.ndarray, upper: np.ndarray, lo: np.ndarray, hi: np.ndarray
) -> np.ndarray | None:
    """The midpoint of the widest cell of the box [lo, hi] whose midpoint lies in none of
    the cubes [lower_j, upper_j] (lower, upper: (k, p)), or None (``uncovered_point``).
    Cells are ordered dimension by dimension; the first of equal volumes is returned."""
    covered = None
    volume = None
    mids = []
    for d in range(lo.shape[0]):
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


class BatchZooming:
    """S seeds' :class:`ZoomingCore`, their per-arm statistics stacked as (S, capacity).

    The steps every round takes run for all seeds at once: the test for a dominated arm
    (lines 4-5), the Thompson-sampling choice when nothing needs activating (line 10,
    each seed's normals from its own generator), the update of the pulled arm (line 12)
    and the test whether its shrunken ball leaves part of A_0 uncovered. What only some
    seeds need in a round (a removal, an activation, the first pull of an arm, a box to
    check for cover) runs in that seed's own core, which works on its views of the
    stacks, so each seed's numbers are those of its core alone.
    """

    ARRAYS = ("centers", "counts", "means", "radius", "bonus", "lower", "upper")

    def __init__(self, cores: Sequence[ZoomingCore]) -> None:
        self.cores = list(cores)
        first = self.cores[0]
        self.dim = first.dim
        self.rule = first.rule
        self.removal = first.removal
        self.ts_draw = first.ts_draw
        self.radius_scale = first.radius_scale
        self.bonus_scale = first.bonus_scale
        self.seeds = np.arange(len(self.cores))
        self.rngs = [core.rng for core in self.cores]
        self._stack()

    def _stack(self) -> None:
        """Stack the cores' arrays (grown to one capacity) and bind each core to its views."""
        capacity = max(len(core.counts) for core in self.cores)
        for core in self.cores:
            while len(core.counts) < capacity:
                core._grow()
        for name in self.ARRAYS:
            setattr(self, name, np.stack([getattr(core, name) for core in self.cores]))
        for s, core in enumerate(self.cores):
            for name in self.ARRAYS:
                setattr(core, name, getattr(self, name)[s])
        self.slots = np.arange(capacity)

    def _restack_if_grown(self) -> None:
        if any(len(core.counts) != len(self.slots) for core in self.cores):
            self._stack()

    def restart(self) -> None:
        """A new epoch (line 3) for every seed."""
        for core in self.cores:
            core.restart()
        self._stack()

    def active(self) -> np.ndarray:
        """(S,) the number of active arms m of each seed."""
        return np.array([core.m for core in self.cores])

    def remove_dominated(self) -> None:
        """Lines 4-5 for every seed: the seeds with a dominated arm remove it in their core."""
        if not self.removal:
            return
        m = self.active()
        live = self.slots < m[:, None]
        best = np.where(live, self.lower, -math.inf).max(axis=1)
        worst = np.where(live, self.upper, math.inf).min(axis=1)
        for s in np.flatnonzero((m >= 2) & (best > worst)).tolist():
            self.cores[s].remove_dominated()

    def select(self) -> np.ndarray:
        """Lines 7-10 for every seed; the chosen points, (S, p)."""
        plain = []
        for s, core in enumerate(self.cores):
            if core.pending or core.unpulled:
                core.select()
            else:
                plain.append(s)
        self._restack_if_grown()
        if plain:
            self._choose(plain)
        last = np.array([core.last for core in self.cores])
        return self.centers[self.seeds, last]

    def _choose(self, seeds: list[int]) -> None:
        """argmax I(v) (``ZoomingCore.index``) for ``seeds``, none with an unpulled arm."""
        m = np.array([self.cores[s].m for s in seeds])
        score = self.means[seeds] + self.bonus[seeds] * self._draws(seeds, m)
        score[self.slots >= m[:, None]] = -math.inf
        for s, arm in zip(seeds, score.argmax(axis=1).tolist(), strict=True):
            self.cores[s].last = arm

    def _draws(self, seeds: list[int], m: np.ndarray) -> np.ndarray | float:
        """Z = max(1/sqrt(2 pi), N(0, 1)) per active arm, m[s] normals from each seed's own
        generator (Eq. 6); 1 for the index without a draw."""
        if not (self.rule == "ts" and self.ts_draw):
            return 1.0
        z = np.zeros((len(seeds), len(self.slots)))
        for row, (s, count) in enumerate(zip(seeds, m.tolist(), strict=True)):
            z[row, :count] = self.rngs[s].standard_normal(count)
        return np.maximum(z, CLIP, out=z)

    def update(self, rewards: np.ndarray) -> None:
        """Line 12 for every seed: n(v_t) += 1, the running mean, the derived statistics; a
        shrunken ball whose lost ring no single ball holds is marked in its core."""
        seeds, arm = self.seeds, np.array([core.last for core in self.cores])
        old = self.radius[seeds, arm]
        for s in np.flatnonzero(self.counts[seeds, arm] == 0).tolist():
            self.cores[s].unpulled -= 1
        self.counts[seeds, arm] += 1.0
        n = self.counts[seeds, arm]
        self.means[seeds, arm] += (rewards - self.means[seeds, arm]) / n
        root = np.sqrt(np.maximum(n, 1.0))
        new = self.radius_scale / root
        f = self.means[seeds, arm]
        self.radius[seeds, arm] = new
        self.bonus[seeds, arm] = self.bonus_scale / root
        self.lower[seeds, arm] = f - new
        self.upper[seeds, arm] = f + 2.0 * new
        shrunk = new < old
        if shrunk.any():
            self._mark_shrinks(arm, old, new, shrunk)

    def _mark_shrinks(
        self, arm: np.ndarray, old: np.ndarray, new: np.ndarray, shrunk: np.ndarray
    ) -> None:
        """``ZoomingCore._mark_shrink`` of the shrunk seeds: what the cheap tests settle for
        all seeds at once is settled here, the rest in the seed's core."""
        center = self.centers[self.seeds, arm]
        if self.dim == 1:
            held = self._ring_held(center[:, 0], old, new)
        else:
            lo, hi = np.maximum(center - old[:, None], 0.0), np.minimum(center + old[:, None], 1.0)
            held = (center - new[:, None] <= lo).all(axis=1) & (center + new[:, None] >= hi).all(
                axis=1
            )
        for s in np.flatnonzero(shrunk & ~held).tolist():
            self.cores[s]._mark_shrink(self.centers[s, arm[s]], old[s], new[s])

    def _ring_held(self, c: np.ndarray, old: np.ndarray, new: np.ndarray) -> np.ndarray:
        """p = 1: whether each piece of [c - old, c + old] (in [0, 1]) outside [c - new,
        c + new] lies inside one active interval (removed ones are the core's to test)."""
        lo, hi = np.maximum(c - old, 0.0), np.minimum(c + old, 1.0)
        live = self.slots < self.active()[:, None]
        left = self.centers[:, :, 0] - self.radius
        right = self.centers[:, :, 0] + self.radius
        held = np.ones(len(c), dtype=bool)
        for a, b in ((lo, c - new), (c + new, hi)):
            inside = (live & (left <= a[:, None]) & (right >= b[:, None])).any(axis=1)
            held &= inside | ~(b > a)
        return held
