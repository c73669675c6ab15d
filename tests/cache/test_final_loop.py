"""Final-loop reuse: exact for a one-loop model, T times smaller, and really lossy when T > 1."""
import torch

from loopkv.cache import make_cache
from loopkv.models import OuroConfig, OuroForCausalLM


def model_with_loops(loops, seed=0):
    config = OuroConfig(vocab_size=61, hidden_size=48, num_hidden_layers=2, total_ut_steps=loops,
                        num_attention_heads=4, head_dim=12, intermediate_size=96, rope_theta=10000.0,
                        max_position_embeddings=128, initializer_range=0.3)
    torch.manual_seed(seed)
    return OuroForCausalLM(config).eval()


def stream(model, cache, tokens, prefill=3):
    with torch.no_grad():
        pieces = [model(tokens[:, :prefill], cache=cache).logits]
        for i in range(prefill, tokens.shape[1]):
            pieces.append(model(tokens[:, i:i + 1], cache=cache).logits)
    return torch.cat(pieces, 1)


def test_one_loop_model_is_exact():
    model = model_with_loops(1)
    tokens = torch.randint(3, 61, (2, 9))
    want = stream(model, make_cache("full", model.config), tokens)
    torch.testing.assert_close(stream(model, make_cache("final_loop", model.config), tokens), want)


def test_looped_model_differs_and_uses_T_times_less_memory():
    model = model_with_loops(3)
    tokens = torch.randint(3, 61, (2, 9))
    full, reuse = make_cache("full", model.config), make_cache("final_loop", model.config)
    a, b = stream(model, full, tokens), stream(model, reuse, tokens)
    torch.testing.assert_close(a[:, :3], b[:, :3])          # the prefill attends exactly
    assert (a[:, 3:] - b[:, 3:]).abs().max() > 1e-3          # decoded tokens see final-loop K/V only
    assert full.allocated_bytes() == 3 * reuse.allocated_bytes()
    assert reuse.allocated_bytes() == reuse.bytes_per_token(torch.float32) * 2 * 9
