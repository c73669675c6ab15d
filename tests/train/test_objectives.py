"""Ouro's objective against a hand computation, and the lr schedule's shape."""
import math

import pytest
import torch

from loopkv.train.objectives import ouro_loss
from loopkv.train.schedule import warmup_cosine


def test_ouro_loss_matches_hand_computation():
    torch.manual_seed(0)
    T, B, L, V = 3, 2, 4, 5
    logits = [torch.randn(B, L, V) for _ in range(T)]
    labels = torch.randint(0, V, (B, L))
    labels[1, 3] = -100
    pdf = torch.softmax(torch.randn(B, L, T), -1)
    beta = 0.1
    terms = ouro_loss(logits, pdf, labels, beta)

    total, entropy, n = 0.0, 0.0, 0
    for b in range(B):
        for i in range(L):
            if labels[b, i] == -100:
                continue
            n += 1
            for t in range(T):
                logp = torch.log_softmax(logits[t][b, i], -1)[labels[b, i]]
                total += float(pdf[b, i, t]) * -float(logp)
            entropy += -sum(float(p) * math.log(float(p)) for p in pdf[b, i])
    assert math.isclose(float(terms["loss"]), total / n - beta * entropy / n, rel_tol=1e-5)
    assert math.isclose(float(terms["entropy"]), entropy / n, rel_tol=1e-5)


def test_an_exit_prior_adds_beta_times_the_cross_entropy_of_the_gate_with_it():
    """KL(p || pi) = -H(p) - sum p log pi: the loss adds -beta * mean(sum_t p_t log pi_t) (hand-computed);
    a uniform prior changes only the constant; the gate's optimum leans where the prior does."""
    torch.manual_seed(1)
    T, B, L, V = 4, 2, 3, 6
    logits = [torch.randn(B, L, V) for _ in range(T)]
    labels = torch.randint(0, V, (B, L))
    labels[0, 0] = -100
    pdf = torch.softmax(torch.randn(B, L, T), -1)
    beta, prior = 0.2, [1.0, 2.0, 3.0, 4.0]
    plain = float(ouro_loss(logits, pdf, labels, beta)["loss"])
    cross, n = 0.0, 0
    for b in range(B):
        for i in range(L):
            if labels[b, i] != -100:
                n += 1
                cross += sum(float(pdf[b, i, t]) * math.log(prior[t] / 10) for t in range(T))
    assert math.isclose(float(ouro_loss(logits, pdf, labels, beta, prior)["loss"]), plain - beta * cross / n, rel_tol=1e-5)
    assert math.isclose(float(ouro_loss(logits, pdf, labels, beta, [5.0] * T)["loss"]), plain + beta * math.log(T),
                        rel_tol=1e-5)
    # with equal losses at every loop, gradient descent on the gate moves it to the prior
    same = [torch.zeros(1, 1, V)] * T
    gate = torch.zeros(1, 1, T, requires_grad=True)
    opt = torch.optim.SGD([gate], lr=5.0)
    for _ in range(300):
        opt.zero_grad()
        ouro_loss(same, torch.softmax(gate, -1), torch.zeros(1, 1, dtype=torch.long), beta, prior)["loss"].backward()
        opt.step()
    assert torch.allclose(torch.softmax(gate, -1)[0, 0], torch.tensor(prior) / 10, atol=1e-3)
    with pytest.raises(ValueError, match="4 positive weights"):
        ouro_loss(logits, pdf, labels, beta, [1.0, 2.0])


def test_gradient_reaches_the_exit_distribution():
    logits = [torch.randn(1, 3, 4) for _ in range(2)]
    gate = torch.zeros(1, 3, 2, requires_grad=True)
    pdf = torch.softmax(gate, -1)
    ouro_loss(logits, pdf, torch.tensor([[0, 1, 2]]), 0.0)["loss"].backward()
    assert gate.grad.abs().sum() > 0


def test_warmup_then_cosine_to_floor():
    values = [warmup_cosine(s, 100, 10, 0.1) for s in range(100)]
    assert values[0] == 0.1 and math.isclose(values[9], 1.0)
    assert all(a >= b for a, b in zip(values[9:], values[10:]))
    assert math.isclose(warmup_cosine(100, 100, 10, 0.1), 0.1)
