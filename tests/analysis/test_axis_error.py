"""The loop- vs head-axis SVD comparison at equal budget, against a truncated SVD of the raw tokens."""
import torch

from loopkv.analysis.axis_error import axis_errors, ratios_of_equal_budget
from loopkv.analysis.calibration import Calibration


def truncated_svd_error(x: torch.Tensor, rank: int) -> float:
    """x (G, N, X): pooled relative squared error of each group's centred rank-`rank` reconstruction."""
    centred = x - x.mean(1, keepdim=True)
    u, s, vh = torch.linalg.svd(centred, full_matrices=False)
    approx = (u[..., :rank] * s[:, None, :rank]) @ vh[:, :rank]
    return float((centred - approx).pow(2).sum() / centred.pow(2).sum())


def test_errors_are_the_truncated_svds_of_each_axis():
    torch.manual_seed(0)
    n, D, H, T, dh = 400, 2, 4, 4, 8
    # loops share a low-rank trajectory per token: the loop axis is cheap, the head axis is not
    base = torch.randn(n, D, H, 1, dh)
    k = base + 0.3 * torch.randn(n, D, H, T, 1) * torch.randn(1, D, H, 1, dh) + 0.05 * torch.randn(n, D, H, T, dh)
    v = torch.randn(n, D, H, T, dh)
    cal = Calibration(("per_head", "per_loop"))
    cal.add(k[:150], v[:150])
    cal.add(k[150:], v[150:])
    got = axis_errors(cal, T, H, dh)
    assert list(got) == [f"{r}x" for r in ratios_of_equal_budget(T, H, dh)] == ["2x", "4x", "8x", "16x", "32x"]
    for label, cell in got.items():
        rho = int(label[:-1])
        for kind, x in (("k", k), ("v", v)):
            loop = x.double().permute(1, 2, 0, 3, 4).reshape(D * H, n, T * dh)     # per (layer, head)
            head = x.double().permute(1, 3, 0, 2, 4).reshape(D * T, n, H * dh)     # per (layer, loop)
            assert abs(cell[kind]["loop"] - truncated_svd_error(loop, T * dh // rho)) < 1e-9
            assert abs(cell[kind]["head"] - truncated_svd_error(head, H * dh // rho)) < 1e-9
    assert got["4x"]["k"]["head_over_loop"] > 5          # the structure built in
    assert 0.5 < got["4x"]["v"]["head_over_loop"] < 2    # no structure: both axes alike
