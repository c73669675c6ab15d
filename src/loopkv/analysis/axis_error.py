"""Which axis an SVD codec should compress, at equal cache budget (LLA Section 5 on Huginn: the head
axis reconstructs 20-30x worse than the per-head loop axis).

From the calibration's centred second moments (cache.latent_codec layouts): the per-head loop axis
(`per_head`: one vector [x_1; ...; x_T] per (layer, head), width T*d_head) kept at rank T*d_head/rho,
and the per-loop head axis (`per_loop`: one vector of the H heads per (layer, loop), width H*d_head,
mla_head's) kept at rank H*d_head/rho. Both store H*T*d_head/rho scalars per token and layer, rho times
fewer than the exact K (or V). The error is the variance the top-r directions miss, pooled over groups,
over the total variance (the same total for both: the same scalars about the same means), i.e. the
SVD codec's relative squared reconstruction error on the calibration tokens."""
from __future__ import annotations

import torch

AXIS_LAYOUTS = {"loop": "per_head", "head": "per_loop"}   # the axis a codec's vector runs along -> its layout


def discarded_share(covariance: torch.Tensor, rank: int) -> float:
    """(G, X, X) centred covariances: the share of their total variance outside each group's top `rank`
    eigen-directions."""
    eigenvalues = torch.linalg.eigvalsh(covariance.double()).clamp(min=0).flip(-1)   # descending
    return float(eigenvalues[:, rank:].sum() / eigenvalues.sum().clamp(min=1e-300))


def ratios_of_equal_budget(loops: int, heads: int, head_dim: int, candidates=(2, 4, 8, 16, 32, 64, 128)) -> list[int]:
    """The ratios both axes reach with a whole rank (T*d_head/rho and H*d_head/rho integers, >= 1)."""
    return [r for r in candidates if (loops * head_dim) % r == 0 and (heads * head_dim) % r == 0
            and heads * head_dim >= r]


def axis_errors(calibration, loops: int, heads: int, head_dim: int) -> dict:
    """{ratio label: {k|v: {"loop", "head", "head_over_loop"}}} at every equal-budget ratio; needs the
    per_head and per_loop moments."""
    from loopkv.errors import LoopKVError

    missing = [layout for layout in AXIS_LAYOUTS.values() if layout not in calibration.layouts]
    if missing:
        raise LoopKVError(f"the loop- vs head-axis comparison needs calibration.layouts to hold {missing}")
    width = {"loop": loops * head_dim, "head": heads * head_dim}
    out = {}
    for rho in ratios_of_equal_budget(loops, heads, head_dim):
        cell = {}
        for kind in ("k", "v"):
            errors = {axis: discarded_share(calibration.moments[layout, kind].covariance(), width[axis] // rho)
                      for axis, layout in AXIS_LAYOUTS.items()}
            errors["head_over_loop"] = errors["head"] / errors["loop"] if errors["loop"] > 0 else float("inf")
            cell[kind] = errors
        out[f"{rho}x"] = cell
    return out
