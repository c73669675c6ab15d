"""MELT's state update, every gate variant against its definition on hand-computed numbers."""
import math

import pytest
import torch

from loopkv.models.melt_gate import GATES, TABLE3_ORDER, VARIANTS, MeltGate, gate_variant

X = [torch.tensor([[1.0, -2.0]]), torch.tensor([[3.0, 0.0]]), torch.tensor([[-1.0, 4.0]])]


def run(gate, xs=X):
    h, states = None, []
    for loop, x in enumerate(xs):
        h = gate(loop, x, h)
        states.append(h)
    return states


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_state_starts_as_the_first_loops_input(variant):
    assert torch.equal(run(MeltGate(2, variant))[0], X[0])


def test_mean_is_the_running_mean_of_the_inputs():
    states = run(MeltGate(2, "mean"))
    torch.testing.assert_close(states[1], torch.tensor([[2.0, -1.0]]))           # (x1 + x2) / 2
    torch.testing.assert_close(states[2], torch.tensor([[1.0, 2.0 / 3.0]]))      # (x1 + x2 + x3) / 3


def test_ema_uses_the_fixed_decay():
    states = run(MeltGate(2, "ema", ema_decay=0.25))
    h2 = 0.25 * X[0] + 0.75 * X[1]                                               # [2.5, -0.5]
    torch.testing.assert_close(states[1], torch.tensor([[2.5, -0.5]]))
    torch.testing.assert_close(states[2], 0.25 * h2 + 0.75 * X[2])               # [0.625, 2.875]


def test_last_keeps_no_memory():
    assert all(torch.equal(s, x) for s, x in zip(run(MeltGate(2, "last")), X))


def test_full_gate_is_elementwise_sigmoid_of_input_and_state():
    gate = MeltGate(2, "full")
    with torch.no_grad():
        gate.input_gate.weight.copy_(torch.tensor([[0.5, 0.0], [0.0, -1.0]]))   # W_z (out x in)
        gate.input_gate.bias.copy_(torch.tensor([0.1, -0.2]))
        gate.state_gate.weight.copy_(torch.tensor([[0.0, 1.0], [2.0, 0.0]]))    # U_z
    h2 = run(gate, X[:2])[1]
    # z = sigmoid(x2 W^T + b + h1 U^T): x2 = [3, 0], h1 = [1, -2]
    z = torch.tensor([[1 / (1 + math.exp(-(1.5 + 0.1 - 2.0))), 1 / (1 + math.exp(-(0.0 - 0.2 + 2.0)))]])
    torch.testing.assert_close(h2, z * X[0] + (1 - z) * X[1])


def test_single_gate_is_one_scalar_per_token():
    gate = MeltGate(2, "single")
    with torch.no_grad():
        gate.input_gate.weight.copy_(torch.tensor([[1.0, 1.0]]))
        gate.input_gate.bias.copy_(torch.tensor([0.5]))
        gate.state_gate.weight.copy_(torch.tensor([[-1.0, 0.0]]))
    h2 = run(gate, X[:2])[1]
    z = 1 / (1 + math.exp(-(3.0 + 0.5 - 1.0)))                                   # one value for both dims
    torch.testing.assert_close(h2, z * X[0] + (1 - z) * X[1])


def test_gates_start_half_open_and_are_trainable():
    gate = MeltGate(4, "full")
    x, h = torch.randn(3, 4), torch.randn(3, 4)
    assert torch.equal(gate.gate(1, x, h), torch.full((3, 4), 0.5))
    gate(1, x, h).sum().backward()
    assert gate.input_gate.weight.grad is not None and gate.state_gate.weight.grad is not None


def test_bad_variant_and_decay_are_rejected():
    with pytest.raises(ValueError, match="gate variant"):
        MeltGate(2, "gru")
    with pytest.raises(ValueError, match="ema_decay"):
        MeltGate(2, "ema", ema_decay=1.0)


def test_one_definition_of_the_variants_gives_table3s_order_and_what_reads_ema_decay():
    """GATES is where a variant is defined: its Table 3 row is the paper's (best first by the paper's
    AIME24, report/paper_values.py), and it reads ema_decay exactly when its update changes with it."""
    from loopkv.report.paper_values import MELT_TABLE3
    from loopkv.train.melt_recipes import GATE_ORDER

    assert set(VARIANTS) == set(MELT_TABLE3) and len(VARIANTS) == len(GATES)
    assert GATE_ORDER == TABLE3_ORDER == tuple(sorted(MELT_TABLE3, key=MELT_TABLE3.get, reverse=True))
    x, h = torch.tensor([[3.0, 0.0]]), torch.tensor([[1.0, -2.0]])
    for variant in VARIANTS:
        states = [MeltGate(2, variant, ema_decay=decay)(2, x, h) for decay in (0.2, 0.7)]
        moved = not torch.equal(*states)
        assert gate_variant(variant).reads_ema_decay == moved, variant
