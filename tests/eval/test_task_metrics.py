"""What the generative lm-eval tasks report per document (lm_tasks/metrics.py): GSM8K by lm-eval's
strict-match and flexible-extract, MATH-500 by math-verify with our sympy checker beside it, and a
math-verify that raises, times out or is called off the main thread scoring the sample wrong (or
right, from the helper process) without raising or hanging."""
import threading
import time

import math_verify
import pytest
from math_verify.errors import TimeoutException

from loopkv.eval import answers
from loopkv.eval.answers import math_verify_equivalent
from loopkv.eval.lm_tasks import _load_template
from loopkv.eval.lm_tasks.metrics import gsm8k, math500


@pytest.mark.parametrize("output, expected", [
    ("3 * 4 = 12\n#### 12", {"exact_match": 1.0, "exact_match_flexible": 1.0, "no_answer": 0.0}),
    ("so the answer is 12.", {"exact_match": 0.0, "exact_match_flexible": 1.0, "no_answer": 0.0}),
    ("12 then 13", {"exact_match": 0.0, "exact_match_flexible": 0.0, "no_answer": 0.0}),
    ("#### 12\nand then 13", {"exact_match": 1.0, "exact_match_flexible": 0.0, "no_answer": 0.0}),
    ("I cannot say", {"exact_match": 0.0, "exact_match_flexible": 0.0, "no_answer": 1.0}),
])
def test_gsm8k_reports_strict_and_flexible(output, expected):
    assert gsm8k({"answer": "12"}, [output]) == expected


@pytest.mark.parametrize("output, gold, expected", [
    # math-verify right, ours wrong: our \frac regex does not reach the nested \sqrt2
    (r"so $\boxed{\sqrt{2}/2}$", r"\frac{\sqrt2}{2}", (1.0, 0.0, 1.0)),
    # math-verify wrong, ours right: ours strips unit words, math-verify keeps "dollars" as symbols
    ("The answer is 18 dollars.", "18", (0.0, 1.0, 1.0)),
    # both right, both wrong
    (r"\boxed{\dfrac{3}{4}}", r"\frac34", (1.0, 1.0, 0.0)),
    (r"\boxed{-2}", "2", (0.0, 0.0, 0.0)),
])
def test_math500_reports_both_checkers_and_where_they_disagree(output, gold, expected):
    got = math500({"answer": gold}, [output])
    assert (got["exact_match"], got["exact_match_sympy"], got["checkers_disagree"]) == expected
    assert got["no_answer"] == 0.0


def test_math500_without_an_answer():
    assert math500({"answer": "3"}, ["it rambles on, 3"]) == {
        "exact_match": 0.0, "exact_match_sympy": 0.0, "checkers_disagree": 0.0, "no_answer": 1.0}


@pytest.mark.parametrize("template, function", [("gsm8k.yaml", gsm8k), ("math.yaml", math500)])
def test_the_task_yaml_lists_every_metric_the_function_returns(template, function):
    """lm-eval aggregates (and run_task keeps) only the metrics in metric_list."""
    listed = [m["metric"] for m in _load_template(template, resolve=False)["metric_list"]]
    doc = {"answer": "12"}
    assert sorted(listed) == sorted(function(doc, [r"#### 12 \boxed{12}"]))
    assert listed[0] == "exact_match"           # the headline (lm_tasks.LM_TASKS) keeps its name


def test_a_math_verify_exception_scores_wrong_and_does_not_raise(monkeypatch):
    def boom(*args, **kwargs):
        raise RuntimeError("parser exploded")

    monkeypatch.setattr(math_verify, "parse", boom)
    assert math_verify_equivalent("0.5", r"\frac{1}{2}") is False
    got = math500({"answer": r"\frac{1}{2}"}, [r"\boxed{0.5}"])
    assert (got["exact_match"], got["exact_match_sympy"], got["checkers_disagree"]) == (0.0, 1.0, 1.0)


def test_a_math_verify_timeout_exception_scores_wrong_and_does_not_raise(monkeypatch):
    def times_out(*args, **kwargs):
        raise TimeoutException("Operation timed out!")    # a BaseException, not an Exception

    monkeypatch.setattr(math_verify, "verify", times_out)
    assert math_verify_equivalent("0.5", r"\frac{1}{2}") is False


def test_a_hanging_comparison_is_cut_off_by_the_timeout(monkeypatch):
    import math_verify.grader

    monkeypatch.setattr(math_verify.grader, "sympy_expr_eq", lambda *a, **k: time.sleep(60))
    start = time.monotonic()     # an equivalent pair whose strings differ: only the comparison could match it
    assert math_verify_equivalent("x^2+2x+1", "(x+1)^2", timeout_s=1) is False
    assert time.monotonic() - start < 10


def _in_thread(fn):
    out = {}

    def run():
        try:
            out["value"] = fn()
        except BaseException as e:  # noqa: BLE001
            out["error"] = e

    t = threading.Thread(target=run)
    t.start()
    t.join(300)
    assert not t.is_alive()
    return out


@pytest.fixture
def fresh_helper():
    """No helper process left from an earlier test, and none left after this one."""
    def stop():
        if answers._helper is not None:
            answers._stop_helper(answers._helper)
            answers._helper = None
    stop()
    yield
    stop()


def test_off_the_main_thread_the_check_runs_in_the_helper(fresh_helper):
    # math-verify itself refuses there (its timeouts are signal.alarm)
    assert isinstance(_in_thread(lambda: math_verify.parse("$1$"))["error"], ValueError)
    verdicts = _in_thread(lambda: [math_verify_equivalent(r"\sqrt{2}/2", r"\frac{\sqrt2}{2}"),
                                   math_verify_equivalent("2", "-2"), math_verify_equivalent("(1,2)", "(1, 2)")])
    assert verdicts == {"value": [True, False, True]}


def test_a_dead_or_hanging_helper_scores_wrong_and_is_replaced(fresh_helper, monkeypatch):
    monkeypatch.setattr(answers, "_HELPER", "import sys; sys.exit(3)")
    assert _in_thread(lambda: math_verify_equivalent("0.5", r"\frac{1}{2}")) == {"value": False}
    assert answers._helper is None
    monkeypatch.setattr(answers, "_HELPER", "import time; time.sleep(600)")
    monkeypatch.setattr(answers, "_HELPER_START_S", 0)
    start = time.monotonic()
    assert _in_thread(lambda: math_verify_equivalent("0.5", r"\frac{1}{2}", timeout_s=1)) == {"value": False}
    assert time.monotonic() - start < 30 and answers._helper is None     # killed at its deadline (8 s)
    monkeypatch.undo()
    assert _in_thread(lambda: math_verify_equivalent("0.5", r"\frac{1}{2}")) == {"value": True}


def test_the_generation_tasks_are_those_whose_template_generates():
    """LMTask.generative (which tasks may sample: config validation) is what each template's lm-eval
    output_type says."""
    from loopkv.eval.lm_tasks import LM_TASKS

    for task in LM_TASKS.values():
        output_type = _load_template(task.template, resolve=False)["output_type"]
        assert task.generative == (output_type == "generate_until"), task
    assert {t.data for t in LM_TASKS.values() if t.generative} >= {"gsm8k", "math500", "humaneval", "mbpp", "arithmetic"}
