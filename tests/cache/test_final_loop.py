"""Final-loop reuse: exact for a one-loop model, T times smaller, and really lossy when T > 1."""
import torch

from loopkv.cache import make_cache
from cache_helpers import small_model, stream


def test_one_loop_model_is_exact():
    model = small_model(loops=1)
    tokens = torch.randint(3, 61, (2, 9))
    want = stream(model, make_cache("full", model.config), tokens)
    torch.testing.assert_close(stream(model, make_cache("final_loop", model.config), tokens), want)


def test_looped_model_differs_and_uses_T_times_less_memory():
    model = small_model(loops=3)
    tokens = torch.randint(3, 61, (2, 9))
    full, reuse = make_cache("full", model.config), make_cache("final_loop", model.config)
    a, b = stream(model, full, tokens), stream(model, reuse, tokens)
    torch.testing.assert_close(a[:, :3], b[:, :3])          # the prefill attends exactly
    assert (a[:, 3:] - b[:, 3:]).abs().max() > 1e-3          # decoded tokens see final-loop K/V only
    assert full.allocated_bytes() == 3 * reuse.allocated_bytes()
    assert reuse.allocated_bytes() == reuse.bytes_per_token(torch.float32) * 2 * 9
