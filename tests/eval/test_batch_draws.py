"""A measurement's batches draw alike whatever came before them: Huginn draws a random initial state
per forward, so without per-batch seeding batch k's draws depended on what batches 0..k-1 computed
(their lengths, how many tokens they decoded), and the teacher's and a method's batch k were not paired."""
import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "cache"))
from cache_helpers import small_huginn  # noqa: E402

from loopkv.cache import make_cache  # noqa: E402
from loopkv.eval.generation import continuation_scores, generate  # noqa: E402
from loopkv.utils.seeding import MEASUREMENT_SEED, fixed_draws  # noqa: E402

B_CONTEXT, B_CONTINUATION = [5, 9, 14, 3, 22], [7, 30]


def _model():
    return small_huginn(steps=2, layers=2, heads=2, head_dim=8, std=0.3)


@pytest.mark.parametrize("streamed", [False, True], ids=["one-forward", "streamed"])
def test_a_batch_scores_the_same_after_any_earlier_batch(streamed):
    model = _model()
    factory = (lambda: make_cache("full", model.config)) if streamed else None
    scores = []
    for first in ([4, 6], [4, 6, 8, 10, 12, 13, 15, 17, 19]):   # a short and a long first batch
        with fixed_draws(MEASUREMENT_SEED):
            scores.append(continuation_scores(model, [first, B_CONTEXT], [[11], B_CONTINUATION], 1, factory)[1])
    assert scores[0] == scores[1]
    # the draws matter here (else the check above could not fail): another draw scores B otherwise
    with fixed_draws(MEASUREMENT_SEED + 1):
        other = continuation_scores(model, [[4, 6], B_CONTEXT], [[11], B_CONTINUATION], 1, factory)[1]
    assert other[0] != scores[0][0]


def test_a_batch_generates_the_same_after_any_earlier_batch_and_the_stream_is_left_alone():
    model = _model()
    outputs = []
    for first in ([4, 6], [4, 8, 6]):   # shorter than B, so sorted first; different draws in it
        with fixed_draws(MEASUREMENT_SEED):
            before = torch.random.get_rng_state()
            out = generate(model, [first, B_CONTEXT], 6, 1, eos_id=63)
            assert torch.equal(torch.random.get_rng_state(), before)   # greedy: the caller's stream not moved
        outputs.append(out[1])
    assert outputs[0] == outputs[1]
    # the draws matter here (else the check above could not fail): other seeds generate B otherwise
    others = []
    for seed in (1, 2, 3):
        with fixed_draws(seed):
            others.append(generate(model, [[4, 6], B_CONTEXT], 6, 1, eos_id=63)[1])
    assert any(o != outputs[0] for o in others)
