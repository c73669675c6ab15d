"""Scoring through a method's cache: streamed continuations and streamed teacher fidelity."""
import torch

from loopkv.cache import make_cache
from loopkv.eval.fidelity import teacher_fidelity
from loopkv.eval.generation import continuation_logprobs, streamed_logits
from loopkv.models import OuroConfig, OuroForCausalLM


def model():
    config = OuroConfig(vocab_size=61, hidden_size=32, num_hidden_layers=2, total_ut_steps=3,
                        num_attention_heads=2, num_key_value_heads=2, head_dim=16, intermediate_size=64,
                        max_position_embeddings=64, initializer_range=0.3)
    torch.manual_seed(0)
    return OuroForCausalLM(config).eval()


def test_streamed_continuation_scores_through_the_full_cache_equal_one_forward():
    m = model()
    g = torch.Generator().manual_seed(1)
    contexts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (5, 9, 3, 7)]
    conts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (2, 4, 1, 3)]
    exact = continuation_logprobs(m, contexts, conts, batch_size=3)
    streamed = continuation_logprobs(m, contexts, conts, batch_size=3,
                                     cache_factory=lambda: make_cache("full", m.config))
    torch.testing.assert_close(torch.tensor(streamed), torch.tensor(exact), atol=1e-4, rtol=0)
    lossy = continuation_logprobs(m, contexts, conts, batch_size=3,
                                  cache_factory=lambda: make_cache("final_loop", m.config))
    assert max(abs(a - b) for a, b in zip(lossy, exact)) > 1e-3


def test_streamed_logits_through_the_full_cache_equal_one_forward():
    m = model()
    rows = torch.randint(3, 61, (2, 10))
    torch.testing.assert_close(streamed_logits(m, rows, make_cache("full", m.config)),
                               m(rows, use_cache=False).logits, atol=1e-4, rtol=0)


def test_fidelity_is_perfect_for_the_teacher_and_not_for_a_lossy_cache():
    m = model()
    windows = torch.randint(3, 61, (5, 12))
    exact = teacher_fidelity(m, windows, 2, lambda: make_cache("full", m.config))
    assert abs(exact["kl"]) < 1e-6 and exact["top1"] == 1.0 and exact["n_tokens"] == 5 * 11
    assert abs(exact["ce"] - exact["teacher_ce"]) < 1e-5
    lossy = teacher_fidelity(m, windows, 2, lambda: make_cache("final_loop", m.config))
    assert lossy["kl"] > 1e-3 and lossy["top1"] < 1.0 and lossy["teacher_ce"] == exact["teacher_ce"]
