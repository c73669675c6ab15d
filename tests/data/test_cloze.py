import pytest

from loopkv.data.tasks import cloze
from loopkv.data.tasks.common import TaskInputs
from loopkv.errors import LoopKVError

CFG = {"eval_examples": 40, "num_choices": 4, "context_words": 48, "continuation_words": 8}


@pytest.fixture(scope="module")
def rows(corpus_dir):
    return cloze.make_examples(CFG, "test", 4, TaskInputs(corpus_dir))


def test_label_points_at_the_true_continuation(rows, corpus_dir):
    words = (corpus_dir / "test.txt").read_text().split()
    for row in rows:
        start = row["meta"]["start_word"]
        assert row["context"] == " ".join(words[start:start + 48])
        truth = " " + " ".join(words[start + 48:start + 56])
        assert row["choices"][row["label"]] == truth
        # the true continuation follows the context in the held-out text itself
        assert " ".join(words).count(row["context"] + truth) >= 1


def test_choices_are_distinct_same_length_and_space_led(rows):
    for row in rows:
        assert len(row["choices"]) == 4 == len(set(row["choices"]))
        assert all(c.startswith(" ") and len(c.split()) == 8 for c in row["choices"])


def test_distractors_do_not_overlap_the_item_or_each_other(rows):
    for row in rows:
        start = row["meta"]["start_word"]
        spans = [(start, start + 56)] + [(d, d + 8) for d in row["meta"]["distractor_starts"]]
        for i, (a0, a1) in enumerate(spans):
            for b0, b1 in spans[i + 1:]:
                assert a1 <= b0 or b1 <= a0


def test_items_do_not_share_context_and_labels_vary(rows):
    starts = sorted(r["meta"]["start_word"] for r in rows)
    assert all(b - a >= 56 for a, b in zip(starts, starts[1:]))
    assert len({r["label"] for r in rows}) > 1


def test_deterministic(rows, corpus_dir):
    assert cloze.make_examples(CFG, "test", 4, TaskInputs(corpus_dir)) == rows


def test_too_many_items_is_a_user_error(corpus_dir):
    with pytest.raises(LoopKVError, match=r"data\.tasks\.cloze\.eval_examples"):
        cloze.make_examples(dict(CFG, eval_examples=10**6), "test", 1, TaskInputs(corpus_dir))
