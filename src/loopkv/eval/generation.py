"""Greedy, batched, left-padded generation through a given KV method (streaming decode: prefill,
then one token at a time through the method's cache, as served)."""
from __future__ import annotations

from typing import Callable

import torch

from loopkv.cache import LoopCache, make_cache

CacheFactory = Callable[[], LoopCache]


def left_pad(sequences: list[list[int]], pad_id: int) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    return ids, mask


@torch.no_grad()
def greedy_generate(model, prompts: list[list[int]], max_new_tokens: int, batch_size: int,
                    cache_factory: CacheFactory | None = None, eos_id: int | None = None) -> list[list[int]]:
    """New token ids per prompt (eos and anything after it removed). Prompts are sorted by length
    into batches to keep padding small; results come back in input order."""
    model.eval()
    if cache_factory is None:
        cache_factory = lambda: make_cache(model.config.kv_method, model.config)  # noqa: E731
    eos_id = model.config.eos_token_id if eos_id is None else eos_id
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    results: list[list[int] | None] = [None] * len(prompts)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        ids, mask = left_pad([prompts[i] for i in chunk], model.config.pad_token_id)
        out = model.generate(
            input_ids=ids, attention_mask=mask, cache=cache_factory(), max_new_tokens=max_new_tokens,
            do_sample=False, eos_token_id=eos_id, pad_token_id=model.config.pad_token_id,
        )
        for row, i in zip(out[:, ids.shape[1]:].tolist(), chunk):
            results[i] = row[:row.index(eos_id)] if eos_id in row else row
    return results


@torch.no_grad()
def continuation_logprobs(model, contexts: list[list[int]], continuations: list[list[int]],
                          batch_size: int) -> list[float]:
    """Sum of log p(continuation | context) for each pair (teacher-forced, one forward each)."""
    model.eval()
    scores = []
    for start in range(0, len(contexts), batch_size):
        ctx = contexts[start:start + batch_size]
        cont = continuations[start:start + batch_size]
        ids, mask = left_pad([c + k for c, k in zip(ctx, cont)], model.config.pad_token_id)
        logp = torch.log_softmax(model(ids, attention_mask=mask, use_cache=False).logits.float(), -1)
        width = ids.shape[1]
        for row, k in enumerate(cont):
            positions = torch.arange(width - len(k), width)
            token_logp = logp[row, positions - 1, ids[row, positions]]
            scores.append(float(token_logp.sum()))
    return scores
