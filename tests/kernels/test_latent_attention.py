"""Latent attention (LLA's capacity path): the tiled torch path and the Triton kernel (CPU, under
TRITON_INTERPRET=1, set in conftest.py) equal reconstruct-then-attend for several shapes, ranks, positions and masks."""
import pytest
import torch

from loopkv.models.rope import Rotary
from loopkv.kernels.latent_attention import (exact_attention_with_lse, latent_attention, merge_partial_attention,
                                           reference_latent_attention, torch_latent_attention)

# (B, Hq, H_kv, latent groups, L, S, d, r_k, r_v)
SHAPES = [
    (1, 2, 2, 2, 1, 37, 16, 6, 10),      # tiny LLA per head, decode
    (2, 4, 4, 4, 1, 300, 16, 24, 40),    # more tiles than one
    (2, 4, 2, 2, 3, 50, 32, 12, 20),     # grouped query heads, several queries
    (1, 4, 4, 1, 1, 70, 16, 30, 50),     # LLA-2D: one latent shared by all heads
    (3, 2, 2, 2, 2, 17, 64, 96, 160),    # Ouro's 96/160 ranks at d = 64
    (2, 4, 4, 4, 1, 45, 32, 24, 40),     # the embedded default's decode: one query per head, a partial tile
    (1, 2, 2, 2, 1, 21, 128, 12, 20),    # one query per head at d = 128: several 16-dim slices per half
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
@pytest.mark.parametrize("tile", [16, 1024])   # several tiles (online softmax) / one pass
def test_tiled_torch_path_equals_reconstruct_then_attend(shape, offset, padded, tile):
    args = _case(*shape, offset=offset, padded=padded)
    ref_out, ref_lse = reference_latent_attention(*args)
    out, lse = torch_latent_attention(*args, tile=tile)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    tables = Rotary(args[0].shape[-1], 10000.0).cos_sin(args[7], torch.float32)
    out, lse = torch_latent_attention(*args, tile=tile, rope_tables=tables)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("offset,padded,split_s", [(0, False, None), (262000, True, 32)])
@pytest.mark.parametrize("fold_query", [False, True])
def test_triton_kernel_equals_reconstruct_then_attend(shape, offset, padded, split_s, fold_query):
    pytest.importorskip("triton")
    from loopkv.kernels.triton_latent_attention import triton_latent_attention

    args = _case(*shape, seed=1, offset=offset, padded=padded)
    ref_out, ref_lse = reference_latent_attention(*args, rope_theta=1e6)
    out, lse = triton_latent_attention(*args, rope_theta=1e6, block_s=16, split_s=split_s,   # 32: several splits
                                       fold_query=fold_query)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)
    tables = Rotary(args[0].shape[-1], 1e6).cos_sin(args[7], torch.float32)   # a cache's, built once per forward
    out, lse = triton_latent_attention(*args, rope_tables=tables, block_s=16, split_s=split_s)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="rope_tables"):
        triton_latent_attention(*args, rope_tables=tuple(t[:, :, 1:] for t in tables))


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
    from loopkv.kernels.triton_latent_attention import triton_latent_attention

    q, ck, cv, up_k, mu_k, up_v, mu_v, positions, _ = _case(2, 2, 2, 2, 1, 100, 16, 6, 10, seed=2)
    valid = torch.ones(2, 100, dtype=torch.bool)
    valid[1, :70] = False                                  # splits 0 and 1 of row 1 are all padding
    ref_out, ref_lse = reference_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid)
    out, lse = triton_latent_attention(q, ck, cv, up_k, mu_k, up_v, mu_v, positions, valid, block_s=16, split_s=32)
    torch.testing.assert_close(out, ref_out, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, ref_lse, rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("shape", [s for s in SHAPES if s[4] == 1] + [(2, 4, 2, 2, 1, 50, 32, 12, 20)])
@pytest.mark.parametrize("padded", [False, True])
def test_triton_decode_folds_the_new_token_into_the_merge(shape, padded):
    """A decode step's own exact key/value, folded into the kernel's split merge, equals attention
    over the reconstructed past merged with the new token."""
    pytest.importorskip("triton")
    from loopkv.kernels.triton_latent_attention import triton_latent_attention

    args = _case(*shape, seed=4, offset=100, padded=padded)
    b, h_kv, d = args[0].shape[0], args[3].shape[0], args[0].shape[-1]
    g = torch.Generator().manual_seed(5)
    own_k, own_v = torch.randn(b, h_kv, 1, d, generator=g), torch.randn(b, h_kv, 1, d, generator=g)
    want = merge_partial_attention(*reference_latent_attention(*args), *exact_attention_with_lse(args[0], own_k, own_v, None))
    out, lse = triton_latent_attention(*args, block_s=16, split_s=32, own=(own_k, own_v, None))
    torch.testing.assert_close(out, want[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, want[1], rtol=1e-5, atol=1e-4)
    with pytest.raises(ValueError, match="one new token"):
        triton_latent_attention(*args, own=(own_k.expand(-1, -1, 2, -1), own_v, None))


@pytest.mark.parametrize("length,masked", [(3, True), (3, False), (1, False)])
@pytest.mark.parametrize("tile", [16, 1024])
def test_serving_path_attends_past_latents_and_new_tokens_together(length, masked, tile):
    """latent_attention(own=...) on the CPU path: new tokens causal among themselves (an explicit
    mask, a padded row's, or None), in one pass or merged after the tiles."""
    args = _case(2, 4, 2, 2, length, 40, 16, 6, 10, seed=6, padded=True)
    g = torch.Generator().manual_seed(7)
    own_k, own_v = torch.randn(2, 2, length, 16, generator=g), torch.randn(2, 2, length, 16, generator=g)
    mask = torch.ones(length, length, dtype=torch.bool).tril().repeat(2, 1, 1, 1) if masked else None
    if masked:
        mask[1, 0, 2, 0] = False                         # row 1's first new token is padding to its last
    want = merge_partial_attention(*reference_latent_attention(*args), *exact_attention_with_lse(args[0], own_k, own_v, mask))
    out, lse = torch_latent_attention(*args, tile=tile, own=(own_k, own_v, mask))
    torch.testing.assert_close(out, want[0], rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(lse, want[1], rtol=1e-5, atol=1e-4)
    out, lse = latent_attention(*args, own=(own_k, own_v, mask))
    torch.testing.assert_close(out, want[0], rtol=1e-4, atol=1e-4)
