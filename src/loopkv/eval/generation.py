"""Batched, left-padded generation through a given KV method (streaming decode: prefill, then one
token at a time through the method's cache, as served): greedy, or nucleus sampling with temperature
(`Sampling`) drawn from one seeded generator per prompt, so a prompt's sample is the same whatever
batch it shares, its batch size or the shard it runs in."""
from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import Callable

import torch
from transformers import LogitsProcessor, LogitsProcessorList

from loopkv.cache import LoopCache, make_cache
from loopkv.errors import LoopKVError
from loopkv.utils.device import model_device
from loopkv.utils.seeding import batch_draws

CacheFactory = Callable[[], LoopCache]


def left_pad(sequences: list[list[int]], pad_id: int, device: torch.device | str = "cpu") -> tuple[torch.Tensor, torch.Tensor]:
    """(ids, mask) of left-padded rows, built on the host and moved to `device` in one copy each."""
    width = max(len(s) for s in sequences)
    ids = torch.full((len(sequences), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(sequences), width), dtype=torch.long)
    for i, s in enumerate(sequences):
        ids[i, width - len(s):] = torch.tensor(s, dtype=torch.long)
        mask[i, width - len(s):] = 1
    return ids.to(device), mask.to(device)


def _ids(value) -> list[int]:
    return [] if value is None else [int(v) for v in (value if isinstance(value, (list, tuple)) else [value])]


def end_of_generation_ids(model, tokenizer=None) -> list[int]:
    """Token ids that end a generation, as the checkpoint ships them: its config's eos, its
    generation_config's (a list in some checkpoints), the tokenizer's eos, and the token its chat
    template closes an assistant turn with (Ouro's -Thinking checkpoints end turns with <|im_end|>
    while their config says eos 0). The tiny teacher has only its <eos>."""
    ids = _ids(model.config.eos_token_id) + _ids(getattr(getattr(model, "generation_config", None), "eos_token_id", None))
    if tokenizer is not None:
        ids += _ids(tokenizer.eos_token_id) + _ids(turn_end_id(tokenizer))
    return sorted(set(ids))


def turn_end_id(tokenizer) -> int | None:
    """The special token the tokenizer's chat template puts right after an assistant message, if any."""
    if not getattr(tokenizer, "chat_template", None):
        return None
    marker = "loopkv-turn-marker"
    try:
        text = tokenizer.apply_chat_template([{"role": "user", "content": "q"}, {"role": "assistant", "content": marker}],
                                             tokenize=False)
    except Exception:   # a template that needs other roles or variables: no turn end to take
        return None
    after = text[text.find(marker) + len(marker):] if marker in text else ""
    ids = tokenizer.encode(after, add_special_tokens=False)
    return ids[0] if ids and ids[0] in tokenizer.all_special_ids + list(tokenizer.added_tokens_decoder) else None


@dataclass(frozen=True)
class Sampling:
    """Nucleus (top-p) sampling with temperature, as MELT evaluates (temperature 1.0, top-p 0.7): the
    logits divided by `temperature`, then only the most probable tokens whose probabilities sum to at
    least `top_p` kept (the smallest such set; the most probable token always), renormalised, one token
    drawn. The order and the rule are transformers' TemperatureLogitsWarper then TopPLogitsWarper."""
    temperature: float = 1.0
    top_p: float = 1.0

    def __post_init__(self):
        if not (self.temperature > 0 and 0 < self.top_p <= 1):
            raise LoopKVError(f"sampling needs temperature > 0 and 0 < top_p <= 1, got {self}")


def top_p_mask(logits: torch.Tensor, top_p: float) -> torch.Tensor:
    """(..., V) bool: the tokens nucleus sampling keeps, i.e. those whose more probable tokens hold
    less than `top_p` of the probability (so the kept set is the smallest reaching top_p)."""
    if top_p >= 1.0:
        return torch.ones_like(logits, dtype=torch.bool)
    probs, order = torch.sort(logits.float().softmax(-1), dim=-1, descending=True, stable=True)
    before = probs.cumsum(-1) - probs                  # the mass of the tokens ranked above each
    keep_sorted = before < top_p
    keep_sorted[..., 0] = True
    return torch.zeros_like(keep_sorted).scatter(-1, order, keep_sorted)


def sampling_probs(logits: torch.Tensor, sampling: Sampling) -> torch.Tensor:
    """(..., V) the distribution a token is drawn from: temperature, then the top-p set, renormalised."""
    scaled = logits.float() / sampling.temperature
    return scaled.masked_fill(~top_p_mask(scaled, sampling.top_p), float("-inf")).softmax(-1)


def draw(probs: torch.Tensor, uniform: torch.Tensor) -> torch.Tensor:
    """(B,) tokens by inverse transform: the first token whose cumulative probability exceeds
    uniform * total (uniform in [0, 1), one per row); a token of probability 0 is never drawn."""
    cdf = probs.double().cumsum(-1)
    target = (uniform.to(cdf) * cdf[:, -1]).unsqueeze(-1)
    tokens = torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp(max=probs.shape[-1] - 1)
    drawn = probs.gather(-1, tokens.unsqueeze(-1)).squeeze(-1) > 0
    return torch.where(drawn, tokens, probs.argmax(-1))    # round-off at the very top of the cdf


