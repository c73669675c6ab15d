"""Seeded nucleus sampling (generation.Sampling): the top-p set and the temperature against a hand
computation and against transformers' own warpers, the inverse-transform draw, and a prompt's
samples independent of its batch, batch size and company (issue 22: sampled decoding beside greedy)."""
import math

import pytest
import torch
from transformers import TemperatureLogitsWarper, TopPLogitsWarper

from loopkv.errors import LoopKVError
from loopkv.eval.generation import Sampling, draw, generate, greedy_generate, sampling_probs, top_p_mask
from loopkv.models import OuroConfig, OuroForCausalLM

PROBS = torch.tensor([[0.5, 0.3, 0.15, 0.05]])


@pytest.mark.parametrize("top_p, kept", [(0.7, [True, True, False, False]),   # 0.5 < 0.7 <= 0.8: two tokens
                                         (0.85, [True, True, True, False]),  # 0.8 < 0.85 <= 0.95
                                         (0.3, [True, False, False, False]),  # the top token alone reaches it
                                         (0.97, [True, True, True, True]),
                                         (1.0, [True, True, True, True])])
def test_the_top_p_set_is_the_smallest_reaching_p(top_p, kept):
    assert top_p_mask(PROBS.log(), top_p)[0].tolist() == kept
    shuffled = [2, 0, 3, 1]        # the set follows the probabilities, not the positions
    assert top_p_mask(PROBS[:, shuffled].log(), top_p)[0].tolist() == [kept[i] for i in shuffled]


def test_top_p_renormalises_the_kept_tokens():
    probs = sampling_probs(PROBS.log(), Sampling(temperature=1.0, top_p=0.7))[0]
    torch.testing.assert_close(probs, torch.tensor([0.5 / 0.8, 0.3 / 0.8, 0.0, 0.0]))


def test_temperature_divides_the_logits():
    logits = torch.tensor([[2.0, 1.0, 0.0]])
    for t in (0.5, 1.0, 2.0):
        weights = [math.exp(x / t) for x in (2.0, 1.0, 0.0)]
        expected = torch.tensor([[w / sum(weights) for w in weights]])
        torch.testing.assert_close(sampling_probs(logits, Sampling(temperature=t, top_p=1.0)), expected)
    # the cut comes after the temperature: at T = 1 the top token holds 0.665 < 0.7 (two tokens kept),
    # at T = 0.5 it holds 0.867 and is the nucleus alone
    assert (sampling_probs(logits, Sampling(1.0, 0.7))[0] > 0).tolist() == [True, True, False]
    assert sampling_probs(logits, Sampling(0.5, 0.7))[0].tolist() == [1.0, 0.0, 0.0]


@pytest.mark.parametrize("temperature, top_p", [(1.0, 0.7), (0.6, 0.9), (1.7, 0.5), (1.0, 1.0), (0.8, 0.05)])
def test_the_distribution_is_transformers_warpers(temperature, top_p):
    """Independent reference: transformers' TemperatureLogitsWarper then TopPLogitsWarper (the order
    generate applies them), then softmax."""
    torch.manual_seed(0)
    logits = torch.randn(32, 200) * 3
    reference = TopPLogitsWarper(top_p)(None, TemperatureLogitsWarper(temperature)(None, logits.clone()))
    ours = sampling_probs(logits, Sampling(temperature, top_p))
    assert torch.equal(ours > 0, torch.isfinite(reference))
    torch.testing.assert_close(ours, reference.softmax(-1))


def test_the_draw_inverts_the_cumulative_distribution():
    probs = sampling_probs(PROBS.log(), Sampling(1.0, 0.7)).expand(5, 4)
    uniform = torch.tensor([0.0, 0.6, 0.624, 0.626, 0.999999], dtype=torch.float64)
    assert draw(probs, uniform).tolist() == [0, 0, 0, 1, 1]    # token 0 holds [0, 0.625), token 1 the rest


def test_draws_follow_the_distribution_and_never_leave_the_nucleus():
    probs = sampling_probs(PROBS.log(), Sampling(1.0, 0.7)).expand(20000, 4)
    tokens = draw(probs, torch.rand(20000, generator=torch.Generator().manual_seed(0), dtype=torch.float64))
    counts = torch.bincount(tokens, minlength=4).tolist()
    assert counts[2] == counts[3] == 0
    assert abs(counts[0] / 20000 - 0.625) < 0.015      # 4.4 standard errors


def test_sampling_settings_are_checked():
    for bad in ({"temperature": 0.0}, {"top_p": 0.0}, {"top_p": 1.5}):
        with pytest.raises(LoopKVError):
            Sampling(**bad)


def model(seed=0):
    config = OuroConfig(vocab_size=61, hidden_size=48, num_hidden_layers=2, total_ut_steps=3,
                        num_attention_heads=4, head_dim=12, intermediate_size=96, rope_theta=10000.0,
                        max_position_embeddings=256, initializer_range=0.3)
    torch.manual_seed(seed)
    return OuroForCausalLM(config).eval()


PROMPTS = [[1, 5, 9, 33], [1, 7, 7, 8, 9, 10, 11, 40, 2], [1, 22], [1, 3, 4, 5, 6, 7], [1, 5, 9, 33]]
SEEDS = [11, 12, 13, 14, 15]     # the first and the last prompt are the same, their seeds differ


def test_a_prompts_sample_depends_on_its_seed_alone_not_its_batch():
    m, how = model(1), Sampling(temperature=1.0, top_p=0.9)
    run = lambda prompts, seeds, batch: generate(m, prompts, 12, batch, eos_id=-1, sampling=how, seeds=seeds)  # noqa: E731
    together = run(PROMPTS, SEEDS, 4)
    assert together == run(PROMPTS, SEEDS, 1) == run(PROMPTS, SEEDS, 2)
    # in another order and company (two shards of the prompts), each prompt draws the same tokens
    order = [3, 0, 4, 2, 1]
    assert run([PROMPTS[i] for i in order], [SEEDS[i] for i in order], 4) == [together[i] for i in order]
    assert run(PROMPTS[:2], SEEDS[:2], 4) + run(PROMPTS[2:], SEEDS[2:], 4) == together
    # the test can fail: the seed decides, and sampling is not greedy
    assert together[0] != together[4]
    assert together != greedy_generate(m, PROMPTS, 12, 4, eos_id=-1)
    assert run(PROMPTS, [s + 100 for s in SEEDS], 4) != together


def test_a_tiny_nucleus_is_greedy():
    """top-p small enough to keep only the most probable token: the sampled tokens are greedy's."""
    m = model(2)
    sampled = generate(m, PROMPTS, 10, 4, eos_id=-1, sampling=Sampling(1.0, 1e-6), seeds=SEEDS)
    assert sampled == greedy_generate(m, PROMPTS, 10, 4, eos_id=-1)


def test_seeded_sampling_needs_a_seed_per_prompt():
    with pytest.raises(LoopKVError, match="one seed per prompt"):
        generate(model(), PROMPTS, 4, 4, eos_id=-1, sampling=Sampling(), seeds=SEEDS[:2])
