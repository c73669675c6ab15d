"""Interval code against known values: scipy as the independent reference, a hand-worked Wilson case,
and brute-force pass@k."""
import itertools
import math

import numpy as np
import pytest

from loopkv.stats.intervals import (
    Estimate,
    bootstrap_mean,
    mean_of_group_means,
    paired_difference,
    paired_proportion_difference,
    pass_at_k,
    pass_at_k_interval,
    proportion,
    wilson,
)

LEVELS = (0.9, 0.95, 0.99)


@pytest.fixture(scope="module")
def sps():
    return pytest.importorskip("scipy.stats")


# ---------------------------------------------------------------------------------------------- Wilson

def test_wilson_hand_worked_8_of_10():
    # z = 1.959964 (97.5% normal quantile), z^2 = 3.841459, p = 0.8, n = 10:
    #   centre = (p + z^2/2n) / (1 + z^2/n)                    = 0.992073 / 1.384146 = 0.716740
    #   half   = z / (1 + z^2/n) * sqrt(p(1-p)/n + z^2/4n^2)  = 1.416017 * sqrt(0.016 + 0.009604) = 0.226578
    #   interval = [0.490162, 0.943318]
    e = wilson(8, 10)
    assert e.value == 0.8 and e.n == 10 and e.method == "wilson"
    assert e.lo == pytest.approx(0.490162, abs=1e-4)
    assert e.hi == pytest.approx(0.943318, abs=1e-4)


