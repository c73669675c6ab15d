"""`loopkv claims`: every registered claim's verdict from this run's reports."""
from __future__ import annotations

from loopkv.jobs import Arg, JobSpec
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import atomic_path

CLAIMS = JobSpec(
    "claims", "every claim of the two papers against this run's reports: reproduced / contradicted / "
              "inconclusive / not run (claims.csv, .md, .pdf)",
    reads=("model.source", "report.paper_model"),
    inputs=(Arg("report", "NAME=FILE of each report the claims read (a table's CSV, a figure's JSON); a report "
                          "this configuration does not build is simply absent", kind="named", required=False),),
    outputs=(Arg("csv", "claims.csv"), Arg("md", "claims.md"), Arg("pdf", "claims.pdf")))

HOW = ("Verdict: 'reproduced' when this run's 95% interval (Wilson for an accuracy; for a difference, the table's "
       "paired interval over the same items where it computes one, else Newcombe's interval for two independent "
       "samples, wider than a paired one when the items are shared; a byte count, KL or timing is a point value) "
       "meets the claim's bound entirely, 'contradicted' when it "
       "misses it entirely, 'inconclusive' when it spans it; 'not run' when the configuration does not build the "
       "row or table; 'not run at this scale' when the claim needs the real checkpoint or is about another paper "
       "model than the run's (report.paper_model). At tiny scale a claim about "
       "a benchmark is tested on its stand-in (named) and says what the mechanism does on a tiny model, not what "
       "the paper's model does.")


def register(sub) -> None:
    add_command(sub, CLAIMS, _claims)


def _claims(job) -> None:
    from loopkv.claims import render
    from loopkv.claims.claim import evaluate
    from loopkv.claims.evidence import Reports
    from loopkv.claims.registry import CLAIMS as REGISTRY

    scale = "paper" if job.cfg["model"]["source"] == "pretrained" else "tiny"
    reports = Reports(job.named("report"))
    results = [evaluate(c, reports, scale, job.cfg["report"]["paper_model"]) for c in REGISTRY]
    with atomic_path(job.args.csv) as csv_path, atomic_path(job.args.md) as md, atomic_path(job.args.pdf) as pdf:
        render.write_csv(results, csv_path)
        render.write_md(results, scale, HOW, md)
        render.write_pdf(results, scale, HOW, pdf)
    print(render.summary(results, scale))
