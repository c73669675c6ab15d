"""A claim's verdict from one measured quantity (or a difference of two) and the bound it must meet.

"x >= bound" is reproduced when the whole 95% interval clears the bound, contradicted when the whole
interval falls short, and inconclusive when the interval spans it. A point value (no interval: byte
counts, KLs, timings of one run) is reproduced or contradicted by its value alone.
"""
from __future__ import annotations

REPRODUCED = "reproduced"
CONTRADICTED = "contradicted"
INCONCLUSIVE = "inconclusive"
NOT_RUN = "not run"
NOT_AT_SCALE = "not run at this scale"
VERDICTS = (REPRODUCED, CONTRADICTED, INCONCLUSIVE, NOT_RUN, NOT_AT_SCALE)
OPS = (">=", "<=")


def decide(lo: float, hi: float, op: str, bound: float) -> str:
    if op == ">=":
        if lo >= bound:
            return REPRODUCED
        return CONTRADICTED if hi < bound else INCONCLUSIVE
    if op == "<=":
        if hi <= bound:
            return REPRODUCED
        return CONTRADICTED if lo > bound else INCONCLUSIVE
    raise ValueError(f"a claim's comparison is one of {OPS}, got {op!r}")
