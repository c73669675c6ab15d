"""Cross-loop structure of the teacher's K/V (LLA paper, Figure 2/3), from sampled tokens.

`samples` has shape (N, D, H, T, d_head): one K (or V) tensor per sampled token. For an axis
A in {loop (T), head (H), layer (D)}, each token contributes the |A| x d_head matrices obtained by
fixing the other two axes; their singular values give
- the normalised effective rank: exp(entropy of sigma / sum sigma) / |A|   (1 = full rank), and
- the first-direction energy: sigma_1^2 / sum sigma^2.
The loop axis being far from full rank while heads and layers are near it is what makes the
loop axis the one to compress.
"""
from __future__ import annotations

import torch

AXES = {"loop": 3, "head": 2, "layer": 1}


def axis_matrices(samples: torch.Tensor, axis: str) -> torch.Tensor:
    """(N, D, H, T, dh) -> (M, |axis|, dh): one matrix per token and setting of the other two axes."""
    dim = AXES[axis]
    moved = samples.movedim(dim, -2)                   # (..., |axis|, dh)
    return moved.reshape(-1, *moved.shape[-2:])


def effective_rank(singular_values: torch.Tensor) -> torch.Tensor:
    """Roy & Vetterli effective rank of each row of singular values."""
    p = singular_values / singular_values.sum(-1, keepdim=True).clamp(min=1e-30)
    entropy = -(p * p.clamp(min=1e-30).log()).sum(-1)
    return entropy.exp()


def axis_spectrum(samples: torch.Tensor, axis: str) -> dict:
    mats = axis_matrices(samples.double(), axis)
    sv = torch.linalg.svdvals(mats)                    # (M, min(|axis|, dh))
    size = mats.shape[-2]
    energy = sv.pow(2)
    first = energy[:, 0] / energy.sum(-1).clamp(min=1e-30)
    erank = effective_rank(sv) / min(size, mats.shape[-1])
    return {
        "axis_size": size,
        "normalized_effective_rank": float(erank.mean()),
        "normalized_effective_rank_std": float(erank.std()),
        "first_direction_energy": float(first.mean()),
        "mean_energy_by_direction": (energy / energy.sum(-1, keepdim=True)).mean(0).tolist(),
        "n_matrices": int(mats.shape[0]),
    }


def loop_variance_share(samples: torch.Tensor) -> float:
    """Share of the total variance of x_{n,t} (over tokens n and loops t) that lies along the loop
    axis: sum ||x_{n,t} - mean_t x_{n,.}||^2 / sum ||x_{n,t} - mean_{n,t} x||^2, per (layer, head),
    then averaged. The rest is content (differences between tokens)."""
    x = samples.double()                               # (N, D, H, T, dh)
    within = (x - x.mean(dim=3, keepdim=True)).pow(2).sum(dim=(0, 3, 4))
    total = (x - x.mean(dim=(0, 3), keepdim=True)).pow(2).sum(dim=(0, 3, 4))
    return float((within / total.clamp(min=1e-30)).mean())


def convergence(samples: torch.Tensor) -> dict:
    """Per loop t: mean cosine(x_t, x_T) to the final loop, and mean relative change
    ||x_t - x_{t-1}|| / ||x_{t-1}|| (t >= 1), over tokens, layers and heads."""
    x = samples.double()
    final = x[:, :, :, -1:, :]
    cos = torch.nn.functional.cosine_similarity(x, final.expand_as(x), dim=-1)   # (N, D, H, T)
    change = (x[:, :, :, 1:] - x[:, :, :, :-1]).norm(dim=-1) / x[:, :, :, :-1].norm(dim=-1).clamp(min=1e-30)
    return {
        "cosine_to_final": cos.mean(dim=(0, 1, 2)).tolist(),
        "relative_change": [float("nan")] + change.mean(dim=(0, 1, 2)).tolist(),
        "cosine_to_final_by_layer": cos.mean(dim=(0, 2)).tolist(),
    }


def cross_loop_structure(keys: torch.Tensor, values: torch.Tensor) -> dict:
    """Everything Figure 2/3 plots, for K and V."""
    out = {}
    for name, samples in (("k", keys), ("v", values)):
        out[name] = {
            "spectra": {axis: axis_spectrum(samples, axis) for axis in AXES},
            "loop_variance_share": loop_variance_share(samples),
            "convergence": convergence(samples),
        }
    return out
