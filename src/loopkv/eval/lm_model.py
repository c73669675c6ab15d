"""The lm-eval model "loopkv": a teacher checkpoint read through one KV method at one budget.

Every request goes through the same functions as loopkv's own evaluators (eval/generation.py), so a
task scored here and the same task scored directly give the same numbers:
- loglikelihood: the context prefilled into the method's cache, the continuation streamed through it
  token by token (as method-eval scores every Table 1 cell, the teacher's own cache included);
- loglikelihood_rolling: disjoint windows of the model's trained length, each scored the same way;
- generate_until: greedy, batched, streamed through the method's cache, cut at eos and `until`; with
  do_sample (temperature, top_p, seed in the request's generation kwargs) seeded nucleus sampling
  instead, through the same cache and loop (generation.generate). lm-eval asks a task's `repeats`
  samples of a document as that many copies of its request: copy k draws from a generator seeded by
  (seed, the document and its prompt, k), so a document's samples do not depend on the shard, the
  batch or the other requests, and every method draws the same random numbers for it.
Contexts are framed as the tokenizer frames a text (data/encoding.py encode_prompt: our tiny
teacher's leading <bos>, nothing for Ouro's); continuations without special tokens.

Command line: `loopkv lm-eval --model loopkv --model_args teacher=DIR,method=lla,budget=4x,codec=PT,config=YAML ...`.
"""
from __future__ import annotations

import hashlib
import json
import warnings

import torch
from lm_eval.api.model import LM
from lm_eval.api.registry import register_model

from loopkv.data.encoding import encode_prompt
from loopkv.errors import LoopKVError
from loopkv.eval.generation import Sampling, continuation_scores, generate
from loopkv.eval.method_model import MethodModel, load_method_model


@register_model("loopkv")
class LoopKVLM(LM):
    def __init__(self, teacher: str | None = None, method: str = "full", budget: str = "1x", codec: str | None = None,
                 student: str | None = None, config: str | None = None, batch_size: int | str = 16,
                 max_length: int | str | None = None, threads: int | str | None = None,
                 served: MethodModel | None = None, methods_cfg: dict | None = None, dtype: str | None = None,
                 device: str | None = None, **ignored):
        super().__init__()
        unknown = set(ignored) - {"max_batch_size"}
        if unknown:
            raise LoopKVError(f"model loopkv: unknown argument(s) {sorted(unknown)}")
        if threads is not None:
            torch.set_num_threads(int(threads))
        if served is None:
            if teacher is None:
                raise LoopKVError("model loopkv needs teacher=DIR (a teacher checkpoint)")
            if methods_cfg is None:
                if config is None and method != "full":
                    raise LoopKVError("model loopkv needs config=YAML (its `methods` section) for a method other than full")
                from loopkv.config import load_config

                loaded = load_config(config, check_paths=False) if config else None
                methods_cfg = loaded["methods"] if loaded else {"budgets": {}, "cache_dtype": "bfloat16",
                                                               "k_share": 0.375}
                dtype = dtype or (loaded["model"]["dtype"] if loaded else "float32")
            from loopkv.utils.device import resolve_device

            # lm-eval's --device, else the same rule as every loopkv command; lm-eval's CLI passes
            # cuda:0 by default, which (as lm-eval's own hf model does) falls back where there is no GPU
            if device and str(device).startswith("cuda") and not torch.cuda.is_available():
                warnings.warn(f"model loopkv: device {device} is not available here; using the CPU")
                device = "cpu"
            served = load_method_model(teacher, method, budget, methods_cfg, dtype or "float32",
                                       codec_path=codec, student_dir=student, device=resolve_device(device))
        self.served = served
        self.tokenizer = served.tokenizer
        self.batch_size = int(batch_size) if str(batch_size).isdigit() else 16
        # rolling windows: the length the model was trained on unless given
        self.max_length = int(max_length or served.model.config.max_position_embeddings)

    # ------------------------------------------------------------------ requests

    def _context(self, text: str) -> list[int]:
        return encode_prompt(self.tokenizer, text)

    def _tokens(self, text: str) -> list[int]:
        return self.tokenizer.encode(text, add_special_tokens=False)

    def _score(self, contexts: list[list[int]], continuations: list[list[int]]) -> list[tuple[float, bool]]:
        if any(len(c) == 0 for c in continuations):
            raise LoopKVError("loglikelihood of an empty continuation")
        return continuation_scores(self.served.model, contexts, continuations, self.batch_size,
                                   self.served.cache_factory)

    def loglikelihood(self, requests) -> list[tuple[float, bool]]:
        contexts = [self._context(r.args[0]) for r in requests]
        continuations = [self._tokens(r.args[1]) for r in requests]
        return self._score(contexts, continuations)

    def loglikelihood_rolling(self, requests) -> list[float]:
        from lm_eval.utils import get_rolling_token_windows, make_disjoint_window

        bos = self.tokenizer.bos_token_id
        contexts, continuations, owners = [], [], []
        for i, request in enumerate(requests):
            windows = get_rolling_token_windows(token_list=self._tokens(request.args[0]), prefix_token=bos,
                                                max_seq_len=self.max_length, context_len=1)
            for context, continuation in map(make_disjoint_window, windows):
                contexts.append(list(context))
                continuations.append(list(continuation))
                owners.append(i)
        totals = [0.0] * len(requests)
        for owner, (logp, _) in zip(owners, self._score(contexts, continuations)):
            totals[owner] += logp
        return totals

    def generate_until(self, requests) -> list[str]:
        # requests sharing generation settings are generated together (batched, sorted by length)
        groups: dict[tuple, list[int]] = {}
        seeds: list[int | None] = [None] * len(requests)
        copies: dict[tuple, int] = {}
        for i, request in enumerate(requests):
            kwargs = dict(request.args[1])
            sampling, seed = _decoding(kwargs)
            until = kwargs.get("until") or []
            until = [until] if isinstance(until, str) else list(until)
            if sampling is not None:
                # the k-th copy of a request (lm-eval repeats one request `repeats` times) is sample k
                key = (request.task_name, request.doc_id, request.idx, request.args[0],
                       json.dumps(request.args[1], sort_keys=True, default=str))
                k = copies[key] = copies.get(key, -1) + 1
                seeds[i] = sample_seed(seed, request, k)
            groups.setdefault((int(kwargs.get("max_gen_toks", 256)), tuple(until), sampling), []).append(i)
        outputs: list[str] = [""] * len(requests)
        for (budget, until, sampling), members in groups.items():
            prompts = [self._context(requests[i].args[0]) for i in members]
            # rows stop at a stop string (the text up to it is what a full-length run gives)
            generated = generate(self.served.model, prompts, budget, self.batch_size, self.served.cache_factory,
                                 stop_strings=[u for u in until if u], tokenizer=self.tokenizer, sampling=sampling,
                                 seeds=None if sampling is None else [seeds[i] for i in members])
            for i, ids in zip(members, generated):
                outputs[i] = _cut(self.tokenizer.decode(ids), until)
        return outputs


