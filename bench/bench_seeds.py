"""Seeds until decided, simulated (docs/seeds.md): the error rate of the adaptive rule against
the naive one, and the seeds it spends against the effect size. Generic: paired differences
drawn from a distribution, no family's code.

Under the null (paired differences of mean 0, skewed and heavy-tailed as regrets are), a
comparison is wrongly decided when the rule calls it better or worse. The adaptive rule looks
after every ``step`` seeds from ``min`` to ``max`` and stops when the confidence sequence
(sweeper/confseq.py) excludes 0 or is narrower than the precision; the naive rule runs a
paired t-test after every seed from ``min`` and stops at the first p < alpha.

    python bench/bench_seeds.py [--sweeps 4000] [--out bench/results/seeds.md]

No timing: the rates are exact for their draws (seeded); the header (bench/harness.py) says
where and at which commit they were drawn.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from harness import Bench
from scipy import stats

from sweeper.confseq import EQUIVALENT, UNDECIDED, decide, interval

OUT = Path(__file__).resolve().parent / "results" / "seeds.md"
MIN, STEP, MAX, ALPHA = 5, 5, 40, 0.05
REFERENCE_MEAN, PRECISION = 10.0, 0.02  # precision relative to the reference's mean


NOISE = {
    "normal": "normal",
    "gamma4": "gamma, shape 4 (skewness 1: the most skewed paired differences of `main`, "
    "docs/results/main, have |skewness| 1.25, 90% of them under 0.8)",
    "lognormal0.5": "lognormal, sigma 0.5 (skewness 1.75)",
    "t3": "Student's t, 3 degrees of freedom (heavy tails: no fourth moment)",
    "lognormal1": "lognormal, sigma 1 (skewness 6.2: a stress case beyond any `main` comparison)",
}


def noise(rng: np.random.Generator, size: tuple[int, ...], kind: str) -> np.ndarray:
    """Mean-0, unit-variance paired differences of the distribution :data:`NOISE` names."""
    if kind == "normal":
        return rng.standard_normal(size)
    if kind == "gamma4":
        return (rng.gamma(4.0, 1.0, size) - 4.0) / 2.0
    if kind.startswith("lognormal"):
        sigma = float(kind.removeprefix("lognormal"))
        x = rng.lognormal(0.0, sigma, size)
        mean, var = np.exp(sigma**2 / 2), (np.exp(sigma**2) - 1) * np.exp(sigma**2)
        return (x - mean) / np.sqrt(var)
    return rng.standard_t(3, size) / np.sqrt(3.0)


def adaptive(d: np.ndarray) -> tuple[str, int]:
    """The adaptive rule on one comparison's differences (shape (MAX,)): state and seeds."""
    n = MIN
    while True:
        state = decide(interval(d[:n], ALPHA, n_star=MAX), PRECISION * REFERENCE_MEAN, True)
        if state != UNDECIDED or n >= MAX:
            return state, n
        n = min(n + STEP, MAX)


def naive(draws: np.ndarray) -> np.ndarray:
    """A paired t-test after every seed from MIN (draws: (sweeps, MAX)): whether each sweep
    was ever called significant."""
    n = np.arange(1, MAX + 1)
    mean = np.cumsum(draws, axis=1) / n
    var = (np.cumsum(draws**2, axis=1) - n * mean**2) / np.maximum(n - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        t = mean / np.sqrt(var / n)
    p = 2 * stats.t.sf(np.abs(t), np.maximum(n - 1, 1))
    return (p[:, MIN - 1 :] < ALPHA).any(axis=1)


def null_rates(sweeps: int, kind: str, rng: np.random.Generator) -> tuple[float, float, float]:
    """Wrong decisions under the null: adaptive rate, naive rate, adaptive mean seeds."""
    draws = noise(rng, (sweeps, MAX), kind)
    wrong, seeds = 0, 0
    for d in draws:
        state, n = adaptive(d)
        wrong += state not in (UNDECIDED, EQUIVALENT)
        seeds += n
    return wrong / sweeps, float(naive(draws).mean()), seeds / sweeps


def effect_rows(sweeps: int, kind: str, rng: np.random.Generator) -> list[str]:
    """Seeds used and share decided the right way, against the effect (in sd units)."""
    rows = []
    for effect in (0.0, 0.25, 0.5, 1.0, 2.0):
        draws = noise(rng, (sweeps, MAX), kind) - effect  # option below the reference
        results = [adaptive(d) for d in draws]
        right = np.mean([s == "better" for s, _ in results]) if effect else float("nan")
        seeds = np.mean([n for _, n in results])
        rows.append(f"| {effect:g} | {seeds:.1f} | {right:.3f} |")
    return rows


def main() -> None:
    global MIN
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--sweeps", type=int, default=4000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "scipy"))
    rng = np.random.default_rng(2026)
    lines = [
        f"Rule: min {MIN}, step {STEP}, max {MAX}, alpha {ALPHA}, precision {PRECISION} of a "
        f"reference mean of {REFERENCE_MEAN} (differences of unit variance). {args.sweeps} "
        "simulated comparisons per row, under the null (mean difference 0).",
        "",
        f"The mixture's rho is tuned for n* = max = {MAX} seeds. The naive rule: a paired "
        "t-test after every seed from min, decided at the first p < alpha.",
        "",
        "| noise | first look (min) | adaptive: wrongly decided | naive: wrongly decided "
        "| adaptive: mean seeds |",
        "|---|---|---|---|---|",
    ]
    for first in (5, 10):
        MIN = first
        for kind, text in NOISE.items():
            wrong, naive_wrong, seeds = null_rates(args.sweeps, kind, rng)
            row = f"| {text} | {first} | {wrong:.4f} | {naive_wrong:.4f} | {seeds:.1f} |"
            lines.append(row)
    se = np.sqrt(ALPHA * (1 - ALPHA) / args.sweeps)
    lines += ["", f"One standard error of a rate near alpha: {se:.4f}.", ""]
    MIN = 10
    lines += ["## Seeds against the effect (gamma noise, skewness 1)", "",
              "| effect (sd) | mean seeds | decided better |", "|---|---|---|",
              *effect_rows(args.sweeps // 4, "gamma4", rng)]  # fmt: skip
    bench.write(args.out, "# Seeds until decided: simulated error rates", lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