@pytest.mark.parametrize("level", LEVELS)
@pytest.mark.parametrize("n", [1, 4, 15, 100, 1319])
def test_wilson_matches_scipy(sps, n, level):
    ks = sorted({0, 1, n // 3, n // 2, n - 1, n} & set(range(n + 1)))
    for k in ks:
        ref = sps.binomtest(k, n).proportion_ci(confidence_level=level, method="wilson")
        e = wilson(k, n, level)
        assert e.lo == pytest.approx(ref.low, abs=1e-9), (k, n, level)
        assert e.hi == pytest.approx(ref.high, abs=1e-9), (k, n, level)
        assert 0.0 <= e.lo <= e.value <= e.hi <= 1.0


def test_wilson_edges_stay_inside_unit_interval():
    # where Wald would give the zero-width [0, 0] and [1, 1]
    assert wilson(0, 15).lo == 0.0 and wilson(0, 15).hi > 0.1
    assert wilson(15, 15).hi == 1.0 and wilson(15, 15).lo < 0.9


def test_proportion_equals_wilson_of_counts():
    flags = [True] * 80 + [False] * 20
    assert proportion(flags) == wilson(80, 100)
    assert proportion([1, 0, 1, 1]) == wilson(3, 4)
    assert proportion(np.array([1.0, 0.0])) == wilson(1, 2)


@pytest.mark.parametrize("bad", [[1, 0, 2], [0.5, 1], [1, float("nan")], ["1", "0"]])
def test_proportion_refuses_non_binary(bad):
    with pytest.raises(ValueError, match="0/1"):
        proportion(bad)


@pytest.mark.parametrize(
    "args, match",
    [((0, 0), "n >= 1"), ((11, 10), r"\[0, n=10\]"), ((-1, 10), r"\[0, n=10\]"), ((2.5, 10), "whole"),
     ((1, 10, 1.0), "level"), ((1, 10, 95), "level")],
)
def test_wilson_errors(args, match):
    with pytest.raises(ValueError, match=match):
        wilson(*args)


def test_proportion_empty_raises():
    with pytest.raises(ValueError, match="n >= 1"):
        proportion([])


# ------------------------------------------------------------------------------------------- bootstrap

@pytest.mark.parametrize("level", [0.9, 0.95])
def test_bootstrap_mean_matches_scipy_percentile(sps, level):
    x = (np.random.default_rng(1).random(200) < 0.7).astype(float)
    e = bootstrap_mean(x, level=level, resamples=20000, seed=3)
    ref = sps.bootstrap((x,), np.mean, method="percentile", confidence_level=level, n_resamples=20000,
                        rng=np.random.default_rng(4)).confidence_interval
    # different resampling streams: the quantiles of 20k resampled means of a 0/1 sample of 200 differ by
    # Monte Carlo error (~0.001) plus the mean's 1/200 grid step, well inside 0.01 (interval width ~0.12)
    assert e.lo == pytest.approx(ref.low, abs=0.01)
    assert e.hi == pytest.approx(ref.high, abs=0.01)
    assert e.value == x.mean() and e.n == 200 and e.method == "bootstrap"


def test_bootstrap_mean_continuous_matches_scipy(sps):
    x = np.random.default_rng(2).normal(3.0, 2.0, size=300)
    e = bootstrap_mean(x, resamples=20000, seed=0)
    ref = sps.bootstrap((x,), np.mean, method="percentile", n_resamples=20000,
                        rng=np.random.default_rng(1)).confidence_interval
    # Monte Carlo sd of a 2.5% quantile of 20k resampled means is ~0.02 se, ~0.03 se for the difference of
    # two independent runs: 0.1 se is over 3 sd (seen: up to 0.05 se over five seed pairs)
    se = x.std() / math.sqrt(x.size)
    assert e.lo == pytest.approx(ref.low, abs=0.1 * se)
    assert e.hi == pytest.approx(ref.high, abs=0.1 * se)


def test_bootstrap_mean_deterministic_and_contains_mean():
    x = np.random.default_rng(5).random(57)
    a, b = bootstrap_mean(x, seed=7), bootstrap_mean(list(x), seed=7)
    assert a == b
    assert bootstrap_mean(x, seed=8) != a
    assert a.lo < a.value < a.hi


def test_bootstrap_chunked_draws_cover_all_resamples():
    # a large n makes the draws come in several chunks; the interval must still be a sensible one
    x = np.random.default_rng(6).random(50000)
    e = bootstrap_mean(x, resamples=200, seed=0)
    se = x.std() / math.sqrt(x.size)
    assert e.lo < e.value < e.hi and 2 * se < e.hi - e.lo < 6 * se


def test_mean_of_group_means_matches_scipys_independent_multi_sample_bootstrap(sps):
    # scipy resamples each of several samples independently (paired=False) and applies the statistic to
    # them together: with the mean of their means as the statistic, that is the stratified bootstrap
    rng = np.random.default_rng(11)
    groups = [(rng.random(n) < p).astype(float) for n, p in ((40, 0.3), (250, 0.7), (90, 0.5))]
    e = mean_of_group_means(groups, resamples=20000, seed=2)
    ref = sps.bootstrap(groups, lambda *g, axis=-1: sum(x.mean(axis=axis) for x in g) / len(g),
                        method="percentile", n_resamples=20000, rng=np.random.default_rng(5)).confidence_interval
    # the unweighted mean of (~0.3, ~0.7, ~0.5), not the pooled accuracy over all 380 items
    assert e.value == pytest.approx((groups[0].mean() + groups[1].mean() + groups[2].mean()) / 3, abs=1e-15)
    assert e.value != pytest.approx(np.concatenate(groups).mean(), abs=1e-3)
    # Monte Carlo error of two independent 20k-resample runs (interval width ~0.11): well inside 0.01
    assert e.lo == pytest.approx(ref.low, abs=0.01) and e.hi == pytest.approx(ref.high, abs=0.01)
    assert e.n == 380 and e.method == "stratified-bootstrap"
    # one group: the plain bootstrap of its mean, draw for draw
    one, plain = mean_of_group_means([groups[1]], seed=4), bootstrap_mean(groups[1], seed=4)
    assert (one.value, one.lo, one.hi) == (plain.value, plain.lo, plain.hi)


def test_mean_of_group_means_errors():
    with pytest.raises(ValueError, match="at least one group"):
        mean_of_group_means([])
    with pytest.raises(ValueError, match="group 1 is empty"):
        mean_of_group_means([[1.0], []])


def test_bootstrap_single_item_is_degenerate():
    assert bootstrap_mean([0.4]) == Estimate(0.4, 0.4, 0.4, 1, "bootstrap")


@pytest.mark.parametrize("bad, match", [([], "empty"), ([1.0, float("nan")], "non-finite"),
                                        ([1.0, float("inf")], "non-finite"), ([[1.0, 2.0]], "flat")])
def test_bootstrap_mean_errors(bad, match):
    with pytest.raises(ValueError, match=match):
        bootstrap_mean(bad)


def test_bootstrap_bad_resamples_or_level():
    with pytest.raises(ValueError, match="resamples"):
        bootstrap_mean([1.0, 2.0], resamples=0)
    with pytest.raises(ValueError, match="level"):
        bootstrap_mean([1.0, 2.0], level=0.0)


# ---------------------------------------------------------------------------------- paired difference

def test_paired_difference_of_a_constant_shift_collapses():
    a = np.random.default_rng(0).random(80)
    e = paired_difference(a + 0.25, a)
    assert e.method == "paired-bootstrap" and e.n == 80
    assert e.value == pytest.approx(0.25) and e.lo == pytest.approx(0.25) and e.hi == pytest.approx(0.25)


def test_paired_is_narrower_than_unpaired_on_correlated_items():
    # shared per-item difficulty dominates: the teacher (b) and a method (a) agree on most items,
    # and the method loses a few
    rng = np.random.default_rng(1)
    difficulty = rng.random(300)
    b = (difficulty < 0.6).astype(float)
    a = b.copy()
    a[rng.choice(np.flatnonzero(b == 1), 15, replace=False)] = 0.0
    paired = paired_difference(a, b, resamples=5000, seed=0)
    # unpaired: a and b resampled independently, as if from different items
    ra, rb = np.random.default_rng(2), np.random.default_rng(3)
    diffs = [a[ra.integers(0, 300, 300)].mean() - b[rb.integers(0, 300, 300)].mean() for _ in range(5000)]
    u_lo, u_hi = np.quantile(diffs, [0.025, 0.975])
    assert paired.value == pytest.approx(-15 / 300)
    assert paired.lo < paired.value < paired.hi < 0  # a real loss, resolved only by pairing
    assert (paired.hi - paired.lo) < 0.5 * (u_hi - u_lo)
    assert u_lo < 0 < u_hi


def test_paired_difference_is_bootstrap_of_item_differences():
    rng = np.random.default_rng(4)
    a, b = rng.random(40), rng.random(40)
    p = paired_difference(a, b, seed=9)
    d = bootstrap_mean(a - b, seed=9)
    assert (p.value, p.lo, p.hi) == pytest.approx((d.value, d.lo, d.hi))


def test_paired_difference_errors():
    with pytest.raises(ValueError, match="same items"):
        paired_difference([1.0, 0.0, 1.0], [1.0, 0.0])
    with pytest.raises(ValueError, match="empty"):
        paired_difference([], [])
    with pytest.raises(ValueError, match="non-finite"):
        paired_difference([1.0, float("nan")], [1.0, 0.0])


# ------------------------------------------------------------------------ paired proportions (Tango)

def _pairs(both: int, only_a: int, only_b: int, neither: int) -> tuple[list[int], list[int]]:
    """Right/wrong outcomes of a and b on the same items from the paired 2x2 table's four counts."""
    return ([1] * both + [1] * only_a + [0] * only_b + [0] * neither,
            [1] * both + [0] * only_a + [1] * only_b + [0] * neither)


def test_tango_on_the_published_example():
    # Fagerland, Lydersen & Laake (2014), Stat Med 33:2850, the Bentur et al. airway data:
    # n11 = 1, n12 = 1, n21 = 7, n22 = 12; Tango's asymptotic score interval -0.517 to -0.026
    e = paired_proportion_difference(*_pairs(1, 1, 7, 12))
    assert e.value == pytest.approx(-6 / 21) and e.n == 21 and e.method == "tango-paired"
    assert (e.lo, e.hi) == pytest.approx((-0.517, -0.026), abs=5e-4)
    # the same authors' second example (Cavo et al. 2012: 59, 6, 16, 80): -0.0621, -0.1240 to -0.0054
    e = paired_proportion_difference(*_pairs(59, 6, 16, 80))
    assert (e.value, e.lo, e.hi) == pytest.approx((-0.0621, -0.1240, -0.0054), abs=5e-5)


@pytest.mark.parametrize("table", [(1, 1, 7, 12), (25, 0, 5, 10), (50, 20, 10, 120), (3, 9, 0, 28)])
def test_tango_equals_its_score_equation_solved_numerically(table):
    """The reference: the constrained MLE of P(only b) found by maximising the likelihood numerically
    (not the closed-form root the code uses), and the limits by scipy's root finder on the score."""
    from scipy.optimize import brentq, minimize_scalar

    both, only_a, only_b, neither = table
    n = sum(table)

    def score(d):
        def nll(q):   # P(only a) = q + d, P(only b) = q, P(alike) = 1 - 2q - d
            cells = ((only_a, q + d), (only_b, q), (both + neither, 1 - 2 * q - d))
            return -sum(k * math.log(p) for k, p in cells if k)
        q = minimize_scalar(nll, bounds=(max(0.0, -d) + 1e-12, (1 - d) / 2 - 1e-12), method="bounded",
                            options={"xatol": 1e-13}).x
        return (only_a - only_b - n * d) / math.sqrt(n * (2 * q + d * (1 - d)))

    z, d_hat = 1.959963984540054, (only_a - only_b) / n
    lo = brentq(lambda d: score(d) - z, -1 + 1e-9, d_hat - 1e-12)
    hi = brentq(lambda d: score(d) + z, d_hat + 1e-12, 1 - 1e-9)
    e = paired_proportion_difference(*_pairs(*table))
    assert (e.lo, e.hi) == pytest.approx((lo, hi), abs=1e-5)


def test_tango_without_discordant_items_is_not_a_point():
    # every item answered alike: the score equation solves by hand to D / (1 - D) = z^2 / N
    z2, n = 1.959963984540054 ** 2, 200
    e = paired_proportion_difference(*_pairs(100, 0, 0, 100))
    assert e.value == 0 and (e.lo, e.hi) == pytest.approx((-z2 / (n + z2), z2 / (n + z2)), abs=1e-9)
    # one item better out of 200: a bootstrap of the per-item differences cannot go below 0; Tango can
    assert paired_difference(*_pairs(99, 1, 0, 100)).lo == 0
    assert paired_proportion_difference(*_pairs(99, 1, 0, 100)).lo < 0


@pytest.mark.parametrize("p_only_a, p_only_b", [(0.05, 0.05), (0.1, 0.02), (0.02, 0.0)])
def test_tango_covers_the_true_difference_95_percent_of_the_time(p_only_a, p_only_b):
    """Exact coverage at N = 40 (every outcome of the trinomial (only a, only b, alike), weighted by
    its probability): an interval that is too narrow falls below 0.95 (a percentile bootstrap of the
    per-item differences, measured once: .957, .904, .546 at these three points); Tango's is within a
    point or two of it, or above."""
    n, truth, covered = 40, p_only_a - p_only_b, 0.0
    for b in range(n + 1):
        for c in range(n + 1 - b):
            rest = n - b - c
            if (b and not p_only_a) or (c and not p_only_b):
                continue   # an outcome of probability 0
            log_p = (math.lgamma(n + 1) - math.lgamma(b + 1) - math.lgamma(c + 1) - math.lgamma(rest + 1)
                     + (b * math.log(p_only_a) if b else 0) + (c * math.log(p_only_b) if c else 0)
                     + rest * math.log(1 - p_only_a - p_only_b))
            if log_p < -30:
                continue
            e = paired_proportion_difference(*_pairs(rest, b, c, 0))
            covered += math.exp(log_p) * (e.lo <= truth <= e.hi)
    assert 0.935 <= covered <= 1.0


def test_paired_proportion_errors():
    with pytest.raises(ValueError, match="same items"):
        paired_proportion_difference([1, 0, 1], [1, 0])
    with pytest.raises(ValueError, match="right/wrong"):
        paired_proportion_difference([1.0, 0.5], [1.0, 0.0])


# ------------------------------------------------------------------------------------------------ pass@k

def _brute_pass_at_k(n, c, k):
    """Fraction of the k-subsets of n samples (c of them correct) holding at least one correct sample."""
    samples = [True] * c + [False] * (n - c)
    subsets = list(itertools.combinations(samples, k))
    return sum(any(s) for s in subsets) / len(subsets)


@pytest.mark.parametrize("k", range(1, 6))
def test_pass_at_k_matches_brute_force(k):
    for c in range(6):
        assert pass_at_k([5], [c], k) == pytest.approx(_brute_pass_at_k(5, c, k), abs=1e-12), (c, k)
    # averaged over problems with different sample counts
    ns, cs = [5, 6, 7, 5], [0, 2, 3, 5]
    want = np.mean([_brute_pass_at_k(n, c, k) for n, c in zip(ns, cs)])
    assert pass_at_k(ns, cs, k) == pytest.approx(want, abs=1e-12)


def test_pass_at_1_is_mean_fraction_correct():
    ns, cs = [10, 20, 5, 8], [3, 20, 0, 7]
    assert pass_at_k(ns, cs, 1) == pytest.approx(np.mean(np.array(cs) / np.array(ns)))


def test_pass_at_k_large_n_matches_exact_binomials():
    # the product form against exact integer binomials where C(n, k) overflows a float
    n, c, k = 1000, 37, 100
    want = 1 - math.comb(n - c, k) / math.comb(n, k)
    assert pass_at_k([n], [c], k) == pytest.approx(want, rel=1e-10)


def test_pass_at_k_interval_bootstraps_over_problems():
    rng = np.random.default_rng(0)
    ns = [10] * 120
    cs = rng.integers(0, 11, 120).tolist()
    e = pass_at_k_interval(ns, cs, 5, seed=1)
    assert e.value == pytest.approx(pass_at_k(ns, cs, 5)) and e.n == 120 and e.method == "bootstrap"
    assert e.lo < e.value < e.hi
    assert e == pass_at_k_interval(ns, cs, 5, seed=1)


@pytest.mark.parametrize(
    "ns, cs, k, match",
    [([3], [1], 4, "at least k=4"), ([5], [6], 1, r"\[0, n=5\]"), ([5], [-1], 1, r"\[0, n=5\]"),
     ([5, 5], [1], 1, "problems"), ([], [], 1, "at least one"), ([5], [1], 0, "k must be")],
)
def test_pass_at_k_errors(ns, cs, k, match):
    with pytest.raises(ValueError, match=match):
        pass_at_k(ns, cs, k)
    with pytest.raises(ValueError, match=match):
        pass_at_k_interval(ns, cs, k)


# ----------------------------------------------------------------------------------------------- Estimate

def test_estimate_fmt_and_dict():
    e = wilson(80, 100)
    assert e.fmt() == ".800 [.711, .867] n=100"
    assert e.fmt(2) == ".80 [.71, .87] n=100"
    assert wilson(10, 10).fmt() == "1.000 [.722, 1.000] n=10"
    assert Estimate(-0.05, -0.12, 0.02, 50, "paired-bootstrap").fmt() == "-.050 [-.120, .020] n=50"
    assert Estimate(12.5, 11.0, 14.25, 7, "bootstrap").fmt(1) == "12.5 [11.0, 14.2] n=7"
    assert e.to_dict() == {"value": 0.8, "lo": e.lo, "hi": e.hi, "n": 100, "method": "wilson"}


@pytest.mark.parametrize("a, n_a, b, n_b, lo, hi", [
    # Newcombe (1998), "Interval estimation for the difference between independent proportions",
    # Table II, method 10 (score interval without continuity correction), his examples (a)-(d)
    (56, 70, 48, 80, 0.0524, 0.3339), (9, 10, 3, 10, 0.1705, 0.8090), (6, 7, 2, 7, 0.0582, 0.8062),
    (5, 56, 0, 29, -0.0381, 0.1926)])
def test_newcombe_difference_matches_the_published_examples(a, n_a, b, n_b, lo, hi):
    from loopkv.stats.intervals import newcombe_difference

    est = newcombe_difference(a, n_a, b, n_b)
    assert est.value == pytest.approx(a / n_a - b / n_b)
    assert (est.lo, est.hi) == pytest.approx((lo, hi), abs=6e-5) and est.method == "newcombe"
