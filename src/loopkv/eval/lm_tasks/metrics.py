"""Per-document scoring for the loopkv lm-eval tasks (referenced from the task YAMLs by module path).
Each returns {metric: value} for one document from its generated text; lm-eval averages them."""
from __future__ import annotations

import re
from pathlib import Path

from loopkv.data.tasks.arithmetic import check_answer
from loopkv.eval.answers import (bbh_correct, extract_bbh, extract_math, gsm8k_correct, gsm8k_no_answer,
                                 math_equivalent, math_verify_equivalent)


def gsm8k(doc: dict, results: list[str]) -> dict:
    """lm-eval's two GSM8K extractions: exact_match = strict-match (the number after '#### '),
    exact_match_flexible = flexible-extract (the last number)."""
    text = results[0]
    return {"exact_match": float(gsm8k_correct(text, doc["answer"])),
            "exact_match_flexible": float(gsm8k_correct(text, doc["answer"], flexible=True)),
            "no_answer": float(gsm8k_no_answer(text))}


def math500(doc: dict, results: list[str]) -> dict:
    """One extracted final answer, two checkers: exact_match = math-verify, exact_match_sympy = ours
    (normalisation + sympy); checkers_disagree = the two differ on this document."""
    found = extract_math(results[0])
    verified = found is not None and math_verify_equivalent(found, doc["answer"])
    ours = found is not None and math_equivalent(found, doc["answer"])
    return {"exact_match": float(verified), "exact_match_sympy": float(ours),
            "checkers_disagree": float(verified != ours), "no_answer": float(found is None)}


def bbh(doc: dict, results: list[str]) -> dict:
    """BBH's exact match of the extracted answer (eval/answers.py) against the document's accepted
    targets (`accept`, else its `answer`); no_answer = nothing to extract (an empty output)."""
    text = results[0]
    return {"exact_match": float(bbh_correct(text, doc.get("accept") or [doc["answer"]])),
            "no_answer": float(extract_bbh(text) is None)}


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


def code_plus(doc: dict, results: list[str]) -> dict:
    """EvalPlus's two verdicts of one completion (eval/code_exec.py: differential testing in the sandbox,
    the working directory hidden): pass@1 = the base inputs, pass@1_plus = the base and plus inputs;
    reference_failed = the canonical solution itself failed there (the data row is broken)."""
    from loopkv.eval.code_exec import evalplus_check

    outcome = evalplus_check(doc["problem"], results[0], hidden=[Path.cwd()])
    return {"pass@1": float(outcome.base), "pass@1_plus": float(outcome.plus),
            "reference_failed": float(outcome.reference_failed)}
