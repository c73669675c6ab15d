"""HumanEval+ / MBPP+ from EvalPlus's files (issue 22): a completion is tested differentially in the
sandbox, its outputs against the canonical solution's on the base inputs and then the plus inputs;
pass@1 = base, pass@1_plus = base and plus. Also the MELT math benchmarks' scoring of an AIME-style
integer answer read from a file, and the local benchmarks through lm-eval with a tiny model."""
import json
from pathlib import Path

import pytest

from loopkv.cli import main
from loopkv.data.local_benchmarks import read_local
from loopkv.eval.code_exec import DiffOutcome, evalplus_check, evalplus_program
from loopkv.eval.lm_tasks import _load_template
from loopkv.eval.lm_tasks.metrics import code_plus, math500
from loopkv.eval.sandbox import Limits, available, run_program

OK, WHY = available()
needs_sandbox = pytest.mark.skipif(not OK, reason=f"sandbox unavailable on this machine: {WHY}")
QUICK = (Limits(timeout_s=10, cpu_s=5, memory_mb=512), Limits(timeout_s=10, cpu_s=5, memory_mb=512))

# written for these tests: the base inputs stay under the cap, a plus input crosses it
CLAMP = {"task_id": "Tiny/0", "prompt": 'def clamp_add(a, b):\n    """a + b, but never more than 100."""\n',
         "entry_point": "clamp_add", "canonical_solution": "    return min(a + b, 100)\n",
         "base_input": [[1, 2], [10, 20], [0, 0]], "plus_input": [[60, 70], [-5, 5], [100, 0]], "atol": 0,
         "contract": "", "test": "not used"}
RIGHT = "    return min(a + b, 100)\n"
BASE_ONLY = "    return a + b\n"          # right on every base input, wrong on plus input 0


def _problem(tmp_path: Path, row: dict, name: str = "humaneval_plus") -> dict:
    path = tmp_path / f"{name}.jsonl"
    path.write_text(json.dumps(row) + "\n")
    return read_local(name, path)[0]


@needs_sandbox
def test_a_humaneval_plus_row_end_to_end(tmp_path):
    doc = _problem(tmp_path, CLAMP)
    assert code_plus(doc, [RIGHT]) == {"pass@1": 1.0, "pass@1_plus": 1.0, "reference_failed": 0.0}
    assert code_plus(doc, [BASE_ONLY]) == {"pass@1": 1.0, "pass@1_plus": 0.0, "reference_failed": 0.0}
    assert code_plus(doc, ["    return a - b\n"]) == {"pass@1": 0.0, "pass@1_plus": 0.0, "reference_failed": 0.0}
    assert code_plus(doc, ["    return undefined_name\n"])["pass@1"] == 0.0


@needs_sandbox
def test_an_mbpp_plus_row_where_the_model_writes_the_whole_function(tmp_path):
    row = {**CLAMP, "prompt": '"""\nWrite a function clamp_add(a, b): a + b, at most 100.\nassert clamp_add(1, 2) == 3\n"""\n',
           "canonical_solution": "def clamp_add(a, b):\n    return min(a + b, 100)\n"}
    doc = _problem(tmp_path, row, "mbpp_plus")
    assert doc["prompt"].endswith('"""\n')
    assert code_plus(doc, ["def clamp_add(a, b):\n    return min(100, a + b)\n"])["pass@1_plus"] == 1.0
    assert code_plus(doc, ["def clamp_add(a, b):\n    return a + b\n"]) == {
        "pass@1": 1.0, "pass@1_plus": 0.0, "reference_failed": 0.0}


@needs_sandbox
def test_float_outputs_compare_within_the_tolerance_and_types_must_match(tmp_path):
    row = {**CLAMP, "prompt": "def third(x):\n", "entry_point": "third", "canonical_solution": "    return x / 3\n",
           "base_input": [[1.0], [2.5]], "plus_input": [[1e-3], [7.0]], "atol": 0}
    doc = _problem(tmp_path, row)["problem"]
    assert evalplus_check(doc, "    return x * (1 / 3) + 1e-9\n", limits=QUICK).plus        # atol 0: within 1e-6
    assert not evalplus_check(doc, "    return x / 3 + 1e-3\n", limits=QUICK).base
    assert not evalplus_check(doc, "    return round(x / 3)\n", limits=QUICK).base         # an int, not a float
    loose = _problem(tmp_path, {**row, "atol": 0.01})["problem"]
    assert evalplus_check(loose, "    return x / 3 + 1e-3\n", limits=QUICK).plus


@needs_sandbox
def test_find_zero_is_checked_as_a_root_not_by_equality(tmp_path):
    row = {**CLAMP, "task_id": "HumanEval/32", "prompt": "def find_zero(xs):\n", "entry_point": "find_zero",
           "canonical_solution": "    return 1.0\n",    # x^2 - 3x + 2 has the roots 1 and 2
           "base_input": [[[2.0, -3.0, 1.0]]], "plus_input": [], "atol": 1e-6}
    doc = _problem(tmp_path, row)["problem"]
    assert evalplus_check(doc, "    return 2.0\n", limits=QUICK) == evalplus_check(doc, "    return 1.0\n", limits=QUICK)
    assert evalplus_check(doc, "    return 2.0\n", limits=QUICK).plus      # no plus inputs: plus = base
    assert not evalplus_check(doc, "    return 1.5\n", limits=QUICK).base


