"""Cross-loop structure measures on constructed cases with known answers."""
import math

import torch

from loopkv.analysis.spectra import axis_spectrum, convergence, effective_rank, loop_variance_share


def test_effective_rank_extremes():
    assert math.isclose(float(effective_rank(torch.tensor([[1.0, 1.0, 1.0, 1.0]]))), 4.0, rel_tol=1e-9)
    assert math.isclose(float(effective_rank(torch.tensor([[3.0, 0.0, 0.0]]))), 1.0, rel_tol=1e-9)


def test_identical_loops_are_rank_one_on_the_loop_axis():
    torch.manual_seed(0)
    token = torch.randn(50, 2, 3, 1, 8)                    # (N, D, H, 1, dh)
    samples = token.expand(50, 2, 3, 4, 8)                 # every loop the same
    loop = axis_spectrum(samples, "loop")
    assert math.isclose(loop["normalized_effective_rank"], 1 / 4, rel_tol=1e-6)
    assert math.isclose(loop["first_direction_energy"], 1.0, rel_tol=1e-9)
    assert loop_variance_share(samples) < 1e-12
    assert all(math.isclose(c, 1.0, rel_tol=1e-9) for c in convergence(samples)["cosine_to_final"])
    head = axis_spectrum(samples, "head")                  # random heads: far from rank one
    assert head["normalized_effective_rank"] > 0.8 and head["axis_size"] == 3


def test_variance_share_is_one_when_only_loops_vary():
    torch.manual_seed(1)
    per_loop = torch.randn(1, 2, 2, 4, 8)
    samples = per_loop.expand(30, 2, 2, 4, 8)              # every token the same trajectory
    assert math.isclose(loop_variance_share(samples), 1.0, rel_tol=1e-9)


def test_relative_change_matches_a_hand_computation():
    x = torch.zeros(1, 1, 1, 3, 2)
    x[..., 0, :] = torch.tensor([1.0, 0.0])
    x[..., 1, :] = torch.tensor([1.0, 1.0])
    x[..., 2, :] = torch.tensor([1.0, 1.0])
    conv = convergence(x)
    assert math.isnan(conv["relative_change"][0])
    assert math.isclose(conv["relative_change"][1], 1.0) and conv["relative_change"][2] == 0.0
    assert math.isclose(conv["cosine_to_final"][0], 1 / math.sqrt(2), rel_tol=1e-9)
