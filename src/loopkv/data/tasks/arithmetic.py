"""Multi-step addition/subtraction chains with a worked solution: a small stand-in for GSM8K.

The number of operations is the reasoning depth. The target works the chain out a line at a time and
ends in "#### N", the GSM8K convention that `extract_final_answer` reads. A line restates up to
`ops_per_line` operations and gives their result ("5 + 3 - 2 = 6."), so the model composes that many
operations inside one forward pass: 1 (the default) writes every running value, which a shallow model
does as well as a deep one; more makes each line's answer need depth, which a looped model's later
loops can give.
"""
from __future__ import annotations

import random
import re

from loopkv.data.options import require
from loopkv.data.progress import progress
from loopkv.data.tasks.common import Task, count_by, example_id
from loopkv.errors import LoopKVError

NAME = "arithmetic"
SECTION = "data.tasks.arithmetic"
_WORDS = {"+": "Add", "-": "Subtract"}
_FINAL = re.compile(r"\s*(-?\d+)")
# rejection sampling gives up after this many draws per wanted example (a too-small chain space)
_MAX_DRAWS_PER_EXAMPLE = 50


def make_examples(cfg: dict, split: str, seed: int, inputs=None, held_out=()) -> list[dict]:
    count_key = "train_examples" if split == "train" else "eval_examples"
    n = require(cfg, count_key, SECTION, int, minimum=0)
    min_steps = require(cfg, "min_steps", SECTION, int, minimum=1)
    max_steps = require(cfg, "max_steps", SECTION, int, minimum=min_steps)
    max_operand = require(cfg, "max_operand", SECTION, int, minimum=1)
    max_value = require(cfg, "max_value", SECTION, int, minimum=max_operand)
    ops_per_line = require(cfg, "ops_per_line", SECTION, int, minimum=1)

    rng = random.Random(seed)
    # test chains never appear in train, and test chains are all distinct, so test accuracy is held out
    banned = {row["prompt"] for row in held_out}
    unique = split != "train"
    rows: list[dict] = []
    bar = progress(total=n, desc=f"arithmetic {split}", unit="ex")
    for _ in range(n * _MAX_DRAWS_PER_EXAMPLE):
        if len(rows) == n:
            break
        row = make_chain(rng, rng.randint(min_steps, max_steps), max_operand, max_value, ops_per_line)
        if row["prompt"] in banned:
            continue
        if unique:
            banned.add(row["prompt"])
        row["id"] = example_id(NAME, split, len(rows))
        rows.append(row)
        bar.update()
    bar.close()
    if len(rows) < n:
        raise LoopKVError(f"{SECTION}.{count_key}: only {len(rows)} distinct chains found; lower it or widen "
                          f"{SECTION}.max_steps / max_operand / max_value")
    return rows


def make_chain(rng: random.Random, steps: int, max_operand: int, max_value: int, ops_per_line: int = 1) -> dict:
    """One chain of `steps` operations whose running value stays in 0..max_value, worked out
    `ops_per_line` operations a line (the last line takes what is left)."""
    value = start = rng.randint(1, max_operand)
    ops: list[list] = []
    for _ in range(steps):
        # choose among the operations that some operand keeps in range (at 0 only "+", at max only "-")
        allowed = [op for op, room in (("+", max_value - value), ("-", value)) if room >= 1]
        op = rng.choice(allowed)
        room = max_value - value if op == "+" else value
        operand = rng.randint(1, min(max_operand, room))
        ops.append([op, operand])
        value = value + operand if op == "+" else value - operand
    lines, running = [], start
    for first in range(0, steps, ops_per_line):
        part = ops[first:first + ops_per_line]
        result = evaluate_chain(running, part)
        lines.append(f"{running} " + " ".join(f"{op} {x}" for op, x in part) + f" = {result}.")
        running = result
    question = " ".join([f"Start with {start}."] + [f"{_WORDS[op]} {x}." for op, x in ops])
    return {
        "task": NAME,
        "prompt": f"Question: {question} What is the result?\nAnswer:",
        "target": " " + " ".join(lines) + f"\n#### {value}",
        "answer": str(value),
        "meta": {"steps": steps, "start": start, "ops": ops},
    }


def evaluate_chain(start: int, ops) -> int:
    value = start
    for op, operand in ops:
        value = value + operand if op == "+" else value - operand
    return value


def extract_final_answer(text: str) -> str | None:
    """The integer after the first "####" (spaces and a minus allowed, trailing text ignored), else None."""
    marker = text.find("####")
    if marker < 0:
        return None
    match = _FINAL.match(text, marker + 4)
    return str(int(match.group(1))) if match else None   # int() drops leading zeros and "-0"


def check_answer(generated_text: str, answer: str) -> bool:
    found = extract_final_answer(generated_text)
    return found is not None and int(found) == int(answer)


def summarize(rows: list[dict]) -> dict:
    return {"examples": len(rows), "per_steps": count_by(rows, lambda r: r["meta"]["steps"])}


TASK = Task(NAME, ("train", "test"), make_examples, summarize)
