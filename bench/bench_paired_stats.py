"""The report's paired statistics under the null, simulated (docs/reports.md, "Paired
statistics"): how often a table of many comparisons shows a false positive with raw and with
Holm-adjusted Wilcoxon p-values, and how often, after seeds until decided stopped adaptively,
the fixed-n t interval and the confidence sequence exclude 0. Generic: paired differences
drawn from a distribution, no family's code.

A table is ``groups`` groups of ``options`` options each against one baseline, paired by
seed: an option's differences share the baseline's draw of its group (as the tuners of one
algorithm and dataset share CDT's), so its comparisons are correlated, as a report's are.

    python bench/bench_paired_stats.py [--tables 2000] [--out bench/results/paired_stats.md]

No timing: the rates are exact for their draws (seeded); the header (bench/harness.py) says
where and at which commit they were drawn.
"""

from __future__ import annotations

import argparse
import warnings
from pathlib import Path

import numpy as np
from harness import Bench
from scipy import stats

from sweeper.confseq import UNDECIDED, decide, interval
from sweeper.report.stats import holm, paired_difference

OUT = Path(__file__).resolve().parent / "results" / "paired_stats.md"
ALPHA = 0.05
LAYOUTS = {"main (14 groups x 3 options = 42 comparisons)": (14, 3),
           "a user's (2 groups x 3 options = 6)": (2, 3)}  # fmt: skip


def table_p_values(rng: np.random.Generator, groups: int, options: int, seeds: int,
                   skew: bool) -> np.ndarray:  # fmt: skip
    """The Wilcoxon p-values of one null table: shape (groups * options,)."""
    draw = (lambda size: (rng.gamma(4.0, 1.0, size) - 4.0) / 2.0) if skew else rng.standard_normal
    p = []
    for _ in range(groups):
        base = draw(seeds)
        for _ in range(options):
            d = draw(seeds) - base
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                p.append(float(stats.wilcoxon(d).pvalue))
    return np.asarray(p)


def family_rates(tables: int, groups: int, options: int, seeds: int, skew: bool,
                 rng: np.random.Generator) -> tuple[float, float]:  # fmt: skip
    """The share of null tables with any raw p < alpha, and with any Holm p < alpha."""
    raw = holm_any = 0
    for _ in range(tables):
        p = table_p_values(rng, groups, options, seeds, skew)
        raw += bool((p < ALPHA).any())
        holm_any += bool((holm(p) < ALPHA).any())
    return raw / tables, holm_any / tables


def adaptive_rates(comparisons: int, rng: np.random.Generator, first: int = 10, step: int = 5,
                   most: int = 40) -> tuple[float, float, float]:  # fmt: skip
    """Seeds until decided under the null (sweeper/adaptive.py's rule on one comparison):
    the share whose confidence sequence wrongly decided it, the share whose fixed-n 95% t
    interval at the seeds it stopped at excludes 0, and the mean seeds."""
    cs_wrong = t_wrong = seeds = 0
    for _ in range(comparisons):
        d = rng.standard_normal(most)
        n = first
        while True:
            found = interval(d[:n], ALPHA, n_star=most)
            state = decide(found, 0.02 * 10.0, True)
            if state != UNDECIDED or n >= most:
                break
            n = min(n + step, most)
        cs_wrong += state in ("better", "worse")
        t = paired_difference(d[:n])
        t_wrong += not (t.ci_low <= 0 <= t.ci_high)
        seeds += n
    return cs_wrong / comparisons, t_wrong / comparisons, seeds / comparisons


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--tables", type=int, default=2000)
    parser.add_argument("--out", type=Path, default=OUT)
    args = parser.parse_args()
    bench = Bench(libraries=("numpy", "scipy"))
    rng = np.random.default_rng(2026)
    lines = [
        f"## Many comparisons: a false positive anywhere in a null table ({args.tables} "
        "tables per row)",
        "",
        "Every option equals the baseline (mean difference 0). Raw: any Wilcoxon p < 0.05 "
        "in the table; Holm: any Holm-adjusted p < 0.05 (the report's Holm column).",
        "",
        "| table | seeds | noise | raw: any p < 0.05 | Holm: any p < 0.05 |",
        "|---|---|---|---|---|",
    ]
    for name, (groups, options) in LAYOUTS.items():
        for seeds, skew in ((20, False), (20, True), (10, False)):
            raw, adjusted = family_rates(args.tables, groups, options, seeds, skew, rng)
            noise = "gamma (skewness 1)" if skew else "normal"
            lines.append(f"| {name} | {seeds} | {noise} | {raw:.3f} | {adjusted:.3f} |")
    comparisons = 4 * args.tables
    cs, t, seeds = adaptive_rates(comparisons, rng)
    se = np.sqrt(ALPHA * (1 - ALPHA) / comparisons)
    lines += [
        "",
        f"## After seeds until decided ({comparisons} null comparisons)",
        "",
        "The rule of docs/seeds.md (min 10, step 5, max 40, alpha 0.05) on normal paired "
        "differences of mean 0; at the seeds each comparison stopped at, the share whose "
        "interval excludes 0.",
        "",
        "| interval | excludes 0 (a false decision) |",
        "|---|---|",
        f"| confidence sequence (anytime-valid; what decided) | {cs:.4f} |",
        f"| fixed-n 95% t interval at the stopping seed | {t:.4f} |",
        "",
        f"Mean seeds: {seeds:.1f}. One standard error of a rate near alpha: {se:.4f}.",
    ]
    bench.write(args.out, "# Paired statistics under the null: simulated error rates", lines)
    print("\n".join(lines))


if __name__ == "__main__":
    main()
