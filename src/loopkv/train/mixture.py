"""Pretraining rows from the corpus + task mixture.

Row i of step s is a deterministic function of (seed, s, i): resuming at step s regenerates
exactly the batches an uninterrupted run would have seen, with no data-loader state to save.

A row holds seq_len + 1 tokens (inputs = row[:-1], labels = row[1:]). A corpus row is a random
window of the train split. A task row packs whole examples ([bos] prompt target [eos]); examples
are never truncated, and the space left after the last whole example is filled with corpus text.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
import torch

from loopkv.data.tasks import TRAIN_FIELDS
from loopkv.errors import LoopKVError
from loopkv.utils.atomic import read_jsonl
from loopkv.utils.seeding import derive_seed


def encode_example(tokenizer, prompt: str, target: str) -> list[int]:
    """prompt target [eos], prompt and target tokenised separately so that the prompt's ids are
    exactly what evaluation feeds the model before it generates (encode_prompt)."""
    return encode_prompt(tokenizer, prompt) + tokenizer.encode(target, add_special_tokens=False) + [tokenizer.eos_token_id]


def encode_prompt(tokenizer, prompt: str) -> list[int]:
    """The prompt framed as the tokenizer itself frames a text: the special tokens its post-processor
    puts before the text (ours: <bos>, as the tiny teacher is trained; Ouro's: none, as its own usage
    and lm-eval's hf model feed it), then the text. Tokens a post-processor appends (an eos) are not
    part of a prompt."""
    return prompt_prefix(tokenizer) + tokenizer.encode(prompt, add_special_tokens=False)


def prompt_prefix(tokenizer) -> list[int]:
    """The special-token ids the tokenizer's post-processor puts before a text."""
    prefix = getattr(tokenizer, "_loopkv_prompt_prefix", None)
    if prefix is None:
        plain = tokenizer.encode("a", add_special_tokens=False)
        framed = tokenizer.encode("a", add_special_tokens=True)
        start = next((i for i in range(len(framed) - len(plain) + 1) if framed[i:i + len(plain)] == plain), None)
        if start is None:
            raise LoopKVError("the tokenizer's post-processor changes a text's own tokens; cannot frame prompts")
        prefix = framed[:start]
        tokenizer._loopkv_prompt_prefix = prefix
    return list(prefix)


def encode_text(tokenizer, text: str) -> np.ndarray:
    """A whole split as one token stream (encoded in paragraphs to keep memory flat)."""
    ids: list[int] = []
    for block in text.split("\n\n"):
        if block.strip():
            ids.extend(tokenizer.encode(block + "\n\n", add_special_tokens=False))
    return np.asarray(ids, dtype=np.int64)


class Mixture:
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


def load_task_examples(tokenizer, task_dirs: dict[str, str | Path]) -> dict[str, list[list[int]]]:
    out = {}
    for name, directory in task_dirs.items():
        path = Path(directory) / "train.jsonl"
        if path.exists():
            rows = read_jsonl(path, "task data", TRAIN_FIELDS)
            out[name] = [encode_example(tokenizer, r["prompt"], r["target"]) for r in rows]
    return out


def heldout_windows(token_ids: np.ndarray, seq_len: int, count: int) -> torch.Tensor:
    """`count` evenly spaced, non-random windows of seq_len + 1 tokens (the same every run)."""
    span = len(token_ids) - (seq_len + 1)
    if span <= 0:
        raise LoopKVError(f"held-out split has {len(token_ids)} tokens, fewer than seq_len + 1")
    starts = np.linspace(0, span, num=count, dtype=np.int64)
    return torch.from_numpy(np.stack([token_ids[s:s + seq_len + 1] for s in starts]))