@needs_sandbox
def test_a_broken_reference_is_named_and_scores_zero(tmp_path):
    doc = _problem(tmp_path, {**CLAMP, "canonical_solution": "    return a + b if a < 50 else 1 / 0\n"})
    assert code_plus(doc, [RIGHT]) == {"pass@1": 1.0, "pass@1_plus": 0.0, "reference_failed": 1.0}
    broken = _problem(tmp_path, {**CLAMP, "canonical_solution": "    raise ValueError\n"})
    assert code_plus(broken, [RIGHT]) == {"pass@1": 0.0, "pass@1_plus": 0.0, "reference_failed": 1.0}


@needs_sandbox
def test_hostile_completions_and_fields_cannot_pass_or_escape(tmp_path):
    doc = _problem(tmp_path, CLAMP)["problem"]
    for completion in ("    return 0\nimport sys\nsys.exit(0)\n", "    return 0\nimport os\nos._exit(0)\n",
                       "    return 0\nraise SystemExit\n"):
        assert evalplus_check(doc, completion, limits=QUICK) == DiffOutcome(False, False, False), completion
    # printing (even a flood) is not the verdict and does not stop a right answer
    assert evalplus_check(doc, "    print('x' * 100000)\n" + RIGHT, limits=QUICK).plus
    # the row's text enters the program as string literals only: quotes and backslashes in it are data
    tricky = {**CLAMP, "prompt": 'def clamp_add(a, b):\n    """\'\'\' \\" \\\\ ) """\n',
              "canonical_solution": "    return min(a + b, 100)  # '''); import os; os._exit(0) #\n"}
    tricky_doc = _problem(tmp_path, tricky)["problem"]
    assert evalplus_check(tricky_doc, RIGHT, limits=QUICK).plus
    assert not evalplus_check(tricky_doc, BASE_ONLY, limits=QUICK).plus
    program = evalplus_program(tricky_doc, RIGHT, "base")
    assert run_program(program, QUICK[0]).passed


@needs_sandbox
def test_the_templates_list_every_metric_code_plus_returns(tmp_path):
    doc = _problem(tmp_path, CLAMP)
    for template in ("humaneval_plus.yaml", "mbpp_plus.yaml"):
        cfg = _load_template(template, resolve=False)
        listed = [m["metric"] for m in cfg["metric_list"]]
        assert sorted(listed) == sorted(code_plus(doc, [RIGHT])) and listed[0] == "pass@1"   # the headline
        assert cfg["generation_kwargs"]["max_gen_toks"] == 768                             # EvalPlus's default


def test_an_aime_style_integer_answer_from_a_file_is_scored_by_math_verify(tmp_path):
    path = tmp_path / "aime.jsonl"
    path.write_text(json.dumps({"id": "2024-II-4", "problem": "Find the integer.", "answer": 33}) + "\n")
    doc = read_local("aime24", path)[0]
    assert doc["answer"] == "33"
    for output, right in ((r"Hence the answer is $\boxed{33}$.", 1.0), (r"\boxed{033}", 1.0),
                          (r"The answer is 33.", 1.0), (r"\boxed{34}", 0.0), (r"\boxed{3.3}", 0.0)):
        assert math500(doc, [output])["exact_match"] == right, output
    assert math500(doc, ["no number"])["no_answer"] == 1.0


# ---------------------------------------------------------------- through lm-eval, a tiny model


@pytest.fixture(scope="module")
def tiny_lm(teacher_dir):
    from loopkv.eval.lm_model import LoopKVLM

    return LoopKVLM(teacher=str(teacher_dir), method="full", budget="1x",
                    methods_cfg={"cache_dtype": "bfloat16", "k_share": 0.375, "budgets": {}},
                    dtype="float32", batch_size=4)


@needs_sandbox
def test_the_local_benchmarks_run_through_lm_eval(tiny_lm, tmp_path):
    from loopkv.eval.lm_runner import run_task
    from loopkv.eval.lm_tasks import task_config

    files = {"humaneval_plus": [CLAMP, {**CLAMP, "task_id": "Tiny/1"}],
             "gpqa": [{"question": f"Q{i}?", "choices": ["a", "b", "c", "d"], "answer": i % 4} for i in range(3)],
             "aime24": [{"problem": "1 + 1?", "answer": 2}, {"problem": "2 + 2?", "answer": "4"}]}
    for name, rows in files.items():
        source = tmp_path / f"{name}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rows))
        assert main(["data-bench", name, "--source", str(source), "--out", str(tmp_path / name)]) == 0
        cfg = task_config(f"loopkv_{name}", tmp_path / name, max_gen_toks=8)
        result = run_task(tiny_lm, cfg, list(range(len(rows))))
        assert result["n"] == len(rows)
        expected = {"humaneval_plus": {"pass@1", "pass@1_plus", "reference_failed"}, "gpqa": {"acc", "acc_norm"},
                    "aime24": {"exact_match", "exact_match_sympy", "checkers_disagree", "no_answer"}}[name]
        assert set(result["metrics"]) == expected
        if name == "humaneval_plus":   # a random tiny model solves nothing; the reference is sound
            assert result["metrics"] == {"pass@1": 0.0, "pass@1_plus": 0.0, "reference_failed": 0.0}
