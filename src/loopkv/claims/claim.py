"""One claim of a paper, stated once: what it says, where, the paper's number, and the test this
run's results must pass (a quantity, or a difference of two, against a bound)."""
from __future__ import annotations

from dataclasses import dataclass

from loopkv.claims import verdict
from loopkv.claims.evidence import Cell, Computed, Measured, Missing, Reports, difference

SCALES = ("any", "paper")   # any: the relation is measurable on the tiny model; paper: needs the real checkpoint


@dataclass(frozen=True)
class Claim:
    id: str                          # stable, unique: the row's key in claims.csv
    paper: str                       # "LLA" or "MELT"
    source: str                      # where the paper says it ("Table 1", "Section 5", ...)
    statement: str                   # the claim, as a reader would check it
    paper_value: str                 # the paper's own number(s) behind it
    quantity: Cell | Computed        # what this run measures ...
    op: str                          # ... compared (">=" / "<=") ...
    bound: float                     # ... with this bound
    minus: Cell | Computed | None = None   # when given, the quantity is `quantity - minus`
    scale: str = "any"
    stand_in: str = ""               # at tiny scale, what our measurement stands in for (and for what)
    paper_check: str = ""            # the papers' own numbers on it (SPEC.md's reviewer's checklist)
    one_run: bool = False            # a timing or process memory: a measurement of one run, not repeatable bit for bit
    model: str = "Ouro-1.4B"         # the paper model the claim is about (report.paper_model of the runs it applies to)

    def __post_init__(self):
        if self.op not in verdict.OPS:
            raise ValueError(f"claim {self.id}: op must be one of {verdict.OPS}, got {self.op!r}")
        if self.scale not in SCALES:
            raise ValueError(f"claim {self.id}: scale must be one of {SCALES}, got {self.scale!r}")

    def test_text(self) -> str:
        what = self.quantity.describe() + (f" - {self.minus.describe()}" if self.minus else "")
        return f"{what} {self.op} {self.bound:g}"


@dataclass(frozen=True)
class Result:
    claim: Claim
    verdict: str
    evidence: str        # our number, interval and n, or why there is none
    n: int | None
    source: str          # the file(s) it came from


def evaluate(claim: Claim, reports: Reports, scale: str, paper_model: str = "Ouro-1.4B") -> Result:
    """scale: "tiny" (the embedded default) or "paper" (a pretrained checkpoint); paper_model: the paper
    model this run is set beside (report.paper_model): a claim about another model is not tested."""
    if claim.model != paper_model:
        return Result(claim, verdict.NOT_AT_SCALE, f"a claim about {claim.model}; this run is set beside "
                                                   f"{paper_model} (report.paper_model)", None, "")
    if claim.scale == "paper" and scale != "paper":
        return Result(claim, verdict.NOT_AT_SCALE, "needs the pretrained checkpoint (paper scale)", None, "")
    measured = claim.quantity.measure(reports)
    if claim.minus is not None and isinstance(measured, Measured):
        other = claim.minus.measure(reports)
        measured = other if isinstance(other, Missing) else difference(measured, other)
    if isinstance(measured, Missing):
        return Result(claim, verdict.NOT_RUN, measured.reason, None, "")
    e = measured.estimate
    return Result(claim, verdict.decide(e.lo, e.hi, claim.op, claim.bound), measured.text(),
                  e.n if measured.interval else None, measured.source)
