"""Passkey retrieval: a number stated once inside long filler text, asked for at the end.

The prompt is sized in tokens of the project tokenizer, so a "length" is what the model actually sees.
Filler is either the classic passkey filler (a few plain sentences repeated, as in the passkey
benchmarks long-context papers use) or corpus text: train examples from the train split, test
examples from the test split.
"""
from __future__ import annotations

import random

from loopkv.data.options import require, require_int_list
from loopkv.data.progress import progress
from loopkv.data.tasks.common import Task, TaskInputs, count_by, example_id, word_spans
from loopkv.errors import LoopKVError

NAME = "passkey"
SECTION = "data.tasks.passkey"
# Kept short on purpose: with one token per digit the template alone is ~50 of the 64 tokens of the
# shortest configured length (a repeated key in the needle would not fit at all).
INTRO = "A pass key is hidden below.\n"
QUESTION = "\nWhat is the pass key? The pass key is"
CLASSIC_FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "
FILLERS = ("classic", "corpus")


def needle(key: str) -> str:
    return f"The pass key is {key}. Remember it."


def make_examples(cfg: dict, split: str, seed: int, inputs: TaskInputs, held_out=()) -> list[dict]:
    digits = require(cfg, "key_digits", SECTION, int, minimum=1, maximum=18)
    if split == "train":
        lengths_key, n = "train_lengths", require(cfg, "train_examples", SECTION, int, minimum=0)
        lengths = require_int_list(cfg, lengths_key, SECTION)
        plan = [lengths[i % len(lengths)] for i in range(n)]   # cycle so every length is equally common
    else:
        lengths_key, trials = "eval_lengths", require(cfg, "eval_trials", SECTION, int, minimum=0)
        plan = [length for length in require_int_list(cfg, lengths_key, SECTION) for _ in range(trials)]

    filler = require(cfg, "filler", SECTION, str)
    if filler not in FILLERS:
        raise LoopKVError(f"{SECTION}.filler must be one of {', '.join(FILLERS)}, got {filler!r}")
    if filler == "classic":
        longest = max(plan, default=0)
        text = CLASSIC_FILLER * (longest // len(CLASSIC_FILLER.split()) + 2)
    else:
        text = inputs.text("train" if split == "train" else "test")
    words = word_spans(text)
    tokenizer = inputs.tokenizer
    rng = random.Random(seed)
    rows = []
    for i, length in enumerate(progress(plan, desc=f"passkey {split}", unit="ex")):
        if len(words) <= length:
            raise LoopKVError(f"{SECTION}.{lengths_key}: {length} tokens is longer than the {split} filler text")
        key = str(rng.randrange(10 ** (digits - 1), 10 ** digits))
        depth = round(rng.random(), 4)
        start = rng.randrange(len(words) - length)
        row = _fit(text, words, start, length, key, depth, tokenizer, f"{SECTION}.{lengths_key}")
        row["id"] = example_id(NAME, split, i)
        rows.append(row)
    return rows


def make_grid(cfg: dict, lengths: list[int], depths: list[float], trials: int, seed: int,
              inputs: TaskInputs) -> list[dict]:
    """The passkey grid (LLA Figure 8 / Table 12): `trials` examples per (length, depth) cell, the
    needle at that depth, keys and filler as in the test split (`cfg` = data.tasks.passkey)."""
    digits = require(cfg, "key_digits", SECTION, int, minimum=1, maximum=18)
    filler = require(cfg, "filler", SECTION, str)
    if filler not in FILLERS:
        raise LoopKVError(f"{SECTION}.filler must be one of {', '.join(FILLERS)}, got {filler!r}")
    text = (CLASSIC_FILLER * (max(lengths) // len(CLASSIC_FILLER.split()) + 2) if filler == "classic"
            else inputs.text("test"))
    words = word_spans(text)
    rng = random.Random(seed)
    rows = []
    for length in lengths:
        if len(words) <= length:
            raise LoopKVError(f"passkey_grid.lengths: {length} tokens is longer than the test filler text")
        for depth in depths:
            for _ in range(trials):
                key = str(rng.randrange(10 ** (digits - 1), 10 ** digits))
                row = _fit(text, words, rng.randrange(len(words) - length), length, key, depth,
                           inputs.tokenizer, "passkey_grid.lengths")
                row["id"] = example_id("passkey_grid", "test", len(rows))
                rows.append(row)
    return rows


def _fit(text, words, start, length, key, depth, tokenizer, where) -> dict:
    """The example with the most filler words whose prompt + target fits in `length` tokens."""
    def build(n_words: int) -> dict:
        before_words = round(depth * n_words)
        before = _span(text, words, start, before_words)
        after = _span(text, words, start + before_words, n_words - before_words)
        # the needle gets a line of its own, so it never splits a line of verse into nonsense
        head = INTRO + (before + "\n" if before else "")
        prompt = head + needle(key) + ("\n" + after if after else "") + QUESTION
        target = " " + key
        n_tokens = len(tokenizer(prompt + target, add_special_tokens=False)["input_ids"])
        return {"task": NAME, "prompt": prompt, "target": target, "answer": key,
                "meta": {"length": length, "n_tokens": n_tokens, "depth": depth, "key": key,
                         "needle_offset": len(head), "filler_words": n_words, "words_before": before_words}}

    best = build(0)
    if best["meta"]["n_tokens"] > length:
        raise LoopKVError(f"{where}: {length} tokens cannot hold the passkey template "
                          f"({best['meta']['n_tokens']} tokens without any filler)")
    # every word is at least one token, so `length` words never fit: binary search on the filler size
    lo, hi = 0, length
    while hi - lo > 1:
        mid = (lo + hi) // 2
        candidate = build(mid)
        if candidate["meta"]["n_tokens"] <= length:
            lo, best = mid, candidate
        else:
            hi = mid
    return best


def _span(text: str, words: list[tuple[int, int]], first: int, count: int) -> str:
    """The original text of `count` words from word index `first`, inner whitespace kept."""
    if count <= 0:
        return ""
    return text[words[first][0]:words[first + count - 1][1]]


def summarize(rows: list[dict]) -> dict:
    by_length: dict[str, list[int]] = {}
    for row in rows:
        by_length.setdefault(str(row["meta"]["length"]), []).append(row["meta"]["n_tokens"])
    return {
        "examples": len(rows),
        "per_length": count_by(rows, lambda r: r["meta"]["length"]),
        "mean_tokens_per_length": {k: round(sum(v) / len(v), 2) for k, v in sorted(by_length.items())},
        "min_slack_tokens": min((r["meta"]["length"] - r["meta"]["n_tokens"] for r in rows), default=None),
        "max_slack_tokens": max((r["meta"]["length"] - r["meta"]["n_tokens"] for r in rows), default=None),
    }


TASK = Task(NAME, ("train", "test"), make_examples, summarize)
