"""Fixed-length token rows of an encoded split: the training rows of the corpus + task mixture,
and the held-out windows every measurement reads.

Row i of step s is a deterministic function of (seed, s, i): resuming at step s regenerates
exactly the batches an uninterrupted run would have seen, with no data-loader state to save.

A row holds seq_len + 1 tokens (inputs = row[:-1], labels = row[1:]). A corpus row is a random
window of the train split. A task row packs whole examples ([bos] prompt target [eos]); examples
are never truncated, and the space left after the last whole example is filled with corpus text.
"""
from __future__ import annotations

import numpy as np
import torch

from loopkv.errors import LoopKVError
from loopkv.utils.seeding import derive_seed


class Mixture:
    """Training rows of a step: corpus windows and packed task examples, drawn by the mixture's weights."""

    def __init__(self, corpus_ids: np.ndarray, task_examples: dict[str, list[list[int]]],
                 weights: dict[str, float], seq_len: int, eos_id: int, seed: int, section: str = "teacher"):
        """`section`: the config section whose mixture/seq_len these are, named in errors."""
        self.corpus = corpus_ids
        self.tasks = task_examples
        self.seq_len = seq_len
        self.eos_id = eos_id
        self.seed = seed
        self.sources = [name for name, w in weights.items() if w > 0]
        for name in self.sources:
            if name != "corpus" and not task_examples.get(name):
                raise LoopKVError(f"config key '{section}.mixture.{name}': no training examples for task {name!r}")
        total = sum(weights[name] for name in self.sources)
        self.probs = np.array([weights[name] / total for name in self.sources])
        if len(self.corpus) <= seq_len + 1:
            raise LoopKVError(f"corpus split has {len(self.corpus)} tokens, fewer than {section}.seq_len + 1")
        for name, examples in task_examples.items():
            longest = max((len(e) for e in examples), default=0)
            if longest > seq_len + 1:
                raise LoopKVError(
                    f"config key '{section}.seq_len': a {name} example has {longest} tokens, "
                    f"more than seq_len + 1 = {seq_len + 1}"
                )

    def batch(self, step: int, batch_size: int) -> torch.Tensor:
        """(batch_size, seq_len + 1) token rows for `step`."""
        rows = [self._row(np.random.default_rng(derive_seed(self.seed, "row", str(step), str(i))))
                for i in range(batch_size)]
        return torch.from_numpy(np.stack(rows))

    def _row(self, rng: np.random.Generator) -> np.ndarray:
        need = self.seq_len + 1
        source = self.sources[rng.choice(len(self.sources), p=self.probs)]
        if source == "corpus":
            return self._corpus_window(rng, need)
        examples = self.tasks[source]
        parts: list[int] = []
        while True:
            example = examples[rng.integers(len(examples))]
            if len(parts) + len(example) > need:
                break
            parts.extend(example)
        filler = self._corpus_window(rng, need - len(parts) - 1) if len(parts) < need else np.empty(0, np.int64)
        tail = [self.eos_id] if len(parts) < need else []
        return np.concatenate([np.asarray(parts, np.int64), np.asarray(tail, np.int64), filler])[:need]

    def _corpus_window(self, rng: np.random.Generator, length: int) -> np.ndarray:
        if length <= 0:
            return np.empty(0, np.int64)
        start = rng.integers(0, len(self.corpus) - length)
        return self.corpus[start:start + length]


def heldout_windows(token_ids: np.ndarray, seq_len: int, count: int) -> torch.Tensor:
    """`count` evenly spaced, non-random windows of seq_len + 1 tokens (the same every run)."""
    span = len(token_ids) - (seq_len + 1)
    if span <= 0:
        raise LoopKVError(f"held-out split has {len(token_ids)} tokens, fewer than seq_len + 1")
    starts = np.linspace(0, span, num=count, dtype=np.int64)
    return torch.from_numpy(np.stack([token_ids[s:s + seq_len + 1] for s in starts]))
