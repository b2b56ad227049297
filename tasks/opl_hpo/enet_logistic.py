"""Elastic-net logistic regression by proximal Newton with coordinate descent (numba).

The lower-level fit of 001 Table 2's LR policies minimises scikit-learn's objective

    F(w, b) = C sum_i s_i logloss(y_i, x_i'w + b) + l1_ratio ||w||_1 + (1 - l1_ratio)/2 ||w||^2

(s_i sample weights, the intercept b unpenalised), strictly convex for l1_ratio < 1, so
every solver run to convergence returns the same (w, b). 001 names saga (max_iter 1000,
tol 1e-4); saga needs hundreds of epochs here and stops short of the minimiser. This
module minimises the same F / C the way glmnet does (Friedman, Hastie and Tibshirani 2010,
Section 3): at (w, b) a quadratic model of the loss with weights h_i = s_i p_i (1 - p_i)
is minimised with the penalty by cyclic coordinate descent, and the step to its minimiser
is taken with the backtracking rule of Tseng and Yun (2009), so that F decreases at every
outer step. It stops when no coordinate of a Newton step moves the linear predictor by
more than ``tol`` (sqrt(h_jj) |delta_j| <= tol). ``bench/bench_opl.py`` checks the
policies against saga run to convergence.
"""

from __future__ import annotations

import numpy as np
from scipy import sparse

try:
    from numba import njit
except ImportError:  # pragma: no cover - exercised only where numba is missing
    njit = None
HAVE_NUMBA = njit is not None

MISSING_NUMBA = (
    "policy_space.solver='cd' needs numba (pip install numba, or reinstall the project, "
    "which lists it); set policy_space.solver=saga to use scikit-learn's saga instead."
)


def _objective(eta, y, s, w, lam, alpha):
    loss = 0.0
    for i in range(eta.shape[0]):
        m = eta[i] if y[i] > 0 else -eta[i]
        loss += s[i] * (np.log1p(np.exp(-m)) if m > 0 else -m + np.log1p(np.exp(m)))
    penalty = 0.0
    for j in range(w.shape[0]):
        penalty += alpha * abs(w[j]) + 0.5 * (1.0 - alpha) * w[j] * w[j]
    return loss + lam * penalty


def _hessian(row_ptr, row_idx, row_val, h, p):
    """(p + 1, p + 1) X~' diag(h) X~ of the design with the intercept column appended."""
    H = np.zeros((p + 1, p + 1))
    for i in range(h.shape[0]):
        for k1 in range(row_ptr[i], row_ptr[i + 1]):
            j1, v1 = row_idx[k1], h[i] * row_val[k1]
            H[j1, p] += v1
            for k2 in range(row_ptr[i], row_ptr[i + 1]):
                H[j1, row_idx[k2]] += v1 * row_val[k2]
        H[p, p] += h[i]
    for j in range(p):
        H[p, j] = H[j, p]
    return H


def _model_value(H, c, lam, alpha, v, p):
    """q(v) = v'Hv / 2 - c'v + lam sum_j (alpha |v_j| + (1 - alpha) v_j^2 / 2), j < p."""
    value = 0.5 * (v @ (H @ v)) - c @ v
    for j in range(p):
        value += lam * (alpha * abs(v[j]) + 0.5 * (1.0 - alpha) * v[j] * v[j])
    return value


