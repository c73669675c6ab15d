"""Subcommands: table-html, claims-html (the pages of `snakemake --report`; report/html_table.py)."""
from __future__ import annotations

from loopkv.jobs import Arg, JobSpec
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import write_text

TABLE_HTML = JobSpec(
    "table-html", "a table's page of the HTML report, from its CSV and .tex",
    inputs=(Arg("csv", "the table's CSV (values, <column>_lo / _hi intervals, n)"),
            Arg("tex", "its .tex (headers, method names, groups and footnote)", required=False)),
    outputs=(Arg("html", "the page to write"),),
    extra=(Arg("title", "the page's heading (default: the CSV's name)", kind="value", required=False),))

CLAIMS_HTML = JobSpec(
    "claims-html", "the claims page of the HTML report, from claims.csv and claims.md",
    inputs=(Arg("csv", "claims.csv"), Arg("md", "claims.md (its summary and how a verdict is reached)")),
    outputs=(Arg("html", "the page to write"),))


def register(sub) -> None:
    add_command(sub, TABLE_HTML, _table_html)
    add_command(sub, CLAIMS_HTML, _claims_html)


def _table_html(job) -> None:
    from loopkv.report.html_table import table_page

    write_text(job.args.html, table_page(job.args.csv, job.args.tex, job.args.title))


def _claims_html(job) -> None:
    from loopkv.report.html_table import claims_page

    write_text(job.args.html, claims_page(job.args.csv, job.args.md))
