"""Cross-layer sharing: span 1 is the teacher; larger spans store ceil(D/span) layers and read
past tokens through the group's first layer."""
import pytest
import torch

from loopkv.cache import make_cache
from cache_helpers import small_model, stream


def test_span_one_equals_the_teacher():
    m = small_model(layers=4)
    tokens = torch.randint(3, 61, (2, 8))
    want = stream(m, make_cache("full", m.config), tokens)
    torch.testing.assert_close(stream(m, make_cache("cla", m.config, span=1), tokens), want, atol=0, rtol=0)


@pytest.mark.parametrize("span, groups", [(2, 2), (3, 2), (4, 1)])
def test_sharing_stores_fewer_layers_and_changes_decoding(span, groups):
    m = small_model(layers=4)
    tokens = torch.randint(3, 61, (2, 8))
    full, cla = make_cache("full", m.config), make_cache("cla", m.config, span=span)
    a, b = stream(m, full, tokens), stream(m, cla, tokens)
    torch.testing.assert_close(a[:, :3], b[:, :3])            # the prefill is exact
    assert (a[:, 3:] - b[:, 3:]).abs().max() > 1e-4
    assert cla.bytes_per_token(torch.float32) == 2 * 2 * groups * 4 * 12 * 4
    assert cla.allocated_bytes() == cla.bytes_per_token(torch.float32) * 2 * 8


def test_past_tokens_are_read_through_the_group_owner():
    m = small_model(layers=4)
    tokens = torch.randint(3, 61, (1, 5))
    cla = make_cache("cla", m.config, span=2)
    with torch.no_grad():
        m(tokens, cache=cla)
    seen = {}
    inner = cla.update

    def spy(loop, layer, positions, k, v):
        keys, values = inner(loop, layer, positions, k, v)
        seen[loop, layer] = keys[:, :, :5]
        return keys, values

    cla.update = spy
    with torch.no_grad():
        m(torch.randint(3, 61, (1, 1)), cache=cla)
    for loop in range(2):
        torch.testing.assert_close(seen[loop, 1], seen[loop, 0])   # layer 1 reads layer 0's past
        torch.testing.assert_close(seen[loop, 3], seen[loop, 2])


def test_bad_span_is_rejected():
    with pytest.raises(ValueError, match="span"):
        make_cache("cla", small_model(layers=4).config, span=5)
