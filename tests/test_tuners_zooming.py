"""Zooming TS (000/003 Algorithm 1): covering invariant, activation, removal, fast vs slow check."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest

from sweeper_tasks.bandit_tuning.tuners.zooming_core import (
    CLIP,
    ZoomingCore,
    _cells_covered_2d,
    _widest_uncovered_cell,
)


def lipschitz_reward(point: np.ndarray, rng: np.random.Generator) -> float:
    return 0.9 - 0.9 * float(np.abs(point - 0.3).max()) + 0.3 * rng.standard_normal()


def grid(p: int, n: int) -> np.ndarray:
    axis = np.linspace(0.0, 1.0, n)
    return np.array(list(itertools.product(axis, repeat=p)))


def slow_uncovered(core: ZoomingCore, points: np.ndarray) -> np.ndarray:
    """The obvious check: every point of A_0 lies in some active ball (sup-norm)."""
    remaining = np.ones(len(points), dtype=bool)
    for c, r in zip(core.removed_centers, core.removed_radii, strict=True):
        remaining &= np.abs(points - c).max(axis=1) > r
    covered = np.zeros(len(points), dtype=bool)
    for c, r in zip(core.active_centers, core.radii(), strict=True):
        covered |= np.abs(points - c).max(axis=1) <= r
    return remaining & ~covered


def run_rounds(core: ZoomingCore, rounds: int, seed: int, check_every: int, fine: np.ndarray):
    """Play rounds; every ``check_every`` rounds compare, after the removal step, the exact
    whole-space check and the obvious grid check with what ``select`` then does."""
    rng = np.random.default_rng(seed)
    for t in range(rounds):
        core.remove_dominated()
        check = t % check_every == 0
        if check:
            exact = core.uncovered_point()  # over all of A, not only the pending boxes
            missing = slow_uncovered(core, fine)
            if exact is None:
                assert not missing.any()  # the obvious check agrees: A_0 is covered
            else:
                assert slow_uncovered(core, exact[None])[0]
        m, activations = core.m, core.activations
        point = core.select()
        if check:  # line 7: an activation iff A_0 is not covered, and at most one
            assert core.activations - activations == (exact is not None)
            assert core.m - m == (exact is not None)
        core.update(lipschitz_reward(point, rng))
        if check:
            yield t


@pytest.mark.parametrize("tau0", [0.05, 0.2])
def test_an_uncovered_space_activates_one_point_per_round_p1(tau0):
    core = ZoomingCore(1, 2000, np.random.default_rng(0), tau0=tau0)
    fine = grid(1, 4001)
    for _ in run_rounds(core, 2000, seed=1, check_every=1, fine=fine):
        pass
    assert core.activations > 3, "the radii shrank enough to force activations"


def test_an_uncovered_space_activates_one_point_per_round_p2():
    core = ZoomingCore(2, 3000, np.random.default_rng(0), tau0=0.05)
    fine = grid(2, 81)
    for _ in run_rounds(core, 3000, seed=2, check_every=7, fine=fine):
        pass
    assert core.activations > 4


def test_cell_method_and_grid_agree_on_random_configurations():
    """Fast path (cells) against the slow obvious one (a fine grid), p = 1, 2."""
    rng = np.random.default_rng(7)
    for p, n in [(1, 2001), (2, 161)]:
        fine = grid(p, n)
        for _ in range(40):
            core = ZoomingCore(p, 100, rng, tau0=0.01)
            core.restart()
            core.m = 0
            core.radius_scale = 0.3
            for _ in range(int(rng.integers(1, 7))):
                i = core._activate(rng.random(p))
                core.set_statistics(i, int(rng.integers(1, 50)), 0.0)
            if rng.random() < 0.5:
                core.removed_centers = rng.random((2, p))
                core.removed_radii = rng.uniform(0.05, 0.2, 2)
            point = core.uncovered_point()
            missing = slow_uncovered(core, fine)
            if point is None:
                assert not missing.any()
            else:
                assert slow_uncovered(core, point[None])[0], "the point found is uncovered"


def test_the_quick_2d_cover_decision_agrees_with_the_cell_method():
    """p = 2: the one-product decision is "covered" exactly when the cell method finds no
    uncovered cell, on boxes half covered by cubes with shared faces (as the initial cover
    and a shrunken ball's box make them) and with random ones."""
    rng = np.random.default_rng(5)
    verdicts = []
    for _ in range(3000):
        k = int(rng.integers(1, 12))
        if rng.random() < 0.5:  # cubes on a lattice: faces meet exactly
            centers = rng.integers(0, 5, (k, 2)) / 4.0
            radii = np.full(k, rng.choice([0.125, 0.25]))
        else:
            centers, radii = rng.random((k, 2)), rng.uniform(0.02, 0.4, k)
        lower, upper = centers - radii[:, None], centers + radii[:, None]
        lo, hi = np.sort(rng.random((2, 2)), axis=0)
        if rng.random() < 0.3:  # the whole space, as a check of all of A
            lo, hi = np.zeros(2), np.ones(2)
        quick = _cells_covered_2d(lower, upper, lo, hi)
        assert quick == (_widest_uncovered_cell(lower, upper, lo, hi) is None)
        verdicts.append(quick)
    assert 200 < sum(verdicts) < 2800  # both answers were met often


def test_activation_picks_an_uncovered_point_and_pulls_it_in_that_round():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1)
    r1 = core.radius_scale
    assert core.m == 1 and core.centers[0, 0] == 0.5 and r1 > 0.5
    assert core.counts[0] == 1 and core.means[0] == 0  # line 3: n_1 = 1, f_hat = 0
    # Pull the only arm until its ball no longer covers [0, 1]: n > (r(1) / 0.5)^2,
    # n counting line 3's pseudo-observation.
    pulls = 0
    while core.m == 1:
        point = core.select()
        if core.m == 1:
            assert point[0] == 0.5
            core.update(0.5)
            pulls += 1
    assert pulls + 1 == math.floor((r1 / 0.5) ** 2) + 1
    # the round that found [0, 1] uncovered activated ONE point and pulls it now
    assert core.m == 2 and core.last == 1 and point[0] == core.centers[1, 0]
    assert abs(point[0] - 0.5) > core.radii()[0]  # outside the shrunken ball
    assert core.counts[1] == 0
    core.update(0.7)
    assert core.counts[1] == 1 and core.means[1] == 0.7  # an activated arm: no pseudo-obs
    rounds = 0
    while core.uncovered_point() is not None:  # the other side: one activation per round
        m = core.m
        point = core.select()
        assert core.m == m + 1 and point[0] == core.centers[m, 0]
        core.update(0.5)
        rounds += 1
    assert rounds >= 1


