"""Intervals for the accuracies the reports print: every number carries a 95% interval and its n.

- proportions (per-item right/wrong): Wilson score interval, `wilson` / `proportion`;
- means over items (scores, pass@k): percentile bootstrap over items, `bootstrap_mean` / `pass_at_k_interval`;
- a method against the teacher on the same items: for right/wrong items, Tango's score interval from
  the discordant pairs, `paired_proportion_difference`; for other per-item scores, a paired percentile
  bootstrap, `paired_difference`;
- a mean of several tasks' accuracies (MC-avg): stratified bootstrap, `mean_of_group_means`.

Numpy only (plus the standard library): scipy is the tests' independent reference, not a dependency.
Bootstraps are deterministic for a given seed, so a report rebuilt from the same outputs prints the same intervals.
"""
from __future__ import annotations

import dataclasses
import math
from collections.abc import Sequence
from statistics import NormalDist

import numpy as np

# bootstrap index draws are made this many elements at a time, so 10k resamples of a large
# benchmark do not build one (resamples x n) index array
_CHUNK_ELEMENTS = 1 << 22


@dataclasses.dataclass(frozen=True)
class Estimate:
    """A point value with its interval [lo, hi], the n it rests on, and how the interval was made."""

    value: float
    lo: float
    hi: float
    n: int
    method: str  # how: "wilson", "bootstrap", "paired-bootstrap", "tango-paired", "newcombe", ...

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def fmt(self, digits: int = 3) -> str:
        """Compact table text, `value [lo, hi] n=N`, e.g. ".800 [.711, .867] n=100".

        Numbers are fixed-point with `digits` decimals and the leading zero of |x| < 1 dropped
        (".800", "-.050"); values of 1 or more keep theirs ("1.000").
        """
        return f"{_num(self.value, digits)} [{_num(self.lo, digits)}, {_num(self.hi, digits)}] n={self.n}"


def _num(x: float, digits: int) -> str:
    s = f"{x:.{digits}f}"
    if s.startswith("0."):
        return s[1:]
    if s.startswith("-0."):
        return "-" + s[2:]
    return s


def _z(level: float) -> float:
    if not 0.0 < level < 1.0:
        raise ValueError(f"confidence level must be in (0, 1), got {level!r}")
    return NormalDist().inv_cdf(0.5 + level / 2.0)


def wilson(successes: int, n: int, level: float = 0.95) -> Estimate:
    """Wilson score interval for successes/n (no continuity correction).

    Wilson, not Wald (p +- z*sqrt(p(1-p)/n)): our n are often small and accuracies near 0 or 1, where
    Wald's interval collapses to zero width at p = 0 or 1 and leaves [0, 1]; Wilson's stays inside [0, 1]
    and keeps close to its nominal coverage there.
    """
    if successes != int(successes) or n != int(n):
        raise ValueError(f"successes and n must be whole counts, got {successes}/{n}")
    if n <= 0:
        raise ValueError(f"a proportion needs n >= 1 items, got n={n}")
    if not 0 <= successes <= n:
        raise ValueError(f"successes must be in [0, n={n}], got {successes}")
    z = _z(level)
    p = successes / n
    z2n = z * z / n
    centre = (p + z2n / 2.0) / (1.0 + z2n)
    half = z / (1.0 + z2n) * math.sqrt(p * (1.0 - p) / n + z2n / (4.0 * n))
    # at k = 0 (k = n) the lower (upper) bound is exactly 0 (1); the formula gives it only up to round-off
    lo = 0.0 if successes == 0 else min(p, centre - half)
    hi = 1.0 if successes == n else max(p, centre + half)
    return Estimate(p, lo, hi, int(n), "wilson")


def proportion(flags: Sequence[bool | int], level: float = 0.95) -> Estimate:
    """Wilson interval from per-item outcomes, each 0/1 (or False/True); anything else is refused."""
    arr = np.asarray(flags)
    if arr.ndim != 1:
        raise ValueError(f"per-item outcomes must be a flat sequence, got shape {arr.shape}")
    if arr.dtype.kind not in "biuf" or not np.isin(arr, (0, 1)).all():
        # a score (0.5) or a count (2) passed as an outcome would silently skew the proportion
        raise ValueError("per-item outcomes must each be 0/1 (or False/True)")
    return wilson(int(arr.sum()), arr.size, level)


