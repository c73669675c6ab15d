"""GSM8K and MATH answer extraction and checking on hand-picked outputs."""
import pytest

from loopkv.data.answer_formats import gsm8k_gold, last_boxed
from loopkv.eval.answers import (extract_gsm8k_flexible, extract_gsm8k_strict, extract_math, gsm8k_correct,
                                 gsm8k_no_answer, math_correct, math_equivalent, math_verify_correct,
                                 math_verify_equivalent, normalize_math)


# (output, lm-eval's strict-match, its flexible-extract): the number after "#### ", the last number
@pytest.mark.parametrize("text, strict, flexible", [
    ("She has 3 + 4 = 7 apples.\n#### 7", "7", "7"),
    ("#### 1,234", "1234", "1234"),
    ("So the total is $18.00.\n#### $18", None, "18"),      # strict wants a digit right after "#### "
    ("First 5 then 12. The answer is 42.", None, "42"),
    ("The answer is: -3", None, "-3"),
    ("we get 3 and then 4.5", None, "4.5"),
    ("#### 12\nthen 13", "12", "13"),                        # strict: the marked one; flexible: the last
    ("#### -0", "0", "0"),
    ("about 1,234.5 in all", None, "1234.5"),
    ("so 12 ...", None, None),                              # flexible's last match is the "...": as in lm-eval
    ("I will not be a passion", None, None),                # no number: a no-answer
])
def test_gsm8k_strict_and_flexible_extraction(text, strict, flexible):
    assert extract_gsm8k_strict(text) == strict
    assert extract_gsm8k_flexible(text) == flexible


def test_gsm8k_gold_and_correctness():
    assert gsm8k_gold("Janet sells 16 - 3 - 4 = <<16-3-4=9>>9 eggs.\n#### 18") == "18"
    assert gsm8k_correct("2 * 9 = 18\n#### 18", "18")
    assert gsm8k_correct("2 * 9 = 18\n#### 18", "18", flexible=True)
    assert not gsm8k_correct("The answer is 18.0", "18")                  # no "#### ": strict finds nothing
    assert gsm8k_correct("The answer is 18.0", "18", flexible=True)       # compared as numbers
    assert not gsm8k_correct("#### 17", "18") and not gsm8k_correct("#### 17", "18", flexible=True)
    assert not gsm8k_correct("nothing here", "18") and not gsm8k_correct("nothing here", "18", flexible=True)
    assert gsm8k_no_answer("nothing here") and not gsm8k_no_answer("so 12 ...")
    with pytest.raises(ValueError):
        gsm8k_gold("no marker at all")


def test_last_boxed_balances_braces_and_takes_the_last():
    assert last_boxed(r"first \boxed{1} then \boxed{\frac{1}{2}}") == r"\frac{1}{2}"
    assert last_boxed(r"\boxed{\left( 3, \frac{\pi}{2} \right)}.") == r"\left( 3, \frac{\pi}{2} \right)"
    assert last_boxed(r"so it is \boxed 5$.") == "5"
    assert last_boxed(r"\boxed{unbalanced") is None
    assert last_boxed("no box") is None


@pytest.mark.parametrize("predicted, gold", [
    (r"\frac12", r"\dfrac{1}{2}"),
    ("0.5", r"\frac{1}{2}"),
    (r"(3, \pi/2)", r"\left( 3, \frac{\pi}{2} \right)"),
    (r"2\sqrt{3}", r"\sqrt{12}"),
    ("10\\%", "10"),
    ("x = 5", "5"),
    (r"5 \text{ cm}", "5"),
    ("1,000", "1000"),
    (r"90^\circ", "90"),
    ("3.0", "3"),
])
def test_math_equivalent_pairs(predicted, gold):
    assert math_equivalent(predicted, gold)


@pytest.mark.parametrize("predicted, gold", [
    ("3", "4"), (r"\frac{1}{3}", "0.33"), ("(1,2)", "(2,1)"), ("(1,2)", "[1,2]"), (r"\sqrt{2}", "2"),
])
def test_math_not_equivalent_pairs(predicted, gold):
    assert not math_equivalent(predicted, gold)


def test_math_extraction_and_no_answer():
    assert extract_math(r"Thus $x = \boxed{7}$.") == "7"
    assert extract_math("Final Answer: The final answer is $12$. I hope it is correct.") == "12"
    assert extract_math("the model rambles on") is None
    assert math_correct(r"so \boxed{\dfrac{3}{4}}", r"\frac{3}{4}")
    assert not math_correct("no answer here", "3")
    assert normalize_math(r"\text{(A)}") == "(A)"


# math-verify (the headline MATH checker) on the same kind of pairs: (predicted, gold)
@pytest.mark.parametrize("predicted, gold", [
    (r"\frac{1}{2}", "0.5"),
    (r"\sqrt{2}/2", r"\frac{\sqrt2}{2}"),
    ("(1,2)", "(1, 2)"),
    ("x^2+2x+1", "(x+1)^2"),
    ("10\\%", "10"),
    (r"\frac12", r"\dfrac{1}{2}"),
    (r"(3, \pi/2)", r"\left( 3, \frac{\pi}{2} \right)"),
    ("x = 5", "5"),
    ("1,000", "1000"),
])
def test_math_verify_equivalent_pairs(predicted, gold):
    assert math_verify_equivalent(predicted, gold)


@pytest.mark.parametrize("predicted, gold", [
    ("1/3", "0.33"), ("2", "-2"), ("(1,2)", "(2,1)"), ("(1,2)", "[1,2]"), (r"\sqrt{2}", "2"),
])
def test_math_verify_not_equivalent_pairs(predicted, gold):
    assert not math_verify_equivalent(predicted, gold)


def test_math_verify_reads_the_extracted_final_answer():
    assert math_verify_correct(r"so \boxed{\dfrac{3}{4}}, not 5", r"\frac{3}{4}")
    assert math_verify_correct("Final Answer: The final answer is $12$. I hope it is correct.", "12")
    assert not math_verify_correct("we get 3 and then 12", "12")     # no boxed / "answer is": no answer