def test_removal_rule_drops_dominated_arms_and_their_balls():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1)
    core.m = 0
    for x, n in ((0.1, 400), (0.5, 400), (0.9, 25)):
        core.set_statistics(core._activate(np.array([x])), n, 0.0)
    r = core.radii()
    # f(v) - f(u) > r(v) + 2 r(u) for v = 0.5 (index 1), u = 0.1 (index 0) only.
    core.set_statistics(1, 400, r[1] + 2 * r[0] + 0.01)
    margin_far = core.means[1] - core.means[2] - (r[1] + 2 * r[2])
    assert margin_far < 0  # 0.9 is not dominated: its radius is too large
    assert core.remove_dominated()
    assert core.m == 2 and sorted(core.active_centers[:, 0]) == [0.5, 0.9]
    np.testing.assert_allclose(core.removed_centers[:, 0], [0.1])
    np.testing.assert_allclose(core.removed_radii, [r[0]])
    assert not core.in_remaining(np.array([[0.1 + 0.99 * r[0]]]))[0]
    assert not core.remove_dominated()  # nothing else qualifies
    # Exactly at the boundary nothing is removed (strict inequality).
    core2 = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1)
    core2.m = 0
    for x in (0.2, 0.8):
        core2.set_statistics(core2._activate(np.array([x])), 100, 0.0)
    rr = core2.radii()
    core2.set_statistics(1, 100, rr[1] + 2 * rr[0])
    assert not core2.remove_dominated()


def test_unpulled_arms_are_never_removed_and_ucb_never_removes():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1, rule="ucb")
    assert not core.removal
    core.m = 0
    for x, f in ((0.1, 0.0), (0.9, 10.0)):
        core.set_statistics(core._activate(np.array([x])), 1000, f)
    assert not core.remove_dominated()


