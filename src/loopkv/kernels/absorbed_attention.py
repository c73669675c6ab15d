"""Absorbed attention over latent keys and values (decoupled-RoPE LLA's read, LLA Appendix J):
with no rotation on K's decoded part, a score is bilinear in the query and the key's latent, so the
decoder folds into the query once per read and every past key costs O(width of its latents):

    score_s = (q_C W_up,k,t) . c_k,s + q_R . k_R,s + q_C . mu_k,t      (folded query . key latent + bias)
    out     = (sum_s a_s c_v,s) W_up,v,t^T + mu_v,t                     (V absorbed, exact: sum_s a_s = 1)

The caller folds the queries (it owns the codec's layout); this computes the softmax in latent space.
Shapes: q_lat (B, Hq, L, w), bias (B, Hq, L), keys (B, H_kv, S, w), values (B, H_kv, S, r_v),
up_v (H_kv, d, r_v), mu_v (H_kv, d), key_valid (B, S) bool or None; query heads grouped over KV heads.
Returns (out (B, Hq, L, d) float32, lse (B, Hq, L) float32), lse for merging with other keys
(latent_attention.merge_partial_attention). Transient memory is the (L, S) scores of each head, as
in exact attention's math path; nothing of size S x d_head is built, and a 16-bit store is read as
it is (its products accumulate in float32).
"""
from __future__ import annotations

import torch


def absorbed_attention(q_lat, bias, keys, values, up_v, mu_v, key_valid=None, scale: float = 1.0):
    b, hq, length, width = q_lat.shape
    h_kv, r_v = keys.shape[1], values.shape[-1]
    if hq % h_kv or keys.shape[-1] != width or values.shape[:3] != keys.shape[:3] or up_v.shape[0] != h_kv \
            or up_v.shape[-1] != r_v or mu_v.shape != up_v.shape[:2] or bias.shape != q_lat.shape[:3]:
        raise ValueError(f"absorbed attention: q_lat {tuple(q_lat.shape)}, bias {tuple(bias.shape)}, keys "
                         f"{tuple(keys.shape)}, values {tuple(values.shape)}, up_v {tuple(up_v.shape)} do not fit")
    group = hq // h_kv
    dtype = torch.promote_types(q_lat.dtype, torch.float32)
    # the latents are read in their stored dtype (a 16-bit store is not copied to float32 at every call:
    # matmuls accumulate in float32); scores, softmax and the decode in float32 or wider
    store = keys.dtype if keys.dtype in (torch.bfloat16, torch.float16) else dtype
    # queries grouped under their KV head: one pass over a head's latents serves its whole group
    qg = q_lat.reshape(b, h_kv, group * length, width)
    scores = (qg.to(store) @ keys.to(store).transpose(-1, -2)).to(dtype)
    scores = (scores + bias.to(dtype).reshape(b, h_kv, group * length, 1)) * scale
    if key_valid is not None:
        scores = scores.masked_fill(~key_valid[:, None, None, :], float("-inf"))
    lse = torch.logsumexp(scores, dim=-1)
    weights = torch.softmax(scores, dim=-1).nan_to_num(0.0)
    weighted = (weights.to(store) @ values.to(store)).to(dtype)                        # (B, H_kv, gL, r_v)
    out = torch.einsum("bhqr,hdr->bhqd", weighted, up_v.to(dtype)) + mu_v.to(dtype)[None, :, None]
    return out.reshape(b, hq, length, -1), lse.reshape(b, hq, length)


def fold_query(q_content, q_rope, up_k, mu_k):
    """(q_lat, bias) of queries split into content (B, Hq, L, d_c) and rope (B, Hq, L, d_rope) dims,
    with K's loop-t decoder rows per query head up_k (Hq, d_c, r_k) and mean mu_k (Hq, d_c): the
    score of a latent key [c_k, k_R] is q_lat . [c_k, k_R] + bias."""
    q_lat = torch.cat([torch.einsum("bhlc,hcr->bhlr", q_content, up_k), q_rope], dim=-1)
    return q_lat, torch.einsum("bhlc,hc->bhl", q_content, mu_k)
