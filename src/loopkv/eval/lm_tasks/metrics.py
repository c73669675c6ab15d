"""Per-document scoring for the loopkv lm-eval tasks (referenced from the task YAMLs by module path).
Each returns {metric: value} for one document from its generated text; lm-eval averages them."""
from __future__ import annotations

import re
from pathlib import Path

from loopkv.data.tasks.arithmetic import check_answer
from loopkv.eval.answers import extract_gsm8k, extract_math, gsm8k_correct, math_correct


def gsm8k(doc: dict, results: list[str]) -> dict:
    text = results[0]
    return {"exact_match": float(gsm8k_correct(text, doc["answer"])),
            "no_answer": float(extract_gsm8k(text) is None)}


def math500(doc: dict, results: list[str]) -> dict:
    text = results[0]
    return {"exact_match": float(math_correct(text, doc["answer"])),
            "no_answer": float(extract_math(text) is None)}


def arithmetic(doc: dict, results: list[str]) -> dict:
    return {"exact_match": float(check_answer(results[0], doc["answer"]))}


def passkey(doc: dict, results: list[str]) -> dict:
    found = re.search(r"\d+", results[0])
    return {"accuracy": float(bool(found) and found.group(0) == doc["answer"])}


def code(doc: dict, results: list[str]) -> dict:
    """pass@1 of one greedy completion: the benchmark's program run in the sandbox; the working
    directory (the project and its results/) is hidden from it."""
    from loopkv.eval.code_exec import humaneval_program, mbpp_program
    from loopkv.eval.sandbox import run_program

    build = {"humaneval": humaneval_program, "mbpp": mbpp_program}[doc["protocol"]]
    outcome = run_program(build(doc["problem"], results[0]), hidden=[Path.cwd()])
    return {"pass@1": float(outcome.passed)}