def _feature_sign(H, c, lam, alpha, v, p, max_steps):
    """Minimise the quadratic model q exactly by feature-sign search (Lee, Battle, Raina
    and Ng 2007, Algorithm 1), from ``v`` (intercept last, unpenalised): on the support A
    with signs sigma, the stationary point solves
    (H_AA + lam (1 - alpha) I) v_A = c_A - lam alpha sigma_A; the step to it stops at the
    best of it and the points where a coefficient crosses zero (q decreases at every
    step, so the search cannot cycle); when the support is consistent, the coordinate off
    it that most violates |c_j - (H v)_j| <= lam alpha enters with the sign of that
    gradient. Returns (ok, v): ok when every optimality condition holds."""
    v = v.copy()
    sign = np.zeros(p + 1)
    for j in range(p):
        sign[j] = 1.0 if v[j] > 0 else (-1.0 if v[j] < 0 else 0.0)
    threshold = lam * alpha
    for _ in range(max_steps):
        active = np.empty(p + 1, np.int64)
        m = 0
        for j in range(p):
            if sign[j] != 0.0:
                active[m] = j
                m += 1
        active[m] = p
        m += 1
        M = np.empty((m, m))
        rhs = np.empty(m)
        for a in range(m):
            for b in range(m):
                M[a, b] = H[active[a], active[b]]
            rhs[a] = c[active[a]]
            if active[a] < p:
                M[a, a] += lam * (1.0 - alpha) + 1e-12
                rhs[a] -= threshold * sign[active[a]]
        solution = np.linalg.solve(M, rhs)
        target = np.zeros(p + 1)
        consistent = True
        for a in range(m):
            target[active[a]] = solution[a]
            if active[a] < p and solution[a] * sign[active[a]] <= 0.0:
                consistent = False
        if consistent:
            v = target
        else:  # the best of target and the zero crossings on the segment v -> target
            best, best_value = target, _model_value(H, c, lam, alpha, target, p)
            for a in range(m):
                j = active[a]
                if j < p and v[j] != 0.0 and solution[a] * v[j] <= 0.0:
                    t = v[j] / (v[j] - solution[a])
                    point = v + t * (target - v)
                    point[j] = 0.0
                    value = _model_value(H, c, lam, alpha, point, p)
                    if value < best_value:
                        best, best_value = point, value
            v = best
            for j in range(p):
                if sign[j] != 0.0 and (v[j] == 0.0 or v[j] * sign[j] < 0.0):
                    v[j] = 0.0
                    sign[j] = 0.0
            continue
        gradient = c - H @ v
        worst, worst_j = threshold * (1.0 + 1e-10) + 1e-13, -1
        for j in range(p):
            if sign[j] == 0.0 and abs(gradient[j]) > worst:
                worst, worst_j = abs(gradient[j]), j
        if worst_j < 0:
            return True, v
        sign[worst_j] = 1.0 if gradient[worst_j] > 0 else -1.0
    return False, v


