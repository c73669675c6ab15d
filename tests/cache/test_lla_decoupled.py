"""Decoupled-RoPE LLA (LLA Table 14): which dims keep RoPE, what its codec starts from, what its cache
stores (against a hand computation from the K/V it was given), the query it scores with, the absorbed
kernel against reconstruct-then-attend, its read paths against each other, and its budget rule.
(The checks every method goes through, decode = teacher-forced view included, are test_every_method.py's.)"""
import math

import pytest
import torch

from cache_helpers import random_codec, small_model, stream, stream_padded
from loopkv.cache import make_cache
from loopkv.cache.decoupled_codec import DecoupledCodec
from loopkv.cache.lla_decoupled import LLADecoupledCache
from loopkv.cache.settings import configured_setting
from loopkv.cache.teacher_forced import teacher_forced_forward
from loopkv.errors import LoopKVError
from loopkv.kernels.absorbed_attention import absorbed_attention
from loopkv.models.rope import Rotary, rope_dims

LOOPS, LAYERS, HEADS, HEAD_DIM, D_ROPE = 3, 2, 4, 16, 4
METHODS_CFG = {"cache_dtype": "bfloat16", "k_share": 0.375, "rope_share": D_ROPE / HEAD_DIM, "query_adapter": True,
               "budgets": {"4x": 4.0}}


def test_the_highest_frequency_pairs_keep_rope_and_the_content_dims_none():
    rotated, content = rope_dims(8, 4, "rotate_half")      # pairs (0,4) (1,5) are the two highest frequencies
    assert rotated.tolist() == [0, 1, 4, 5] and content.tolist() == [2, 3, 6, 7]
    rotated, content = rope_dims(8, 4, "interleaved")      # pairs (0,1) (2,3)
    assert rotated.tolist() == [0, 1, 2, 3] and content.tolist() == [4, 5, 6, 7]
    positions = torch.tensor([[0, 3, 17]])
    cos, sin = Rotary(8, 100.0, rotated_pairs=2).cos_sin(positions, torch.float64)
    for dim in range(8):
        pair = dim % 4
        angle = positions[0].double() * (100.0 ** (-2 * pair / 8) if pair < 2 else 0.0)
        torch.testing.assert_close(cos[0, 0, :, dim], torch.cos(angle))
        torch.testing.assert_close(sin[0, 0, :, dim], torch.sin(angle))
    with pytest.raises(ValueError, match="d_rope"):
        rope_dims(8, 3)


def _setting(config, **overrides):
    return configured_setting({**METHODS_CFG, **overrides}, "lla_decoupled", "4x", config)


def test_the_budget_rule_takes_the_rope_slice_out_of_lla_s_per_head_budget():
    config = small_model(loops=LOOPS, layers=LAYERS, heads=HEADS, head_dim=HEAD_DIM).config
    setting = _setting(config)
    # teacher: 2 * T * d = 96 values per (layer, head) and token; 4x: 24 = r_k + d_rope + r_v
    assert setting["kwargs"] == {"rank_k": 8, "rank_v": 12, "d_rope": 4, "query_adapter": True}
    assert setting["ratio"] == 4.0
    # a share of 0.75 keeps 12 dims rotated: 12 of the 24 values remain for the latents
    assert _setting(config, rope_share=0.75)["kwargs"] == {"rank_k": 4, "rank_v": 8, "d_rope": 12, "query_adapter": True}
    with pytest.raises(LoopKVError, match="rope_share = 0.9 .d_rope 14. leaves -2"):
        configured_setting({**METHODS_CFG, "rope_share": 0.9, "budgets": {"8x": 8.0}}, "lla_decoupled", "8x", config)
    with pytest.raises(LoopKVError, match="keeps 0 dims rotated"):
        _setting(config, rope_share=0.05)


def _random_codec(config, seed=0, dtype=torch.float64, query_adapter=True):
    """Every parameter random (orthonormal bases and a random mean as cache_helpers', rope mix, adapter)."""
    codec = random_codec(_setting(config, query_adapter=query_adapter), config, seed, dtype)
    g = torch.Generator().manual_seed(seed + 1)
    with torch.no_grad():
        codec.rope_mix.copy_(torch.rand(codec.rope_mix.shape, generator=g, dtype=torch.float64))
        if query_adapter:
            codec.adapter.add_(0.3 * torch.randn(codec.adapter.shape, generator=g, dtype=torch.float64))
    return codec


def _model():
    return small_model(loops=LOOPS, layers=LAYERS, heads=HEADS, head_dim=HEAD_DIM).double()