def _as_items(values: Sequence[float], what: str) -> np.ndarray:
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1:
        raise ValueError(f"{what} must be a flat sequence of per-item values, got shape {arr.shape}")
    if arr.size == 0:
        raise ValueError(f"{what} is empty: an interval needs at least one item")
    if not np.isfinite(arr).all():
        bad = np.flatnonzero(~np.isfinite(arr))[:10].tolist()
        raise ValueError(f"{what} has non-finite values (NaN or inf), first at items {bad}")
    return arr


def _percentile_bootstrap(x: np.ndarray, level: float, resamples: int, seed: int) -> tuple[float, float]:
    """Percentile interval of the mean of x resampled with replacement over items."""
    _z(level)  # validates level
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    n = x.size
    per_chunk = max(1, _CHUNK_ELEMENTS // n)
    means = np.empty(resamples)
    for start in range(0, resamples, per_chunk):
        stop = min(resamples, start + per_chunk)
        idx = rng.integers(0, n, size=(stop - start, n))
        means[start:stop] = x[idx].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(means, [alpha, 1.0 - alpha])
    return float(lo), float(hi)


def bootstrap_mean(values: Sequence[float], level: float = 0.95, resamples: int = 10000, seed: int = 0) -> Estimate:
    """Mean over items with a percentile bootstrap interval (items resampled with replacement).

    For means that are not plain proportions (per-item scores, pass@k). With one item the interval
    is that item's value: a bootstrap says nothing at n=1, and the printed n shows it.
    """
    x = _as_items(values, "values")
    lo, hi = _percentile_bootstrap(x, level, resamples, seed)
    return Estimate(float(x.mean()), lo, hi, x.size, "bootstrap")


def paired_difference(
    a: Sequence[float], b: Sequence[float], level: float = 0.95, resamples: int = 10000, seed: int = 0
) -> Estimate:
    """mean(a) - mean(b) over the same items, with a paired percentile bootstrap interval.

    Paired because a method and the teacher are scored on the same items: item difficulty is shared,
    so resampling items once for both (equivalently, bootstrapping the per-item differences a_i - b_i)
    cancels it, and the interval is far narrower than one from two independent bootstraps.
    """
    x, y = _as_items(a, "a"), _as_items(b, "b")
    if x.size != y.size:
        raise ValueError(f"a paired difference needs the same items: a has {x.size}, b has {y.size}")
    d = x - y  # mean(a[idx]) - mean(b[idx]) == mean(d[idx]) for every resample idx
    lo, hi = _percentile_bootstrap(d, level, resamples, seed)
    return Estimate(float(x.mean() - y.mean()), lo, hi, x.size, "paired-bootstrap")


def paired_proportion_difference(a: Sequence[bool | int], b: Sequence[bool | int], level: float = 0.95) -> Estimate:
    """p_a - p_b of right/wrong outcomes on the same items: Tango's asymptotic score interval (Tango
    1998; recommended for paired proportions by Fagerland, Lydersen & Laake 2014).

    Only the discordant items carry information: b = right in a only, c = right in b only, N items.
    The limits are the differences D whose score statistic (b - c - N D) / sqrt(N (2 q(D) + D (1 - D)))
    equals -/+ z, q(D) the constrained maximum-likelihood P(right in b only) under that D. Unlike a
    percentile bootstrap of the per-item differences, one to three discordant items in one direction
    do not give an interval that excludes 0 (1 of 200 items better: the bootstrap's lower end is 0
    exactly; at D = 0 the statistic is McNemar's, so 4 of 200 do), and no discordant items at all give
    an interval of half-width z^2/(N + z^2) around 0, not [0, 0].
    """
    x, y = _as_items(a, "a"), _as_items(b, "b")
    if x.size != y.size:
        raise ValueError(f"a paired difference needs the same items: a has {x.size}, b has {y.size}")
    if not (np.isin(x, (0.0, 1.0)).all() and np.isin(y, (0.0, 1.0)).all()):
        raise ValueError("a paired proportion needs right/wrong (0/1) outcomes")
    n, z = x.size, _z(level)
    only_a, only_b = int(((x == 1) & (y == 0)).sum()), int(((x == 0) & (y == 1)).sum())
    d_hat = (only_a - only_b) / n

    def score(d: float) -> float:
        numerator = only_a - only_b - n * d
        if numerator == 0:
            return 0.0
        w = -only_a - only_b + (2 * n - only_a + only_b) * d
        q = (math.sqrt(max(w * w + 8 * n * only_b * d * (1 - d), 0.0)) - w) / (4 * n)
        variance = n * (2 * q + d * (1 - d))
        return math.copysign(math.inf, numerator) if variance <= 0 else numerator / math.sqrt(variance)

    def limit(target: float, lo: float, hi: float) -> float:
        """The d in [lo, hi] where the (decreasing) score crosses `target`; an end if it never does."""
        if score(lo) <= target:
            return lo
        if score(hi) >= target:
            return hi
        for _ in range(200):
            mid = (lo + hi) / 2
            lo, hi = (mid, hi) if score(mid) > target else (lo, mid)
        return (lo + hi) / 2

    return Estimate(d_hat, limit(z, -1.0, d_hat), limit(-z, d_hat, 1.0), n, "tango-paired")


def mean_of_group_means(
    groups: Sequence[Sequence[float]], level: float = 0.95, resamples: int = 10000, seed: int = 0
) -> Estimate:
    """The unweighted mean of several groups' means (MC-avg: the mean of per-task accuracies, each
    task counting once whatever its size), with a stratified percentile bootstrap: every resample
    draws each group's items from that group, with replacement, independently of the other groups.

    n of the Estimate is the total number of items."""
    arrays = [_as_items(g, f"group {i}") for i, g in enumerate(groups)]
    if not arrays:
        raise ValueError("a mean of group means needs at least one group")
    _z(level)
    if resamples < 1:
        raise ValueError(f"resamples must be >= 1, got {resamples}")
    rng = np.random.default_rng(seed)
    total = np.zeros(resamples)
    for x in arrays:
        per_chunk = max(1, _CHUNK_ELEMENTS // x.size)
        for start in range(0, resamples, per_chunk):
            stop = min(resamples, start + per_chunk)
            total[start:stop] += x[rng.integers(0, x.size, size=(stop - start, x.size))].mean(axis=1)
    alpha = (1.0 - level) / 2.0
    lo, hi = np.quantile(total / len(arrays), [alpha, 1.0 - alpha])
    value = sum(float(x.mean()) for x in arrays) / len(arrays)
    return Estimate(value, float(lo), float(hi), sum(x.size for x in arrays), "stratified-bootstrap")


def _pass_at_k_per_problem(num_samples: Sequence[int], num_correct: Sequence[int], k: int) -> np.ndarray:
    if len(num_samples) != len(num_correct):
        raise ValueError(f"num_samples has {len(num_samples)} problems, num_correct has {len(num_correct)}")
    if len(num_samples) == 0:
        raise ValueError("pass@k needs at least one problem")
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    out = np.empty(len(num_samples))
    for i, (n, c) in enumerate(zip(num_samples, num_correct)):
        if n < k:
            raise ValueError(f"problem {i}: pass@{k} needs at least k={k} samples, got n={n}")
        if not 0 <= c <= n:
            raise ValueError(f"problem {i}: num_correct must be in [0, n={n}], got {c}")
        # 1 - C(n-c, k)/C(n, k) as the product prod_{j=n-c+1..n} (1 - k/j) (Chen et al. 2021, HumanEval):
        # the binomials themselves overflow floats for n in the hundreds
        out[i] = 1.0 if n - c < k else 1.0 - float(np.prod(1.0 - k / np.arange(n - c + 1, n + 1)))
    return out


def pass_at_k(num_samples: Sequence[int], num_correct: Sequence[int], k: int) -> float:
    """Unbiased pass@k: 1 - C(n-c, k)/C(n, k) per problem (n samples, c correct), averaged over problems."""
    return float(_pass_at_k_per_problem(num_samples, num_correct, k).mean())


def pass_at_k_interval(
    num_samples: Sequence[int],
    num_correct: Sequence[int],
    k: int,
    level: float = 0.95,
    resamples: int = 10000,
    seed: int = 0,
) -> Estimate:
    """pass@k with a percentile bootstrap over problems (n in the Estimate is the number of problems)."""
    return bootstrap_mean(_pass_at_k_per_problem(num_samples, num_correct, k), level, resamples, seed)


def newcombe_difference(successes_a: int, n_a: int, successes_b: int, n_b: int, level: float = 0.95) -> Estimate:
    """p_a - p_b of two independent proportions: Newcombe's hybrid score interval (his method 10),
    built from each side's Wilson bounds. For rows of a table, where only each cell's accuracy and
    n are at hand; the same items on both sides call for `paired_proportion_difference` over the items."""
    a, b = wilson(successes_a, n_a, level), wilson(successes_b, n_b, level)
    d = a.value - b.value
    lo = d - math.sqrt((a.value - a.lo) ** 2 + (b.hi - b.value) ** 2)
    hi = d + math.sqrt((a.hi - a.value) ** 2 + (b.value - b.lo) ** 2)
    return Estimate(d, lo, hi, min(a.n, b.n), "newcombe")
