"""BBH's answer extraction and exact match (eval/answers.py; lm_tasks/metrics.py bbh), against
hand-written model outputs: the text after the last "So the answer is", else the first line,
stripped, one trailing period removed; an option target "(A)" also matched by "A"."""
import pytest

from loopkv.eval.answers import bbh_correct, extract_bbh
from loopkv.eval.lm_tasks.metrics import bbh


@pytest.mark.parametrize("output, expected", [
    (" (A)", "(A)"),                                             # a direct answer after "A:"
    (" (B).", "(B)"),                                            # its period dropped
    (" valid\nQ: the next", "valid"),                            # the first line only
    ("\n  No  \nmore", "No"),                                    # stripped, blank lead skipped
    (" Let's think step by step. 3 + 4 = 7. So the answer is 7.", "7"),
    ("So the answer is (A). Then again, so the answer is (C).", "(C)"),   # the last one
    ("step one.\nSo the answer is: ] } ]\nstep two", "] } ]"),   # to the end of its line
    (" costume counterpart oven", "costume counterpart oven"),
    ("", None), ("  \n ", None), ("So the answer is .", None),
])
def test_the_answer_is_what_bbh_reads(output, expected):
    assert extract_bbh(output) == expected


@pytest.mark.parametrize("output, accept, correct", [
    (" (A)", ["(A)"], True),
    (" A", ["(A)"], True),                # a bare letter for an option target
    (" A.", ["(A)"], True),
    (" (a)", ["(A)"], False),             # letters are capitals, as BBH's
    (" (B)", ["(A)"], False),
    (" (A) circle", ["(A)"], False),      # exact match: nothing after the option
    (" (C)", ["(A)", "(C)"], True),       # any accepted target (geometric_shapes' circle / ellipse)
    (" Yes", ["Yes"], True),
    (" yes", ["Yes"], False),             # exact, case included
    (" A", ["A"], True),
    (" 7", ["7", "seven"], True), (" seven", ["7", "seven"], True), (" 8", ["7", "seven"], False),
    (" So the answer is No.", ["No"], True),
    ("", ["(A)"], False),
])
def test_exact_match_against_the_accepted_targets(output, accept, correct):
    assert bbh_correct(output, accept) is correct


def test_the_task_metric_reports_exact_match_and_no_answer():
    assert bbh({"answer": "(B)", "accept": ["(B)"]}, [" B\n"]) == {"exact_match": 1.0, "no_answer": 0.0}
    assert bbh({"answer": "No"}, [" Yes"]) == {"exact_match": 0.0, "no_answer": 0.0}      # `answer` alone
    assert bbh({"answer": "No"}, [""]) == {"exact_match": 0.0, "no_answer": 1.0}
