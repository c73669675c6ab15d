"""Latent attention (LLA's capacity path): the tiled torch path and the Triton kernel (CPU, under
TRITON_INTERPRET=1, set in conftest.py) equal reconstruct-then-attend for several shapes, ranks, positions and masks."""
import pytest
import torch

from loopkv.models.rope import Rotary
from loopkv.serve.latent_attention import (exact_attention_with_lse, merge_partial_attention,
                                           reference_latent_attention, torch_latent_attention)

# (B, Hq, H_kv, latent groups, L, S, d, r_k, r_v)
SHAPES = [
    (1, 2, 2, 2, 1, 37, 16, 6, 10),      # tiny LLA per head, decode
    (2, 4, 4, 4, 1, 300, 16, 24, 40),    # more tiles than one
    (2, 4, 2, 2, 3, 50, 32, 12, 20),     # grouped query heads, several queries
    (1, 4, 4, 1, 1, 70, 16, 30, 50),     # LLA-2D: one latent shared by all heads
    (3, 2, 2, 2, 2, 17, 64, 96, 160),    # Ouro's 96/160 ranks at d = 64
]


def _case(b, hq, h_kv, groups, length, s, d, r_k, r_v, seed=0, offset=0, padded=False):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(b, hq, length, d, generator=g)
    ck, cv = torch.randn(b, s, groups, r_k, generator=g), torch.randn(b, s, groups, r_v, generator=g)
    up_k, up_v = torch.randn(h_kv, d, r_k, generator=g) / r_k**0.5, torch.randn(h_kv, d, r_v, generator=g) / r_v**0.5
    mu_k, mu_v = torch.randn(h_kv, d, generator=g), torch.randn(h_kv, d, generator=g)
    positions = offset + torch.arange(s).expand(b, s).clone()
    valid = None
    if padded:   # left padding: row i has i * 3 padded slots
        valid = torch.ones(b, s, dtype=torch.bool)
        for i in range(b):
            valid[i, : 3 * i] = False
            positions[i] = (positions[i] - 3 * i).clamp(min=0)
    return q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("offset,padded", [(0, False), (5000, True)])
def test_tiled_torch_path_equals_reconstruct_then_attend(shape, offset, padded):
    args = _case(*shape, offset=offset, padded=padded)
    ref_out, ref_lse = reference_latent_attention(*args)
    out, lse = torch_latent_attention(*args, tile=16)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    tables = Rotary(args[0].shape[-1], 10000.0).cos_sin(args[7], torch.float32)
    out, lse = torch_latent_attention(*args, tile=16, rope_tables=tables)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("offset,padded,split_s", [(0, False, None), (262000, True, 32)])
def test_triton_kernel_equals_reconstruct_then_attend(shape, offset, padded, split_s):
    pytest.importorskip("triton")
    from loopkv.serve.triton_latent_attention import triton_latent_attention

    args = _case(*shape, seed=1, offset=offset, padded=padded)
    ref_out, ref_lse = reference_latent_attention(*args, rope_theta=1e6)
    out, lse = triton_latent_attention(*args, rope_theta=1e6, block_s=16, split_s=split_s)   # 32: several splits
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)


def test_merging_past_and_new_equals_attention_over_both():
    b, h, length, s, d = 2, 2, 3, 20, 16
    g = torch.Generator().manual_seed(3)
    q, k, v = torch.randn(b, h, length, d, generator=g), torch.randn(b, h, s + length, d, generator=g), torch.randn(b, h, s + length, d, generator=g)
    mask = torch.ones(b, 1, length, s + length, dtype=torch.bool)
    mask[..., s:] = torch.ones(length, length, dtype=torch.bool).tril()
    mask[1, ..., :4] = False
    whole, whole_lse = exact_attention_with_lse(q, k, v, mask)
    past = exact_attention_with_lse(q, k[:, :, :s], v[:, :, :s], mask[..., :s])
    new = exact_attention_with_lse(q, k[:, :, s:], v[:, :, s:], mask[..., s:])
    out, lse = merge_partial_attention(*past, *new)
    torch.testing.assert_close(out, whole, rtol=1e-5, atol=1e-5)
    torch.testing.assert_close(lse, whole_lse, rtol=1e-5, atol=1e-5)
    sdpa = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    torch.testing.assert_close(whole, sdpa, rtol=1e-5, atol=1e-5)


def test_mismatched_shapes_are_errors():
    q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid = _case(1, 3, 2, 2, 1, 8, 16, 4, 4)
    with pytest.raises(ValueError, match="group over"):
        reference_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions)
    q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid = _case(1, 2, 2, 2, 1, 8, 16, 4, 4)
    with pytest.raises(ValueError, match="positions"):
        torch_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions[:, :5])


def test_triton_splits_with_no_valid_key_weigh_nothing():
    """Left padding longer than a split: whole splits have no valid key and must drop out of the merge."""
    pytest.importorskip("triton")
    from loopkv.serve.triton_latent_attention import triton_latent_attention

    q, ck, cv, up_k, mu_k, up_v, mu_v, positions, _ = _case(2, 2, 2, 2, 1, 100, 16, 6, 10, seed=2)
    valid = torch.ones(2, 100, dtype=torch.bool)
    valid[1, :70] = False                                  # splits 0 and 1 of row 1 are all padding
    ref_out, ref_lse = reference_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid)
    out, lse = triton_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid, block_s=16, split_s=32)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)
