"""Huginn's training-time depth: the sampled step counts follow the paper's distribution, and (n, k)
steps give exactly the gradient of k differentiable steps from the state n steps reach without grad."""
import math
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import small_huginn  # noqa: E402

from loopkv.models.huginn_depth import sample_depth  # noqa: E402


def test_sampled_depths_have_the_papers_distribution():
    """total = 1 + Poisson(rate), rate log-normal of mean r and log-std 1/2: E[total] = r + 1 and, by the
    law of total variance, Var[total] = r + r^2 (e^{1/4} - 1); the last min(total, k) steps carry the
    gradient."""
    generator = torch.Generator().manual_seed(0)
    r, k, n = 32, 8, 20000
    draws = [sample_depth(r, k, generator) for _ in range(n)]
    totals = torch.tensor([a + b for a, b in draws], dtype=torch.float64)
    assert all(b == min(a + b, k) for a, b in draws)
    mean_want, var_want = r + 1, r + r * r * (math.exp(0.25) - 1)
    assert abs(float(totals.mean()) - mean_want) < 4 * math.sqrt(var_want / n)
    assert abs(float(totals.var()) / var_want - 1) < 0.1
    assert int(totals.min()) >= 1


def test_truncated_backprop_is_the_gradient_of_the_last_steps():
    model = small_huginn(steps=3, layers=2, heads=2, head_dim=8, std=0.2).train()
    ids = torch.randint(0, 64, (2, 7), generator=torch.Generator().manual_seed(1))
    start = model.loop_forward_kwargs(ids)["input_states"]

    def grads(**kwargs):
        model.zero_grad(set_to_none=True)
        model(ids, use_cache=False, **kwargs).logits.square().mean().backward()
        return {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}

    truncated = grads(num_steps=(3, 2), input_states=start)
    with torch.no_grad():   # the state after 3 steps, reached another way: a plain forward's core states
        reached = model(ids, num_steps=3, input_states=start, output_core_states=True, use_cache=False).core_states[-1]
    explicit = grads(num_steps=(0, 2), input_states=reached)
    assert truncated.keys() == explicit.keys()
    for name in truncated:
        torch.testing.assert_close(truncated[name], explicit[name], atol=1e-6, rtol=1e-5, msg=name)
    full = grads(num_steps=(0, 5), input_states=start)   # all 5 with grad: a different gradient
    assert not torch.allclose(full["transformer.adapter.weight"], truncated["transformer.adapter.weight"], atol=1e-6)