def _prox_newton(
    indptr,
    indices,
    data,
    row_ptr,
    row_idx,
    row_val,
    y,
    s,
    lam,
    alpha,
    tol,
    max_outer,
    max_inner,
    warm_sweeps,
):
    """(w, b, outer steps) minimising F / C with lam = 1 / C (see the module docstring)."""
    n, p = y.shape[0], indptr.shape[0] - 1
    w, b = np.zeros(p), 0.0
    eta = np.zeros(n)
    h, g, r = np.empty(n), np.empty(n), np.empty(n)
    hjj = np.empty(p)
    f_old = _objective(eta, y, s, w, lam, alpha)
    for outer in range(max_outer):
        for i in range(n):
            prob = 1.0 / (1.0 + np.exp(-eta[i]))
            h[i] = max(s[i] * prob * (1.0 - prob), 1e-12 * s[i])
            g[i] = s[i] * (y[i] - prob)
            r[i] = g[i]  # r = g - h (eta_new - eta): the quadratic model's residual
        for j in range(p):
            acc = 0.0
            for k in range(indptr[j], indptr[j + 1]):
                acc += h[indices[k]] * data[k] * data[k]
            hjj[j] = acc
        h_sum = h.sum()
        H = _hessian(row_ptr, row_idx, row_val, h, p)
        wb = np.empty(p + 1)
        wb[:p], wb[p] = w, b
        c = H @ wb
        for j in range(p):
            for k in range(indptr[j], indptr[j + 1]):
                c[j] += data[k] * g[indices[k]]
        c[p] += g.sum()
        w_new, b_new = w.copy(), b
        for sweep in range(max_inner):
            largest = 0.0
            for j in range(p):
                u = hjj[j] * w_new[j]
                for k in range(indptr[j], indptr[j + 1]):
                    u += data[k] * r[indices[k]]
                threshold = lam * alpha
                shrunk = (
                    u - threshold if u > threshold else (u + threshold if u < -threshold else 0.0)
                )
                value = shrunk / (hjj[j] + lam * (1.0 - alpha))
                delta = value - w_new[j]
                if delta != 0.0:
                    for k in range(indptr[j], indptr[j + 1]):
                        r[indices[k]] -= h[indices[k]] * data[k] * delta
                    w_new[j] = value
                    largest = max(largest, hjj[j] * delta * delta)
            delta = r.sum() / h_sum
            b_new += delta
            for i in range(n):
                r[i] -= h[i] * delta
            largest = max(largest, h_sum * delta * delta)
            if largest <= 0.01 * tol * tol:
                break
            if sweep + 1 >= warm_sweeps:  # CD finds the support early, then crawls
                vb = np.empty(p + 1)
                vb[:p], vb[p] = w_new, b_new
                ok, vb = _feature_sign(H, c, lam, alpha, vb, p, 4 * (p + 1))
                if ok:
                    w_new, b_new = vb[:p].copy(), vb[p]
                    break
        direction = w_new - w
        step_b = b_new - b
        change = np.sqrt(h_sum) * abs(step_b)
        for j in range(p):
            change = max(change, np.sqrt(hjj[j]) * abs(direction[j]))
        x_dir = np.full(n, step_b)
        for j in range(p):
            if direction[j] != 0.0:
                for k in range(indptr[j], indptr[j + 1]):
                    x_dir[indices[k]] += data[k] * direction[j]
        # Tseng and Yun's sufficient decrease: gradient . step + penalty change
        decrease = -(g * x_dir).sum()
        for j in range(p):
            decrease += lam * (
                alpha * (abs(w_new[j]) - abs(w[j]))
                + 0.5 * (1.0 - alpha) * (w_new[j] * w_new[j] - w[j] * w[j])
            )
        t = 1.0
        f_new = f_old
        for _ in range(60):
            w_try = w + t * direction
            f_new = _objective(eta + t * x_dir, y, s, w_try, lam, alpha)
            if f_new <= f_old + 1e-4 * t * decrease or t < 1e-12:
                break
            t *= 0.5
        w = w + t * direction
        b = b + t * step_b
        eta = eta + t * x_dir
        f_old = f_new
        if change * t <= tol:
            return w, b, outer + 1
    return w, b, max_outer


if njit is not None:
    _objective = njit(cache=True)(_objective)
    _hessian = njit(cache=True)(_hessian)
    _model_value = njit(cache=True)(_model_value)
    _feature_sign = njit(cache=True)(_feature_sign)
    _prox_newton = njit(cache=True)(_prox_newton)


def fit_enet_logistic(
    X: sparse.spmatrix,
    y: np.ndarray,
    C: float,
    l1_ratio: float,
    sample_weight: np.ndarray | None = None,
    tol: float = 1e-8,
    max_outer: int = 200,
    max_inner: int = 100_000,
) -> tuple[np.ndarray, float, int]:
    """Minimise scikit-learn's elastic-net logistic objective (module docstring).

    Parameters
    ----------
    X : (n, p) design, any scipy sparse format (converted to CSC).
    y : (n,) labels in {0, 1}.
    C : inverse regularisation (> 0); l1_ratio : the elastic-net mixing in [0, 1].
    sample_weight : (n,) non-negative weights, or None (all 1).

    Returns
    -------
    (w, b, steps): the (p,) coefficients, the intercept and the outer Newton steps taken
    (``max_outer``: stopped before ``tol`` was reached).
    """
    if njit is None:
        raise ValueError(MISSING_NUMBA)
    rows = sparse.csr_matrix(X, dtype=np.float64)
    X = sparse.csc_matrix(X, dtype=np.float64)
    X.sort_indices()
    weights = np.ones(X.shape[0]) if sample_weight is None else np.asarray(sample_weight, float)
    return _prox_newton(
        X.indptr.astype(np.int64),
        X.indices.astype(np.int64),
        X.data,
        rows.indptr.astype(np.int64),
        rows.indices.astype(np.int64),
        rows.data,
        np.asarray(y, dtype=np.float64),
        weights,
        1.0 / float(C),
        float(l1_ratio),
        float(tol),
        int(max_outer),
        int(max_inner),
        3,
    )