class _SeededSampler(LogitsProcessor):
    """Replaces each step's scores by a one-hot of the token drawn for each row (so generate's greedy
    argmax takes it): one uniform per row per step from that row's own CPU generator, whatever the
    device, batch or other rows."""

    def __init__(self, sampling: Sampling, seeds: list[int]):
        self.sampling = sampling
        self.generators = [torch.Generator().manual_seed(int(s)) for s in seeds]

    def __call__(self, input_ids: torch.LongTensor, scores: torch.Tensor) -> torch.Tensor:
        uniform = torch.cat([torch.rand(1, generator=g, dtype=torch.float64) for g in self.generators])
        tokens = draw(sampling_probs(scores, self.sampling), uniform.to(scores.device))
        return torch.full_like(scores, float("-inf")).scatter(-1, tokens.unsqueeze(-1), 0.0)


@torch.no_grad()
def generate(model, prompts: list[list[int]], max_new_tokens: int, batch_size: int,
             cache_factory: CacheFactory | None = None, eos_id: int | list[int] | None = None,
             temperature: float = 0.0, stop_strings: list[str] | None = None,
             tokenizer=None, sampling: Sampling | None = None, seeds: list[int] | None = None) -> list[list[int]]:
    """New token ids per prompt (eos and anything after it removed). Prompts are sorted by length
    into batches to keep padding small; results come back in input order. Decoding is greedy, or with
    `sampling` nucleus sampling where prompt i draws from a generator seeded with seeds[i] (the same
    tokens at any batch size and in any company). temperature > 0 without `sampling` samples the full
    distribution from torch's global generator instead (seed it first; its draws depend on the batch).
    A row ends at any of `eos_id` (default: end_of_generation_ids). `stop_strings` (with `tokenizer`)
    end a row once its text holds one: the tokens up to there are unchanged, the caller cuts the text
    at the stop string."""
    if sampling is not None and (seeds is None or len(seeds) != len(prompts)):
        raise LoopKVError("seeded sampling needs one seed per prompt")
    if sampling is not None and temperature > 0:
        raise LoopKVError("give either `sampling` (seeded nucleus sampling) or `temperature`, not both")
    model.eval()
    if cache_factory is None:
        cache_factory = lambda: make_cache(model.config.kv_method, model.config)  # noqa: E731
    ends = end_of_generation_ids(model, tokenizer) if eos_id is None else _ids(eos_id)
    order = sorted(range(len(prompts)), key=lambda i: len(prompts[i]))
    results: list[list[int] | None] = [None] * len(prompts)
    for start in range(0, len(order), batch_size):
        chunk = order[start:start + batch_size]
        ids, mask = left_pad([prompts[i] for i in chunk], model.config.pad_token_id, model_device(model))
        if sampling is not None:    # greedy over the drawn token's one-hot: the same loop as greedy
            decode = {"do_sample": False,
                      "logits_processor": LogitsProcessorList([_SeededSampler(sampling, [seeds[i] for i in chunk])])}
        elif temperature > 0:
            decode = {"do_sample": True, "temperature": temperature, "top_k": 0, "top_p": 1.0}
        else:
            decode = {"do_sample": False}
        # unseeded sampling draws from the caller's stream, as documented; every other decode draws per batch
        draws = contextlib.nullcontext() if temperature > 0 else batch_draws(start // batch_size)
        with draws:
            out = model.generate(
                input_ids=ids, attention_mask=mask, cache=cache_factory(), max_new_tokens=max_new_tokens,
                eos_token_id=ends if len(ends) > 1 else ends[0], pad_token_id=model.config.pad_token_id, **decode,
                **({"stop_strings": list(stop_strings), "tokenizer": tokenizer} if stop_strings else {}),
            )
        for row, i in zip(out[:, ids.shape[1]:].tolist(), chunk):
            end = next((j for j, t in enumerate(row) if t in ends), len(row))
            results[i] = row[:end]
    return results


def greedy_generate(model, prompts: list[list[int]], max_new_tokens: int, batch_size: int,
                    cache_factory: CacheFactory | None = None, eos_id: int | list[int] | None = None,
                    temperature: float = 0.0, stop_strings: list[str] | None = None,
                    tokenizer=None) -> list[list[int]]:
    """`generate` without seeded sampling: greedy (temperature > 0: torch's global generator)."""
    return generate(model, prompts, max_new_tokens, batch_size, cache_factory, eos_id, temperature,
                    stop_strings, tokenizer)


@torch.no_grad()
def continuation_logprobs(model, contexts: list[list[int]], continuations: list[list[int]],
                          batch_size: int, cache_factory: CacheFactory | None = None) -> list[float]:
    """Sum of log p(continuation | context) for each pair (see continuation_scores)."""
    return [logp for logp, _ in continuation_scores(model, contexts, continuations, batch_size, cache_factory)]


@torch.no_grad()
def continuation_scores(model, contexts: list[list[int]], continuations: list[list[int]],
                        batch_size: int, cache_factory: CacheFactory | None = None) -> list[tuple[float, bool]]:
    """(sum of log p(continuation | context), whether every continuation token is the argmax) per
    pair. Without a cache factory: one teacher-forced forward (exact, the teacher's own computation).
    With one: the context is prefilled into a fresh cache (once per distinct context of a batch) and
    the continuation streams through it one token at a time, so every continuation token reads earlier
    tokens the way the method stores them."""
    model.eval()
    scores = []
    for start in range(0, len(contexts), batch_size):
        ctx = contexts[start:start + batch_size]
        cont = continuations[start:start + batch_size]
        with batch_draws(start // batch_size):
            if cache_factory is None:
                scores.extend(_scores_one_forward(model, ctx, cont))
            else:
                scores.extend(_scores_streamed(model, ctx, cont, cache_factory()))
    return scores


def _scores_one_forward(model, ctx, cont) -> list[float]:
    ids, mask = left_pad([c + k for c, k in zip(ctx, cont)], model.config.pad_token_id, model_device(model))
    logp = torch.log_softmax(model(ids, attention_mask=mask, use_cache=False).logits.float(), -1)
    ids = ids.cpu()
    width = ids.shape[1]
    out = []
    for row, k in enumerate(cont):
        positions = torch.arange(width - len(k), width)
        targets = ids[row, positions]
        picked = logp[row, (positions - 1).to(logp.device)].cpu()     # (len(k), V) rows to the host
        greedy = bool((picked.argmax(-1) == targets).all())
        out.append((float(picked[torch.arange(len(k)), targets].sum()), greedy))
    return out


def _scores_streamed(model, ctx, cont, cache) -> list[float]:
    pad, device = model.config.pad_token_id, model_device(model)
    # a context shared by several continuations (a multiple-choice item's choices) is prefilled once,
    # then its cache row is copied to each of them (LoopCache.reorder_cache); not for a model whose
    # forward draws random per-row states (Huginn): fewer prefilled rows would draw other states
    if getattr(model, "draws_initial_states", False):
        prefilled, owner = list(ctx), list(range(len(ctx)))
    else:
        first: dict[tuple[int, ...], int] = {}
        owner = [first.setdefault(tuple(c), len(first)) for c in ctx]
        prefilled = [list(c) for c in first]
    ids, mask = left_pad(prefilled, pad, device)
    width = max(len(k) for k in cont)
    # continuations right-padded: a row's pads come after its real tokens, so nothing real reads them
    cont_ids = torch.full((len(cont), width), pad, dtype=torch.long)
    cont_mask = torch.zeros((len(cont), width), dtype=torch.long)
    for i, k in enumerate(cont):
        cont_ids[i, :len(k)] = torch.tensor(k, dtype=torch.long)
        cont_mask[i, :len(k)] = 1
    cont_ids, cont_mask = cont_ids.to(device), cont_mask.to(device)
    logits = model(ids, attention_mask=mask, cache=cache).logits[:, -1]
    if len(prefilled) < len(ctx):
        rows = torch.tensor(owner, device=device)
        cache.reorder_cache(rows)
        logits, mask = logits.index_select(0, rows), mask.index_select(0, rows)
    total = torch.zeros(len(cont), dtype=torch.float64, device=device)
    greedy = torch.ones(len(cont), dtype=torch.bool, device=device)
    for j in range(width):
        logp_all = torch.log_softmax(logits.float(), -1)
        logp = logp_all.gather(1, cont_ids[:, j:j + 1])[:, 0]
        total += (logp * cont_mask[:, j]).double()
        greedy &= (logp_all.argmax(-1) == cont_ids[:, j]) | (cont_mask[:, j] == 0)
        if j + 1 < width:
            mask = torch.cat([mask, cont_mask[:, j:j + 1]], dim=1)
            logits = model(cont_ids[:, j:j + 1], attention_mask=mask, cache=cache).logits[:, -1]
    return list(zip(total.tolist(), greedy.tolist()))


@torch.no_grad()
def streamed_logits(model, ids: torch.Tensor, cache, prefill: int = 1, **forward_kwargs) -> torch.Tensor:
    """Logits for every position of unpadded rows `ids` (B, L): `prefill` tokens in one forward,
    then one token at a time through `cache` (as served). (B, L, V). `forward_kwargs` go to every
    forward; a tensor among them is per token, (B, L, ...) (Huginn's input_states), and each forward
    gets its tokens' slice."""
    ids = ids.to(model_device(model))

    def run(start: int, stop: int):
        sliced = {k: v[:, start:stop] if torch.is_tensor(v) else v for k, v in forward_kwargs.items()}
        return model(ids[:, start:stop], cache=cache, **sliced).logits

    pieces = [run(0, prefill)]
    for i in range(prefill, ids.shape[1]):
        pieces.append(run(i, i + 1))
    return torch.cat(pieces, dim=1)