def test_ts_index_uses_the_clipped_normal():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1)
    core.m = 0
    core.set_statistics(core._activate(np.array([0.5])), 4, 0.2)
    draws = np.array([core.index()[0] for _ in range(4000)])
    floor = 0.2 + core.ts_scale / 2 * CLIP
    assert draws.min() == pytest.approx(floor)
    # A share P(Z <= 1/sqrt(2 pi)) = Phi(0.3989) ~ 0.655 of the draws sits on the floor.
    on_floor = 0.5 * (1 + math.erf(CLIP / math.sqrt(2)))
    assert np.mean(np.isclose(draws, floor)) == pytest.approx(on_floor, abs=0.03)


def test_ucb_index_is_mean_plus_twice_the_radius():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.1, rule="ucb")
    core.m = 0
    core.set_statistics(core._activate(np.array([0.5])), 9, 0.3)
    assert core.index()[0] == pytest.approx(0.3 + 2 * core.radius_scale / 3)


def test_restart_covers_the_cube_with_r1_balls():
    core = ZoomingCore(2, 10**6, np.random.default_rng(0), tau0=0.02)  # r(1) < 1/2
    assert core.radius_scale < 0.5
    k = math.ceil(1 / (2 * core.radius_scale))
    assert core.m == k * k
    assert core.uncovered_point() is None


def test_per_round_state_does_not_grow_with_t():
    core = ZoomingCore(1, 50000, np.random.default_rng(0), tau0=0.3)
    sizes = []
    rng = np.random.default_rng(3)
    for t in range(10000):
        core.remove_dominated()
        core.update(lipschitz_reward(core.select(), rng))
        if t % 1000 == 999:
            sizes.append(core.m + len(core.removed_radii))
    assert max(sizes) < 40


def test_index_without_the_draw_is_the_upper_bound_f_plus_s():
    """ts_draw=False (the released code's index): f_hat + s0 / sqrt(n), no randomness."""
    rng = np.random.default_rng(0)
    core = ZoomingCore(
        1, 1000, rng, tau0=1.0, ts_constant=13.0, ts_draw=False, ts_log_horizon=False
    )
    assert core.ts_scale == pytest.approx(math.sqrt(13.0))  # no ln T in s0
    core.m = 0
    for x, n, f in ((0.2, 4, 0.5), (0.8, 16, 0.9)):
        core.set_statistics(core._activate(np.array([x])), n, f)
    state = rng.bit_generator.state
    expected = [0.5 + math.sqrt(13.0) / 2, 0.9 + math.sqrt(13.0) / 4]
    np.testing.assert_allclose(core.index(), expected)
    core.pending.clear()  # both arms' intervals hold [0, 1]: nothing to activate
    assert core.select()[0] == 0.2  # the less-pulled arm's wider bound wins
    assert rng.bit_generator.state == state  # no draw consumed


def test_ts_scale_keeps_ln_t_by_default():
    core = ZoomingCore(1, 1000, np.random.default_rng(0), tau0=0.5, ts_constant=13.0)
    assert core.ts_scale == pytest.approx(math.sqrt(13.0 * 0.25 * math.log(1000)))


@pytest.mark.parametrize(("p", "tau0"), [(1, 0.5), (1, 0.02), (2, 0.02)])
def test_random_start_covers_the_cube_from_a_random_point(p, tau0):
    starts = []
    rng = np.random.default_rng(5)
    for seed in (0, 1):
        core = ZoomingCore(p, 10**6, np.random.default_rng(seed), tau0=tau0, random_start=True)
        assert core.m == 1  # one random point; the activation rule covers the rest
        starts.append(core.active_centers[0].copy())
        rounds = 0
        while core.activation_point() is not None or rounds == 0:
            m = core.m
            core.update(lipschitz_reward(core.select(), rng))
            assert core.m - m <= 1
            rounds += 1
        assert core.uncovered_point() is None
        assert not slow_uncovered(core, grid(p, 41)).any()
        core.restart()  # every epoch starts from a new random point
        assert not np.allclose(core.active_centers[0], starts[-1])
    assert not np.allclose(starts[0], starts[1])
    if tau0 == 0.5:  # r(1) > 1: a single random point covers [0, 1]
        assert core.m == 1


def test_default_start_is_the_centre_of_the_cube_when_one_ball_covers_it():
    core = ZoomingCore(2, 1000, np.random.default_rng(0), tau0=0.5)
    assert core.m == 1
    np.testing.assert_allclose(core.active_centers[0], [0.5, 0.5])
