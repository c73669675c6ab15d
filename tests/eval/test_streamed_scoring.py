"""Scoring through a method's cache: streamed continuations and streamed teacher fidelity."""
import sys
from pathlib import Path

import pytest
import torch

from loopkv.cache import make_cache
from loopkv.eval.fidelity import teacher_fidelity
from loopkv.eval.generation import continuation_logprobs, streamed_logits
from loopkv.models import OuroConfig, OuroForCausalLM


sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import small_huginn  # noqa: E402


def model(family="ouro"):
    if family == "huginn":   # random initial states (init_scale 1), as Huginn runs
        return small_huginn(steps=3, layers=2, heads=2, head_dim=16, std=0.2)
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


@pytest.mark.parametrize("family", ["ouro", "huginn"])
def test_fidelity_is_perfect_for_the_teacher_and_not_for_a_lossy_cache(family):
    """Huginn: the teacher's forward and the streamed method start from the same initial states."""
    m = model(family)
    windows = torch.randint(3, 61, (5, 12))
    exact = teacher_fidelity(m, windows, 2, lambda: make_cache("full", m.config))
    assert abs(exact["kl"]) < 1e-6 and exact["top1"] == 1.0 and exact["n_tokens"] == 5 * 11
    assert abs(exact["ce"] - exact["teacher_ce"]) < 1e-5
    lossy = teacher_fidelity(m, windows, 2, lambda: make_cache("final_loop", m.config))
    assert lossy["kl"] > 1e-3 and lossy["top1"] < 1.0 and lossy["teacher_ce"] == exact["teacher_ce"]


def test_every_method_is_measured_from_the_same_huginn_start():
    """A measurement's random draws are fixed: the same method measures the same KL twice, whatever the
    process drew before (so methods are compared on the same initial states)."""
    m = model("huginn")
    windows = torch.randint(3, 61, (4, 10), generator=torch.Generator().manual_seed(2))
    torch.manual_seed(1)
    first = teacher_fidelity(m, windows, 2, lambda: make_cache("final_loop", m.config))
    torch.manual_seed(2)
    again = teacher_fidelity(m, windows, 2, lambda: make_cache("final_loop", m.config))
    assert first == again and first["kl"] > 1e-3


def count_prefills(monkeypatch, model_class) -> list[int]:
    """The batch size of every forward of `model_class` over more than one token (a prefill), as they run."""
    prefilled = []
    forward = model_class.forward

    def counting(self, input_ids=None, **kwargs):
        if input_ids.shape[1] > 1:
            prefilled.append(input_ids.shape[0])
        return forward(self, input_ids=input_ids, **kwargs)

    monkeypatch.setattr(model_class, "forward", counting)
    return prefilled


@pytest.mark.parametrize("method", ["full", "final_loop"])
def test_a_context_shared_by_several_continuations_is_prefilled_once(method, monkeypatch):
    """A multiple-choice item: its choices score as each scored alone (batch of one, the path with
    no sharing), and the batch's forwards prefill each distinct context once. (Every method's
    cache rows selected after a prefill: tests/cache/method_checks.check_rows.)"""
    m = model()
    make = lambda: make_cache(method, m.config)  # noqa: E731
    g = torch.Generator().manual_seed(3)
    items = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (6, 9, 4)]
    contexts = [items[0]] * 3 + [items[1]] * 4 + [items[2]]   # 3, 4 and 1 choices
    conts = [torch.randint(3, 61, (n,), generator=g).tolist() for n in (2, 4, 1, 3, 2, 5, 1, 3)]
    alone = [continuation_logprobs(m, [c], [k], batch_size=1, cache_factory=make)[0] for c, k in zip(contexts, conts)]
    prefilled = count_prefills(monkeypatch, OuroForCausalLM)
    shared = continuation_logprobs(m, contexts, conts, batch_size=8, cache_factory=make)
    assert prefilled == [3]   # one forward of the three distinct contexts
    torch.testing.assert_close(torch.tensor(shared), torch.tensor(alone), atol=1e-4, rtol=0)   # float32


def test_a_model_that_draws_random_states_prefills_every_row_itself(monkeypatch):
    """Huginn draws each prefilled row's initial state: sharing a prefill would change which states
    the rows draw, so its rows keep their own prefill (and their results, unchanged by sharing)."""
    from loopkv.models.modeling_huginn import HuginnForCausalLM

    m = model("huginn")
    g = torch.Generator().manual_seed(5)
    item = torch.randint(3, 61, (6,), generator=g).tolist()
    contexts, conts = [item] * 3, [torch.randint(3, 61, (2,), generator=g).tolist() for _ in range(3)]
    prefilled = count_prefills(monkeypatch, HuginnForCausalLM)
    continuation_logprobs(m, contexts, conts, batch_size=3, cache_factory=lambda: make_cache("full", m.config))
    assert prefilled == [3]
