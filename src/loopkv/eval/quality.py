"""Quality of a model under a KV method: held-out loss, passkey by length, arithmetic exact match,
cloze multiple choice. Generation streams through the method's own cache."""
from __future__ import annotations

import re
from collections import defaultdict
from pathlib import Path

import numpy as np
import torch

from loopkv.data.encoding import encode_prompt, encode_text
from loopkv.data.tasks import ROW_FIELDS
from loopkv.data.tasks.arithmetic import check_answer
from loopkv.data.windows import heldout_windows
from loopkv.eval.generation import CacheFactory, continuation_logprobs, greedy_generate
from loopkv.eval.heldout import family_heldout
from loopkv.utils.atomic import read_jsonl


def heldout_loss(model, tokenizer, test_text: str, seq_len: int, batches: int, batch_size: int) -> dict:
    windows = heldout_windows(encode_text(tokenizer, test_text), seq_len, batches * batch_size)
    result = family_heldout(model, windows, batch_size)
    result["n_tokens"] = int(windows[:, 1:].numel())
    return result


def passkey_accuracy(model, tokenizer, rows: list[dict], batch_size: int, cache_factory: CacheFactory | None):
    prompts = [encode_prompt(tokenizer, r["prompt"]) for r in rows]
    budget = len(tokenizer.encode(rows[0]["target"], add_special_tokens=False)) + 2
    outputs = greedy_generate(model, prompts, budget, batch_size, cache_factory, tokenizer=tokenizer)
    by_length: dict[int, list[bool]] = defaultdict(list)
    samples = []
    for r, out in zip(rows, outputs):
        text = tokenizer.decode(out)
        found = re.search(r"\d+", text)
        ok = bool(found) and found.group(0) == r["answer"]
        by_length[r["meta"]["length"]].append(ok)
        samples.append({"id": r["id"], "length": r["meta"]["length"], "depth": r["meta"]["depth"],
                        "answer": r["answer"], "output": text, "correct": ok})
    cells = {str(k): {"accuracy": float(np.mean(v)), "n": len(v)} for k, v in sorted(by_length.items())}
    return {"by_length": cells, "accuracy": float(np.mean([s["correct"] for s in samples])),
            "n": len(samples)}, samples


def arithmetic_exact_match(model, tokenizer, rows: list[dict], batch_size: int, max_new_tokens: int,
                           cache_factory: CacheFactory | None):
    prompts = [encode_prompt(tokenizer, r["prompt"]) for r in rows]
    outputs = greedy_generate(model, prompts, max_new_tokens, batch_size, cache_factory, tokenizer=tokenizer)
    by_steps: dict[int, list[bool]] = defaultdict(list)
    samples = []
    for r, out in zip(rows, outputs):
        text = tokenizer.decode(out)
        ok = check_answer(text, r["answer"])
        by_steps[r["meta"]["steps"]].append(ok)
        samples.append({"id": r["id"], "steps": r["meta"]["steps"], "answer": r["answer"],
                        "output": text, "correct": ok, "n_generated": len(out)})
    cells = {str(k): {"exact_match": float(np.mean(v)), "n": len(v)} for k, v in sorted(by_steps.items())}
    return {"exact_match": float(np.mean([s["correct"] for s in samples])), "n": len(samples),
            "by_steps": cells}, samples


def cloze_accuracy(model, tokenizer, rows: list[dict], batch_size: int, cache_factory: CacheFactory | None = None):
    """Log-likelihood multiple choice: acc (sum log p) and acc_norm (per byte of the choice)."""
    contexts, conts, owners = [], [], []
    for i, r in enumerate(rows):
        ctx = encode_prompt(tokenizer, r["context"])
        for choice in r["choices"]:
            contexts.append(ctx)
            conts.append(tokenizer.encode(choice, add_special_tokens=False))
            owners.append(i)
    scores = continuation_logprobs(model, contexts, conts, batch_size, cache_factory)
    correct, correct_norm, k = [], [], 0
    for r in rows:
        s = np.array(scores[k:k + len(r["choices"])])
        lengths = np.array([len(c) for c in r["choices"]])   # per character, as lm-eval's acc_norm
        correct.append(int(s.argmax()) == r["label"])
        correct_norm.append(int((s / lengths).argmax()) == r["label"])
        k += len(r["choices"])
    return {"accuracy": float(np.mean(correct)), "accuracy_norm": float(np.mean(correct_norm)),
            "n": len(rows), "chance": float(np.mean([1 / len(r["choices"]) for r in rows]))}


@torch.no_grad()
def evaluate_quality(model, tokenizer, corpus_dir, task_dirs: dict, cfg: dict, seq_len: int,
                     cache_factory: CacheFactory | None = None, heldout: bool = True) -> tuple[dict, dict]:
    """All quality metrics; returns (metrics, per-sample rows). `heldout`: the teacher's per-loop
    held-out loss (one exact forward; methods measure streamed fidelity instead, eval/fidelity.py)."""
    metrics, samples = {}, {}
    if heldout:
        metrics["heldout"] = heldout_loss(model, tokenizer, Path(corpus_dir, "test.txt").read_text(),
                                          seq_len, cfg["heldout_batches"], cfg["batch_size"])
    if "passkey" in task_dirs:
        rows = read_jsonl(Path(task_dirs["passkey"], "test.jsonl"), "task data", ROW_FIELDS["passkey"])
        metrics["passkey"], samples["passkey"] = passkey_accuracy(
            model, tokenizer, rows, cfg["batch_size"], cache_factory)
    if "arithmetic" in task_dirs:
        rows = read_jsonl(Path(task_dirs["arithmetic"], "test.jsonl"), "task data", ROW_FIELDS["arithmetic"])
        metrics["arithmetic"], samples["arithmetic"] = arithmetic_exact_match(
            model, tokenizer, rows, cfg["batch_size"], cfg["arithmetic_max_new_tokens"], cache_factory)
    if "cloze" in task_dirs:
        rows = read_jsonl(Path(task_dirs["cloze"], "test.jsonl"), "task data", ROW_FIELDS["cloze"])
        metrics["cloze"] = cloze_accuracy(model, tokenizer, rows, cfg["batch_size"], cache_factory)
    return metrics, samples
