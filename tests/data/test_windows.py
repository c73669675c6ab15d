"""Pretraining rows: deterministic per step, task examples never truncated."""
import numpy as np
import pytest

from loopkv.errors import LoopKVError
from loopkv.data.windows import Mixture, heldout_windows


def make_mixture(seed=3, weights=None):
    corpus = np.arange(10_000) % 500 + 10
    tasks = {"passkey": [[1] + [7] * 20 + [2], [1] + [8] * 30 + [2]], "arithmetic": [[1, 5, 6, 2]] * 3}
    return Mixture(corpus, tasks, weights or {"corpus": 0.4, "passkey": 0.3, "arithmetic": 0.3},
                   seq_len=64, eos_id=2, seed=seed)


def test_batches_are_a_function_of_the_step():
    a, b = make_mixture(), make_mixture()
    assert np.array_equal(a.batch(5, 8), b.batch(5, 8))
    assert not np.array_equal(a.batch(5, 8), a.batch(6, 8))
    assert not np.array_equal(a.batch(5, 8), make_mixture(seed=4).batch(5, 8))
    assert a.batch(0, 8).shape == (8, 65)


def test_task_rows_hold_whole_examples():
    m = make_mixture(weights={"corpus": 0.0, "passkey": 1.0})
    for row in m.batch(0, 16).numpy():
        # a row starts with whole examples; each opened example is closed by its eos
        assert row[0] == 1
        opened = [i for i, tok in enumerate(row) if tok == 1]
        for start in opened:
            body = row[start + 1:]
            assert 2 in body.tolist(), "an example was cut off"


def test_too_long_examples_and_missing_tasks_are_rejected():
    corpus = np.arange(1000)
    with pytest.raises(LoopKVError, match="teacher.seq_len"):
        Mixture(corpus, {"passkey": [[1] * 100]}, {"corpus": 1, "passkey": 1}, 64, 2, 0)
    with pytest.raises(LoopKVError, match="teacher.mixture.arithmetic"):
        Mixture(corpus, {}, {"corpus": 1, "arithmetic": 1}, 64, 2, 0)


def test_heldout_windows_are_fixed():
    ids = np.arange(1000)
    w = heldout_windows(ids, 15, 4)
    assert w.shape == (4, 16) and w[0, 0] == 0 and w[-1, -1] == 999
