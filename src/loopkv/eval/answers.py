"""Final-answer extraction and checking for generated solutions: GSM8K (a number, by lm-eval's two
extractions), BBH (its answer line, by exact match) and MATH (a LaTeX expression, judged by math-verify
and, beside it, by our own checker: string normalisation first, then symbolic equality of simple forms
with sympy).
`None` from an extractor means the output has no answer at all (counted as the no-answer rate).
The formats themselves (a number's spelling, MATH's last \\boxed) are read by data/answer_formats.py,
the same parser that reads the gold answers."""
from __future__ import annotations

import logging
import re
import threading
from fractions import Fraction

from loopkv.data.answer_formats import canonical_number, last_boxed

log = logging.getLogger(__name__)

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")
_ANSWER_IS = re.compile(r"answer is[:\s]*\$?([^\n$]+?)\$?(?:\.\s|\.?$|\n| I hope)", re.IGNORECASE)


# ---------------------------------------------------------------- GSM8K
# lm-eval's gsm8k task's two filters, their patterns verbatim (lm_eval/tasks/gsm8k/gsm8k.yaml):
# "strict-match" takes the first number written after "#### ", "flexible-extract" the last number-like
# match anywhere. The match is then compared as a number (canonical_number), not as lm-eval's string.
_STRICT = re.compile(r"#### (\-?[0-9\.\,]+)")
_FLEXIBLE = re.compile(r"(-?[$0-9.,]{2,})|(-?[0-9]+)")


def extract_gsm8k_strict(text: str) -> str | None:
    """lm-eval's strict-match: the first number after '#### '; None without one."""
    found = _STRICT.search(text)
    return canonical_number(found.group(1)) if found else None


def extract_gsm8k_flexible(text: str) -> str | None:
    """lm-eval's flexible-extract: the last number in the text (None when that match is no number,
    e.g. a trailing '...', as in lm-eval, where it then fails to match the gold)."""
    matches = _FLEXIBLE.findall(text)
    if not matches:
        return None
    return canonical_number(next(m for m in matches[-1] if m))


def gsm8k_correct(text: str, gold: str, flexible: bool = False) -> bool:
    """The output's number (strict-match, or flexible-extract) equals the gold number."""
    found = (extract_gsm8k_flexible if flexible else extract_gsm8k_strict)(text)
    return found is not None and Fraction(found) == Fraction(gold)


def gsm8k_no_answer(text: str) -> bool:
    """The output has no number at all."""
    return _NUMBER.search(text) is None


# ---------------------------------------------------------------- BBH
# BBH's convention (its chain-of-thought answers end "So the answer is (A)."; its direct answers are the
# first line): the text after the last "So the answer is" on its line, else the output's first line;
# stripped, one trailing period removed. An option target "(A)" is also matched by "A".
_SO_THE_ANSWER = re.compile(r"so the answer is:?", re.IGNORECASE)
_OPTION_TARGET = re.compile(r"\(([A-Z])\)")
_OPTION_ANSWER = re.compile(r"\(?([A-Z])\)?")


def extract_bbh(text: str) -> str | None:
    """The answer BBH reads from an output; None when there is none (an empty output)."""
    said = _SO_THE_ANSWER.split(text)
    answer = (said[-1].split("\n", 1)[0] if len(said) > 1 else text.strip().split("\n", 1)[0]).strip()
    if answer.endswith("."):
        answer = answer[:-1].rstrip()
    return answer or None


def bbh_correct(text: str, accept: list[str]) -> bool:
    """Exact match of the extracted answer against any accepted target ("(A)" also as "A")."""
    found = extract_bbh(text)
    if found is None:
        return False
    letter = _OPTION_ANSWER.fullmatch(found)
    return any(found == target or (letter is not None and _OPTION_TARGET.fullmatch(target) is not None
                                   and letter.group(1) == target[1]) for target in accept)


# ---------------------------------------------------------------- MATH


def extract_math(text: str) -> str | None:
    """The predicted final answer: the last boxed expression, else what follows 'the answer is'."""
    boxed = last_boxed(text)
    if boxed is not None:
        return boxed
    said = _ANSWER_IS.search(text)
    return said.group(1).strip() if said else None


_UNIT_WORDS = ("square", "units", "unit", "degrees", "degree", "dollars", "cents", "inches", "feet", "meters",
               "cm", "km", "hours", "minutes", "seconds", "mph", "ways", "points", "pounds", "students")
