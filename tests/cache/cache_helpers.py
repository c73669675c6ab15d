"""Shared by the cache tests: a small random looped model and streaming decode through a cache."""
import torch

from loopkv.models import OuroConfig, OuroForCausalLM


def small_model(loops=2, layers=2, heads=4, head_dim=12, seed=0):
    """Random weights with a large init, so continuations and cache errors are visible."""
    config = OuroConfig(vocab_size=61, hidden_size=heads * head_dim, num_hidden_layers=layers,
                        total_ut_steps=loops, num_attention_heads=heads, head_dim=head_dim,
                        intermediate_size=96, rope_theta=10000.0, max_position_embeddings=128,
                        initializer_range=0.3)
    torch.manual_seed(seed)
    return OuroForCausalLM(config).eval()


def stream(model, cache, tokens, prefill=3):
    """Logits of a prefill of `prefill` tokens, then one token at a time through `cache`."""
    with torch.no_grad():
        pieces = [model(tokens[:, :prefill], cache=cache).logits]
        for i in range(prefill, tokens.shape[1]):
            pieces.append(model(tokens[:, i:i + 1], cache=cache).logits)
    return torch.cat(pieces, 1)
