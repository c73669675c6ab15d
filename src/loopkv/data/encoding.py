"""Texts as token ids, the one way training and evaluation both read them: a prompt framed as the
tokenizer frames a text (what a model is fed before it generates), a training example as that
prompt plus its target, a whole split as one token stream, and a task's training examples."""
from __future__ import annotations

from pathlib import Path

import numpy as np

from loopkv.data.tasks import TRAIN_FIELDS
from loopkv.errors import LoopKVError
from loopkv.utils.atomic import read_jsonl


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


def load_task_examples(tokenizer, task_dirs: dict[str, str | Path]) -> dict[str, list[list[int]]]:
    """name -> the task's training examples (train.jsonl) as token ids; a task without one is left out."""
    out = {}
    for name, directory in task_dirs.items():
        path = Path(directory) / "train.jsonl"
        if path.exists():
            rows = read_jsonl(path, "task data", TRAIN_FIELDS)
            out[name] = [encode_example(tokenizer, r["prompt"], r["target"]) for r in rows]
    return out