_REMOVE = ("\\left", "\\right", "\\!", "\\,", "\\;", "\\:", "\\ ", "$", "^\\circ", "^{\\circ}", "\\%", "%",
           "\\displaystyle", "\\mathrm", "\\mbox")


def normalize_math(answer: str) -> str:
    """A canonical string for a LaTeX answer: layout, units and equivalent spellings removed."""
    s = answer.strip()
    s = re.sub(r"\\text\{\s*([^{}]*)\}", r"\1", s)
    for token in _REMOVE:
        s = s.replace(token, "")
    s = s.replace("\\dfrac", "\\frac").replace("\\tfrac", "\\frac").replace("\\over", "/")
    s = re.sub(r"\\frac(\d)(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\frac\{([^{}]*)\}(\d)", r"\\frac{\1}{\2}", s)
    s = re.sub(r"\\sqrt(\d+)", r"\\sqrt{\1}", s)
    s = re.sub(r"^[a-zA-Z]\s*=\s*", "", s)             # "x = 5" -> "5"
    s = re.sub(r"\s*(" + "|".join(_UNIT_WORDS) + r")\b(\^\{?\d\}?)?", "", s)
    s = s.replace(" ", "").rstrip(".")
    s = re.sub(r"(\d),(\d{3})(?!\d)", r"\1\2", s)        # 1,000 -> 1000
    if re.fullmatch(r"-?\d+\.0+", s):
        s = s.split(".")[0]
    return s


def _latex_to_sympy(s: str):
    import sympy
    from sympy.parsing.sympy_parser import (implicit_multiplication_application, parse_expr,
                                            standard_transformations)

    s = re.sub(r"\\frac\{([^{}]*)\}\{([^{}]*)\}", r"((\1)/(\2))", s)
    s = re.sub(r"\\sqrt\[([^]]*)\]\{([^{}]*)\}", r"((\2)**(1/(\1)))", s)
    s = re.sub(r"\\sqrt\{([^{}]*)\}", r"sqrt(\1)", s)
    s = s.replace("\\pi", "pi").replace("\\cdot", "*").replace("\\times", "*").replace("^", "**")
    s = s.replace("{", "(").replace("}", ")").replace("\\", "")
    transformations = standard_transformations + (implicit_multiplication_application,)
    return sympy.simplify(parse_expr(s, transformations=transformations, evaluate=True))


