"""K/V quantisation: bit packing, per-bit error bounds, cache bytes, and quality ordering by bits."""
import pytest
import torch

from loopkv.cache import make_cache
from loopkv.cache.bitpack import pack, unpack
from loopkv.cache.kv_quant import dequantize, quantize
from cache_helpers import small_model, stream


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_pack_round_trip_and_size(bits):
    torch.manual_seed(bits)
    codes = torch.randint(0, 2**bits, (3, 5, 32), dtype=torch.uint8)
    packed = pack(codes, bits)
    assert packed.dtype == torch.uint8 and packed.shape == (3, 5, 32 * bits // 8)
    assert torch.equal(unpack(packed, bits), codes.long())


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_quantisation_error_is_within_half_a_step(bits):
    torch.manual_seed(0)
    x = torch.randn(4, 2, 16, 32) * 3
    for dim in (-1, 2):
        codes, scale, zero = quantize(x, bits, dim)
        err = (dequantize(codes, scale, zero, torch.float32) - x).abs()
        bound = scale.float() / 2 + 1e-3 * x.abs().amax(dim=dim, keepdim=True)   # + float16 scale/zero rounding
        assert (err <= bound).all()
        assert int(codes.max()) <= 2**bits - 1


def test_error_shrinks_with_bits():
    m = small_model(heads=2, head_dim=32)
    tokens = torch.randint(3, 61, (2, 20))
    want = stream(m, make_cache("full", m.config), tokens, prefill=4)
    errors = {b: float((stream(m, make_cache("kv_quant", m.config, bits=b, group_size=4), tokens, prefill=4) - want)
                       .abs().max()) for b in (2, 4, 8)}
    assert errors[8] < errors[4] < errors[2]


@pytest.mark.parametrize("bits", [2, 3, 4, 8])
def test_cached_keys_and_values_are_within_the_bit_widths_bound(bits):
    m = small_model(heads=2, head_dim=32)
    tokens = torch.randint(3, 61, (2, 16))
    full, quant = make_cache("full", m.config), make_cache("kv_quant", m.config, bits=bits, group_size=4)
    with torch.no_grad():
        m(tokens, cache=full)
        m(tokens, cache=quant)
    for i in range(len(full.keys)):
        keys, values = quant._read(i, torch.float32)
        for got, want in ((keys, full.keys[i]), (values, full.values[i])):
            step = (want.max() - want.min()) / (2**bits - 1)      # the widest group's step
            assert (got - want).abs().max() <= step / 2 + 1e-3 * want.abs().max()


def test_bytes_match_formula_and_allocation():
    m = small_model(heads=2, head_dim=32)
    cache = make_cache("kv_quant", m.config, bits=4, group_size=8)
    with torch.no_grad():
        m(torch.randint(3, 61, (2, 15)), cache=cache)
        m(torch.randint(3, 61, (2, 1)), cache=cache)                          # 16 tokens: two whole groups
    T, D, H, d = 2, 2, 2, 32
    per_head = 2 * d * 4 // 8 + 2 * 2 * d / 8 + 2 * 2
    assert cache.bytes_per_token(torch.float32) == T * D * H * per_head
    assert all(r is None for r in cache.k_residual)
    assert cache.allocated_bytes() == cache.bytes_per_token(torch.float32) * 2 * 16
    with torch.no_grad():
        m(torch.randint(3, 61, (2, 3)), cache=cache)                          # 3 keys wait in full precision
    residual = sum(r.numel() * r.element_size() for r in cache.k_residual)
    assert residual == T * D * 2 * H * 3 * d * 4
    values_and_groups = cache.allocated_bytes() - residual
    assert values_and_groups == cache.bytes_per_token(torch.float32) * 2 * 16 + T * D * 2 * H * 3 * (d * 4 // 8 + 4)


def test_bad_bits_rejected():
    with pytest.raises(ValueError, match="bits"):
        make_cache("kv_quant", small_model(heads=2, head_dim=32).config, bits=5)