# generation settings the model does not implement, with the values that mean "off"
_UNSUPPORTED = {"top_k": (None, 0), "min_p": (None, 0), "typical_p": (None, 1), "num_beams": (None, 1),
                "repetition_penalty": (None, 1)}


def _decoding(kwargs: dict) -> tuple[Sampling | None, int]:
    """(None, 0) for greedy, (Sampling, seed) for do_sample; settings the model does not implement
    are refused rather than ignored."""
    do_sample = bool(kwargs.get("do_sample", False))
    temperature = kwargs.get("temperature")
    unsupported = {k: kwargs[k] for k, off in _UNSUPPORTED.items() if kwargs.get(k) not in off}
    if unsupported:
        raise LoopKVError(f"model loopkv: generation settings {unsupported} are not supported "
                          f"(greedy, or do_sample with temperature and top_p)")
    if not do_sample:
        if temperature not in (None, 0, 0.0) or kwargs.get("top_p") not in (None, 1, 1.0):
            raise LoopKVError("model loopkv: temperature / top_p need do_sample true (without it decoding is greedy)")
        return None, 0
    temperature = 1.0 if temperature is None else float(temperature)
    if temperature <= 0:
        raise LoopKVError("model loopkv: do_sample needs temperature > 0 (temperature 0 is greedy: do_sample false)")
    return Sampling(temperature, float(kwargs.get("top_p") or 1.0)), int(kwargs.get("seed") or 0)


def sample_seed(seed: int, request, k: int) -> int:
    """The generator seed of sample k of a request: from the seed, the document, the prompt and k
    (never its position in a shard or a batch)."""
    from loopkv.utils.seeding import derive_seed

    content = json.dumps([request.doc, request.args[0], request.idx], sort_keys=True, default=str)
    return derive_seed(seed, "loopkv-sample", hashlib.sha256(content.encode()).hexdigest(), str(k))


def _cut(text: str, until: tuple[str, ...]) -> str:
    """The text up to the first stop string."""
    end = min([text.find(s) for s in until if s and s in text], default=len(text))
    return text[:end]