def _split_top_level(s: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in s:
        depth += {"(": 1, "[": 1, "{": 1, ")": -1, "]": -1, "}": -1}.get(ch, 0)
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += ch
    return parts + [current]


def math_equivalent(predicted: str, gold: str) -> bool:
    """Equal after normalisation, or (element-wise for tuples / intervals) symbolically equal."""
    a, b = normalize_math(predicted), normalize_math(gold)
    if a == b:
        return True
    if len(a) > 80 or len(b) > 80:
        return False
    if a[:1] + a[-1:] in ("()", "[]") and a[:1] + a[-1:] == b[:1] + b[-1:]:
        xs, ys = _split_top_level(a[1:-1]), _split_top_level(b[1:-1])
        return len(xs) == len(ys) and all(_symbolic_equal(x, y) for x, y in zip(xs, ys))
    return _symbolic_equal(a, b)


def _symbolic_equal(a: str, b: str) -> bool:
    if a == b:
        return True
    try:
        import sympy

        return bool(sympy.simplify(_latex_to_sympy(a) - _latex_to_sympy(b)) == 0)
    except Exception:   # noqa: BLE001 - anything sympy cannot parse is simply not equal
        return False


def math_correct(text: str, gold: str) -> bool:
    found = extract_math(text)
    return found is not None and math_equivalent(found, gold)


# ---------------------------------------------------------------- MATH through math-verify
# The headline MATH check: math-verify (what lm-eval's own math tasks use) judges the final answer our
# extractor found (extract_math, so exact_match, the sympy metric and no_answer all read one answer and
# their differences are the checkers' alone), given to it boxed, as its LaTeX extraction expects.
# math-verify bounds each parse and each comparison with signal.alarm, which only works in the main
# thread (elsewhere it raises ValueError): from another thread the check runs in a helper process,
# whose main thread can use those timeouts, with a deadline of our own as a backstop.

MATH_VERIFY_TIMEOUT_S = 5     # math-verify's default, for each parse and each comparison
_HELPER_START_S = 120         # starting the helper process: Python, sympy and math-verify imported


def math_verify_equivalent(predicted: str, gold: str, timeout_s: int = MATH_VERIFY_TIMEOUT_S) -> bool:
    """math-verify's verdict on a final answer against the gold one. Never raises and never hangs:
    an error or a timeout inside math-verify is a wrong answer (logged)."""
    if threading.current_thread() is threading.main_thread():
        return _math_verify_here(predicted, gold, timeout_s)
    return _math_verify_in_helper(predicted, gold, timeout_s)


def math_verify_correct(text: str, gold: str, timeout_s: int = MATH_VERIFY_TIMEOUT_S) -> bool:
    found = extract_math(text)
    return found is not None and math_verify_equivalent(found, gold, timeout_s)


def _math_verify_here(predicted: str, gold: str, timeout_s: int) -> bool:
    from math_verify import parse, verify
    from math_verify.errors import TimeoutException

    try:
        target = parse(f"\\boxed{{{predicted}}}", parsing_timeout=timeout_s)
        reference = parse(f"\\boxed{{{gold}}}", parsing_timeout=timeout_s)
        return bool(verify(reference, target, timeout_seconds=timeout_s))
    except (Exception, TimeoutException) as e:    # noqa: BLE001 - TimeoutException is a BaseException
        log.warning("math-verify failed on %.80r vs gold %.80r (%s: %s): scored wrong",
                    predicted, gold, type(e).__name__, e)
        return False


_helper = None      # the helper process (subprocess.Popen), started when first needed
_helper_lock = threading.Lock()
_HELPER = "from loopkv.eval.answers import _serve_math_verify; _serve_math_verify()"


def _serve_math_verify() -> None:
    """The helper process: one JSON [predicted, gold, timeout_s] per stdin line, one verdict per
    stdout line, until EOF. Anything else that prints goes to stderr, never into the verdicts."""
    import json
    import os
    import sys

    verdicts = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    for line in sys.stdin:
        predicted, gold, timeout_s = json.loads(line)
        verdicts.write(json.dumps(_math_verify_here(predicted, gold, timeout_s)) + "\n")
        verdicts.flush()


def _stop_helper(proc) -> None:
    if proc.poll() is None:
        proc.stdin.close()          # EOF: it ends after its current check (bounded by the timeouts)
        try:
            proc.wait(5)
        except Exception:  # noqa: BLE001
            proc.kill()
            proc.wait()


def _math_verify_in_helper(predicted: str, gold: str, timeout_s: int) -> bool:
    """A plain `python -c` child (not multiprocessing: nothing forks this process's threads, and no
    __main__ of the caller is re-imported)."""
    global _helper
    import atexit
    import json
    import select
    import subprocess
    import sys

    with _helper_lock:
        try:
            started = _helper is None or _helper.poll() is not None
            if started:
                _helper = subprocess.Popen([sys.executable, "-c", _HELPER], stdin=subprocess.PIPE,
                                           stdout=subprocess.PIPE, text=True)
                atexit.register(_stop_helper, _helper)
            _helper.stdin.write(json.dumps([predicted, gold, timeout_s]) + "\n")
            _helper.stdin.flush()
            # two parses and at most four comparisons (two parsed forms each), each bounded by timeout_s
            deadline = 8 * timeout_s + (_HELPER_START_S if started else 0)
            if select.select([_helper.stdout], [], [], deadline)[0]:
                line = _helper.stdout.readline()
                if line:
                    return bool(json.loads(line))
                log.warning("math-verify helper exited on %.80r vs gold %.80r: scored wrong", predicted, gold)
            else:
                log.warning("math-verify helper overran its deadline on %.80r vs gold %.80r: scored wrong",
                            predicted, gold)
        except Exception as e:  # noqa: BLE001 - a broken helper scores the sample wrong, never the run
            log.warning("math-verify helper failed on %.80r vs gold %.80r (%s: %s): scored wrong",
                        predicted, gold, type(e).__name__, e)
        if _helper is not None:      # a helper that overran, died or broke is replaced on the next call
            _helper.kill()
            _helper.wait()
            atexit.unregister(_stop_helper)
            _helper = None
        return False
