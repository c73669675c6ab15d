"""The teacher's per-loop cache: T*D entries, exact byte counts, one interface."""
import torch

from loopkv.cache import LoopCache, make_cache
from loopkv.models import OuroConfig, OuroForCausalLM


def tiny_config(**overrides):
    base = dict(vocab_size=97, hidden_size=32, num_hidden_layers=2, total_ut_steps=3, num_attention_heads=4,
                head_dim=8, intermediate_size=64, rope_theta=10000.0, max_position_embeddings=128)
    base.update(overrides)
    return OuroConfig(**base)


def test_full_cache_holds_2TDHd_values_per_token():
    config = tiny_config()
    torch.manual_seed(0)
    model = OuroForCausalLM(config).eval()
    cache = make_cache("full", config)
    with torch.no_grad():
        model(torch.randint(3, 97, (2, 7)), cache=cache)
        model(torch.randint(3, 97, (2, 1)), cache=cache)
    T, D, H, d = 3, 2, 4, 8
    tokens = 2 * 8  # batch 2, 8 tokens each
    values = sum(t.numel() for t in cache.cached_tensors())
    assert values == 2 * T * D * H * d * tokens
    assert len(cache.cached_tensors()) == 2 * T * D
    assert cache.allocated_bytes() == cache.bytes_per_token(torch.float32) * tokens
    assert cache.bytes_per_token(torch.bfloat16) == 2 * T * D * H * d * 2


def test_ouro_1p4b_teacher_is_768_kib_per_token_in_bf16():
    config = OuroConfig(hidden_size=2048, num_hidden_layers=24, total_ut_steps=4, num_attention_heads=16,
                        head_dim=128, intermediate_size=5632, vocab_size=49152)
    assert make_cache("full", config).bytes_per_token(torch.bfloat16) == 768 * 1024


class RecordingCache(LoopCache):
    """Records the calls attention makes; stores like the full cache."""

    name = "recording"

    def __init__(self, config):
        super().__init__(config)
        self.calls = []
        self.inner = make_cache("full", config)

    def begin_forward(self, positions):
        super().begin_forward(positions)
        self.inner.begin_forward(positions)

    def update(self, loop, layer, positions, k, v):
        self.calls.append((loop, layer, tuple(positions.shape), tuple(k.shape)))
        return self.inner.update(loop, layer, positions, k, v)

    def end_forward(self):
        super().end_forward()
        self.inner.end_forward()

    def loop_bytes_per_token(self, dtype):
        return self.inner.bytes_per_token(dtype)

    def loop_tensors(self):
        return self.inner.cached_tensors()


def test_attention_goes_through_the_interface_once_per_loop_and_layer():
    config = tiny_config()
    model = OuroForCausalLM(config).eval()
    cache = RecordingCache(config)
    with torch.no_grad():
        model(torch.randint(3, 97, (2, 5)), cache=cache)
    assert [(c[0], c[1]) for c in cache.calls] == [(t, d) for t in range(3) for d in range(2)]
    assert all(c[2] == (2, 5) and c[3] == (2, 4, 5, 8) for c in cache.calls)
    assert cache.get_seq_length() == 5
