"""How the math benchmarks write a final answer: GSM8K's number after '####' and MATH's last
\\boxed{...}. Read here from the reference solutions (data/benchmarks.py builds the gold answers)
and by eval/answers.py from generated ones, so both sides parse one format one way."""
from __future__ import annotations

from fractions import Fraction


def canonical_number(text: str) -> str | None:
    """A number as one spelling (no commas, $ or trailing dot; integers without a point), or None."""
    text = text.replace(",", "").replace("$", "").strip().rstrip(".")
    try:
        value = Fraction(text)
    except (ValueError, ZeroDivisionError):
        return None
    return str(value.numerator) if value.denominator == 1 else f"{float(value):g}"


def gsm8k_gold(answer_field: str) -> str:
    """The number after GSM8K's '####' in a reference solution."""
    found = canonical_number(answer_field.rsplit("####", 1)[-1])
    if found is None:
        raise ValueError(f"no final number after '####' in {answer_field[-60:]!r}")
    return found


def last_boxed(text: str) -> str | None:
    """Contents of the last \\boxed{...} (or \\fbox{...}) with balanced braces; `\\boxed 5` too."""
    start = max(text.rfind("\\boxed"), text.rfind("\\fbox"))
    if start < 0:
        return None
    rest = text[start:].split("box", 1)[1]
    if rest.startswith(("ed ", " ")):
        return rest.split(" ", 1)[1].split("$")[0].strip() or None
    brace = rest.find("{")
    if brace < 0:
        return None
    depth = 0
    for i in range(brace, len(rest)):
        depth += {"{": 1, "}": -1}.get(rest[i], 0)
        if depth == 0:
            return rest[brace + 1:i]
    return None
