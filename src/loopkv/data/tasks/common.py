"""What the task generators share: lazy access to the corpus splits and tokenizer, and the task record."""
from __future__ import annotations

import re
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Callable, Sequence

from loopkv.errors import LoopKVError

_WORD = re.compile(r"\S+")


@dataclass(frozen=True)
class Task:
    name: str
    splits: tuple[str, ...]          # "test" always; "train" for tasks the teacher is pretrained on
    # make(cfg, split, seed, inputs, held_out) -> examples; held_out = the test examples when split is train
    make: Callable[..., list[dict]]
    summarize: Callable[[list[dict]], dict]


class TaskInputs:
    """Corpus split texts and the tokenizer, read only when a task asks for them."""

    def __init__(self, corpus_dir=None, tokenizer_dir=None):
        self.corpus_dir = Path(corpus_dir) if corpus_dir is not None else None
        self.tokenizer_dir = Path(tokenizer_dir) if tokenizer_dir is not None else None
        self._texts: dict[str, str] = {}

    def text(self, split: str) -> str:
        if self.corpus_dir is None:
            raise LoopKVError("this task needs the corpus directory (--corpus)")
        if split not in self._texts:
            path = self.corpus_dir / f"{split}.txt"
            if not path.is_file():
                raise LoopKVError(f"corpus split not found: {path} (build it with `loopkv data-corpus`)")
            self._texts[split] = path.read_text(encoding="utf-8")
        return self._texts[split]

    @cached_property
    def tokenizer(self):
        if self.tokenizer_dir is None:
            raise LoopKVError("this task needs the tokenizer directory (--tokenizer)")
        from loopkv.data.tokenizer import load_tokenizer

        return load_tokenizer(self.tokenizer_dir)


def word_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) character offsets of each whitespace-separated word."""
    return [m.span() for m in _WORD.finditer(text)]


def example_id(task: str, split: str, index: int) -> str:
    return f"{task}-{split}-{index:05d}"


def count_by(rows: Sequence[dict], key: Callable[[dict], object]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for row in rows:
        k = str(key(row))
        counts[k] = counts.get(k, 0) + 1
    return dict(sorted(counts.items()))
