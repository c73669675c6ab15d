"""Cloze multiple choice from held-out text: which of several same-length word runs follows the context?

Distractors are real text from elsewhere in the test split, so only the context can tell them apart.
"""
from __future__ import annotations

import random

from loopkv.data.options import require
from loopkv.data.progress import progress
from loopkv.data.tasks.common import Task, count_by, example_id
from loopkv.errors import LoopKVError

NAME = "cloze"
SECTION = "data.tasks.cloze"
_MAX_DRAWS_PER_DISTRACTOR = 1000


def make_examples(cfg: dict, split: str, seed: int, inputs, held_out=()) -> list[dict]:
    n = require(cfg, "eval_examples", SECTION, int, minimum=0)
    num_choices = require(cfg, "num_choices", SECTION, int, minimum=2)
    context_words = require(cfg, "context_words", SECTION, int, minimum=1)
    continuation_words = require(cfg, "continuation_words", SECTION, int, minimum=1)

    # whitespace is normalised to single spaces so layout (line breaks) gives no clue to the answer
    words = inputs.text("test").split()
    span = context_words + continuation_words
    n_slots = len(words) // span
    if n_slots < n or len(words) < span * (1 + num_choices):
        raise LoopKVError(f"{SECTION}.eval_examples: the test split ({len(words)} words) holds only {n_slots} "
                          f"non-overlapping items of {span} words; lower it or the word counts")
    rng = random.Random(seed)
    # items sit in disjoint slots of the text so no two share context
    starts = sorted(slot * span for slot in rng.sample(range(n_slots), n))
    rows = []
    for i, start in enumerate(progress(starts, desc="cloze", unit="ex")):
        truth_at = start + context_words
        taken = [(start, truth_at + continuation_words)]
        candidates = [_phrase(words, truth_at, continuation_words)]
        distractor_starts = []
        for _ in range(num_choices - 1):
            at = _draw_distractor(rng, words, continuation_words, taken, candidates)
            taken.append((at, at + continuation_words))
            candidates.append(_phrase(words, at, continuation_words))
            distractor_starts.append(at)
        order = list(range(num_choices))
        rng.shuffle(order)
        rows.append({
            "id": example_id(NAME, split, i),
            "task": NAME,
            "context": " ".join(words[start:truth_at]),
            "choices": [candidates[j] for j in order],
            "label": order.index(0),
            "meta": {"start_word": start, "distractor_starts": distractor_starts},
        })
    return rows


def _phrase(words: list[str], at: int, count: int) -> str:
    # the leading space makes context + choice read as running text
    return " " + " ".join(words[at:at + count])


def _draw_distractor(rng, words, length, taken, candidates) -> int:
    """A word index whose run overlaps no taken run and differs from every candidate so far."""
    for _ in range(_MAX_DRAWS_PER_DISTRACTOR):
        at = rng.randrange(len(words) - length + 1)
        if any(at < end and start < at + length for start, end in taken):
            continue
        if _phrase(words, at, length) in candidates:
            continue
        return at
    raise LoopKVError(f"{SECTION}: could not find distinct distractors; the test split is too small or repetitive")


def summarize(rows: list[dict]) -> dict:
    return {"examples": len(rows), "per_label": count_by(rows, lambda r: r["label"])}


TASK = Task(NAME, ("test",), make_examples, summarize)