def test_svd_init_takes_k_from_the_content_dims_moments_and_v_from_the_whole_vector():
    config = _model().config
    codec = LLADecoupledCache.new_codec(_setting(config)["kwargs"], config).double()
    groups, width = LAYERS * HEADS, LOOPS * HEAD_DIM
    g = torch.Generator().manual_seed(3)
    data = torch.randn(groups, 400, width, generator=g, dtype=torch.float64) @ torch.randn(width, width, generator=g,
                                                                                         dtype=torch.float64)
    mean = data.mean(1)
    cov = torch.einsum("gnx,gny->gxy", data - mean[:, None], data - mean[:, None]) / 400
    codec.initialise("svd", {"k": mean, "v": mean}, {"k": cov, "v": cov})
    content = [d for d in range(HEAD_DIM) if d % (HEAD_DIM // 2) >= D_ROPE // 2]     # by hand: not the top pairs
    rows = [t * HEAD_DIM + d for t in range(LOOPS) for d in content]
    for kind, picked, rank in (("k", rows, codec.ranks["k"]), ("v", list(range(width)), codec.ranks["v"])):
        mu, down, up = codec.params(kind)
        torch.testing.assert_close(mu, mean[:, picked])
        # the top-rank principal subspace of the picked coordinates' data, by SVD of the centred data
        centred = (data - mean[:, None])[:, :, picked]
        top = torch.linalg.svd(centred, full_matrices=False).Vh[:, :rank].transpose(1, 2)
        torch.testing.assert_close(down @ down.transpose(1, 2), top @ top.transpose(1, 2), atol=1e-8, rtol=0)
        torch.testing.assert_close(up, down)
    torch.testing.assert_close(codec.rope_mix, torch.full((groups, LOOPS), 1 / LOOPS, dtype=torch.float64))
    torch.testing.assert_close(codec.adapter, torch.eye(HEAD_DIM - D_ROPE, dtype=torch.float64).expand_as(codec.adapter))
    with pytest.raises(ValueError, match="svd"):
        codec.initialise("random", {"k": mean, "v": mean}, {"k": cov, "v": cov})


def _rotate(x, position, theta, pairs):
    """x (..., d) rotated by hand (rotate-half pairs (i, i + d/2)), only pairs < `pairs`."""
    out, half = x.clone(), x.shape[-1] // 2
    for i in range(pairs):
        angle = position * theta ** (-2 * i / x.shape[-1])
        c, s = math.cos(angle), math.sin(angle)
        out[..., i], out[..., i + half] = x[..., i] * c - x[..., i + half] * s, x[..., i + half] * c + x[..., i] * s
    return out


def test_the_cache_stores_the_content_latent_and_the_rotated_loop_mix_it_should():
    model = _model()
    codec = _random_codec(model.config)
    cache = LLADecoupledCache(model.config, codec, read_path="latent")
    given = {}
    attend = cache.attend

    def recording(loop, layer, positions, q, k, v, mask):
        given.setdefault((loop, layer), []).append((k, v))
        return attend(loop, layer, positions, q, k, v, mask)

    cache.attend = recording
    tokens = torch.randint(3, 61, (2, 6), generator=torch.Generator().manual_seed(0))
    stream(model, cache, tokens, prefill=3)
    content = [d for d in range(HEAD_DIM) if d % (HEAD_DIM // 2) >= D_ROPE // 2]
    rope = [d for d in range(HEAD_DIM) if d not in content]
    r_k = codec.ranks["k"]
    for layer in range(LAYERS):
        k = torch.stack([torch.cat([kv[0] for kv in given[t, layer]], dim=2) for t in range(LOOPS)], dim=3)
        v = torch.stack([torch.cat([kv[1] for kv in given[t, layer]], dim=2) for t in range(LOOPS)], dim=3)
        for head in range(HEADS):
            g = layer * HEADS + head
            x_k = k[:, head][..., content].flatten(-2)                 # (B, S, T * d_c), loops outer
            c_k = (x_k - codec.mu_k[g]) @ codec.down_k[g]
            c_v = (v[:, head].flatten(-2) - codec.mu_v[g]) @ codec.down_v[g]
            mix = torch.einsum("bstd,t->bsd", k[:, head], codec.rope_mix[g])   # pre-RoPE, all dims
            rotated = torch.stack([_rotate(mix[:, s], s, 10000.0, D_ROPE // 2) for s in range(6)], dim=1)[..., rope]
            torch.testing.assert_close(cache.keys[layer][:, head, :, :r_k], c_k)
            # angles in float32, as the model's own rotation computes them
            torch.testing.assert_close(cache.keys[layer][:, head, :, r_k:], rotated, atol=2e-6, rtol=0)
            torch.testing.assert_close(cache.values[layer][:, head], c_v)
    assert cache.allocated_bytes() == 2 * 6 * LAYERS * HEADS * (r_k + D_ROPE + codec.ranks["v"]) * 8


def test_the_query_s_content_dims_are_unrotated_through_the_adapter_and_its_rope_dims_kept():
    model = _model()
    codec = _random_codec(model.config)
    cache = LLADecoupledCache(model.config, codec)
    positions = torch.tensor([[5, 9]])
    raw = torch.randn(1, HEADS, 2, HEAD_DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(1))
    q = torch.stack([_rotate(raw[:, :, i], int(p), 10000.0, HEAD_DIM // 2) for i, p in enumerate(positions[0])], 2)
    got = cache.read_query(0, 1, positions, q)
    content = [d for d in range(HEAD_DIM) if d % (HEAD_DIM // 2) >= D_ROPE // 2]
    rope = [d for d in range(HEAD_DIM) if d not in content]
    for head in range(HEADS):
        torch.testing.assert_close(got[0, head][:, content], raw[0, head][:, content] @ codec.adapter[HEADS + head])
        torch.testing.assert_close(got[0, head][:, rope], q[0, head][:, rope])


def test_the_absorbed_kernel_equals_reconstruct_then_attend():
    g = torch.Generator().manual_seed(4)
    b, hq, h_kv, length, past, d, d_c, r_k, r_v = 2, 4, 2, 3, 11, 8, 6, 3, 5
    q = torch.randn(b, hq, length, d, generator=g, dtype=torch.float64)
    content, rope = [0, 1, 2, 4, 5, 6], [3, 7]
    up_k, mu_k = torch.randn(h_kv, d_c, r_k, generator=g, dtype=torch.float64), torch.randn(h_kv, d_c, generator=g,
                                                                                         dtype=torch.float64)
    up_v, mu_v = torch.randn(h_kv, d, r_v, generator=g, dtype=torch.float64), torch.randn(h_kv, d, generator=g,
                                                                                       dtype=torch.float64)
    c_k = torch.randn(b, h_kv, past, r_k, generator=g, dtype=torch.float64)
    k_rope = torch.randn(b, h_kv, past, len(rope), generator=g, dtype=torch.float64)
    c_v = torch.randn(b, h_kv, past, r_v, generator=g, dtype=torch.float64)
    valid = torch.rand(b, past, generator=g) > 0.3
    # reference: every past K and V rebuilt in head space, then plain attention
    keys = torch.zeros(b, h_kv, past, d, dtype=torch.float64)
    keys[..., content] = c_k @ up_k.transpose(1, 2)[None] + mu_k[None, :, None]
    keys[..., rope] = k_rope
    values = c_v @ up_v.transpose(1, 2)[None] + mu_v[None, :, None]
    group = hq // h_kv
    scores = q @ keys.repeat_interleave(group, 1).transpose(-1, -2) / math.sqrt(d)
    scores = scores.masked_fill(~valid[:, None, None], float("-inf"))
    expected = torch.softmax(scores, -1) @ values.repeat_interleave(group, 1)
    # absorbed: the query folded into K's decoder
    up_q, mu_q = up_k.repeat_interleave(group, 0), mu_k.repeat_interleave(group, 0)
    folded = torch.cat([torch.einsum("bhlc,hcr->bhlr", q[..., content], up_q), q[..., rope]], dim=-1)
    bias = torch.einsum("bhlc,hc->bhl", q[..., content], mu_q)
    out, lse = absorbed_attention(folded, bias, torch.cat([c_k, k_rope], -1), c_v, up_v, mu_v, valid, d ** -0.5)
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(lse, torch.logsumexp(scores, -1))
    with pytest.raises(ValueError, match="do not fit"):
        absorbed_attention(folded, bias, c_k, c_v, up_v, mu_v, valid, 1.0)


def test_latent_full_and_absorbed_reads_give_the_same_padded_batches():
    model = _model()
    codec = _random_codec(model.config)
    g = torch.Generator().manual_seed(5)
    prompts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (6, 2, 5)]
    continuations = [torch.randint(3, 61, (4,), generator=g).tolist() for _ in prompts]
    rows = {path: stream_padded(model, LLADecoupledCache(model.config, codec, read_path=path), prompts, continuations)
            for path in ("latent", "full", "fused")}
    for path in ("full", "fused"):
        for got, want in zip(rows[path], rows["latent"]):
            torch.testing.assert_close(got, want, atol=2e-4 if path == "fused" else 1e-10, rtol=0)


def test_with_a_trained_adapter_and_mix_decode_is_still_the_teacher_forced_view():
    model = _model()
    codec = _random_codec(model.config, seed=7)
    tokens = torch.randint(3, 61, (2, 6), generator=torch.Generator().manual_seed(2))
    streamed = stream(model, LLADecoupledCache(model.config, codec, read_path="latent"), tokens, prefill=1)
    with torch.no_grad():
        _, source = teacher_forced_forward(model, tokens, make_cache("full", model.config))
        for _ in range(tokens.shape[1]):
            out, source = teacher_forced_forward(model, tokens, LLADecoupledCache(model.config, codec), source)
    torch.testing.assert_close(out.logits, streamed, atol=1e-8, rtol=0)


def test_a_codec_for_another_model_or_method_is_refused():
    model = _model()
    other = small_model(loops=2, layers=LAYERS, heads=HEADS, head_dim=HEAD_DIM).double()
    with pytest.raises(ValueError, match="DecoupledCodec"):
        LLADecoupledCache(model.config, _random_codec(other.config))
    with pytest.raises(ValueError, match="no content dims"):
        DecoupledCodec({"layer": 1, "head": 1, "loop": 2, "dim": 8}, {"k": 1, "v": 1}, 8)
