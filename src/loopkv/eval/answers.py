"""Final-answer extraction and checking for generated solutions: GSM8K (a number) and MATH (a LaTeX
expression: string normalisation first, then symbolic equality of simple forms with sympy).
`None` from an extractor means the output has no answer at all (counted as the no-answer rate).
The formats themselves (a number's spelling, MATH's last \\boxed) are read by data/answer_formats.py,
the same parser that reads the gold answers."""
from __future__ import annotations

import re
from fractions import Fraction

from loopkv.data.answer_formats import canonical_number, last_boxed

_NUMBER = re.compile(r"-?[\d,]*\.?\d+")
_ANSWER_IS = re.compile(r"answer is[:\s]*\$?([^\n$]+?)\$?(?:\.\s|\.?$|\n| I hope)", re.IGNORECASE)


# ---------------------------------------------------------------- GSM8K


def extract_gsm8k(text: str) -> str | None:
    """The predicted number: after '####' if present, else after 'the answer is', else the last
    number in the text (the usual flexible extraction); None when the text has no number."""
    if "####" in text:
        numbers = _NUMBER.findall(text.split("####", 1)[1])
        if numbers:
            return canonical_number(numbers[0])
    said = _ANSWER_IS.search(text)
    if said:
        numbers = _NUMBER.findall(said.group(1))
        if numbers:
            return canonical_number(numbers[0])
    numbers = _NUMBER.findall(text)
    return canonical_number(numbers[-1]) if numbers else None


def gsm8k_correct(text: str, gold: str) -> bool:
    found = extract_gsm8k(text)
    return found is not None and Fraction(found) == Fraction(gold)


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
