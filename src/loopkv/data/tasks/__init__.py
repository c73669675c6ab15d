"""Synthetic tasks: a registry by name, and `build_task` that writes a task's train/test JSONL files.

Generative examples: {"id", "task", "prompt", "target", "answer", "meta"}; prompt + target is the training
text, target what a model must generate, answer the string to check. Multiple choice (cloze):
{"id", "task", "context", "choices", "label", "meta"}.
"""
from __future__ import annotations

from pathlib import Path

from loopkv.data.tasks import arithmetic, cloze, passkey
from loopkv.data.tasks.common import Task, TaskInputs
from loopkv.errors import LoopKVError
from loopkv.utils.atomic import write_jsonl
from loopkv.utils.seeding import derive_seed

TASKS: dict[str, Task] = {task.name: task for task in (passkey.TASK, arithmetic.TASK, cloze.TASK)}

# the fields (and types) of a row that readers rely on, checked line by line (utils/checked_io.py)
GENERATIVE_FIELDS = {"id": str, "prompt": str, "target": str, "answer": str, "meta": dict}
ROW_FIELDS = {
    "passkey": {**GENERATIVE_FIELDS, "meta": {"length": int, "depth": (int, float)}},
    "arithmetic": {**GENERATIVE_FIELDS, "meta": {"steps": int}},
    "cloze": {"id": str, "context": str, "choices": list, "label": int},
}
TRAIN_FIELDS = {"prompt": str, "target": str}    # a training example: prompt + target


def get_task(name: str) -> Task:
    if name not in TASKS:
        raise LoopKVError(f"data.tasks: unknown task {name!r} (known: {', '.join(sorted(TASKS))})")
    return TASKS[name]


def build_task(name: str, cfg: dict, seed: int, corpus_dir, tokenizer_dir, out_dir) -> dict:
    """Write out_dir/test.jsonl (and train.jsonl for pretraining tasks); cfg is `data.tasks.<name>`."""
    task = get_task(name)
    if not isinstance(cfg, dict):
        raise LoopKVError(f"data.tasks.{name} must be a mapping, got {type(cfg).__name__}")
    inputs = TaskInputs(corpus_dir, tokenizer_dir)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    stats = {"task": name, "splits": {}}
    # test first: train generation may exclude test items (held_out) to keep the test set unseen
    test = task.make(cfg, "test", derive_seed(seed, "task", name, "test"), inputs, held_out=())
    splits = {"test": test}
    if "train" in task.splits:
        splits["train"] = task.make(cfg, "train", derive_seed(seed, "task", name, "train"), inputs, held_out=test)
    for split, rows in sorted(splits.items()):
        write_jsonl(out_dir / f"{split}.jsonl", rows)
        stats["splits"][split] = task.summarize(rows)
    return stats
