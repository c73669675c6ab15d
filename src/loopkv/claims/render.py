"""claims.csv (every field), claims.md (the reviewer's page) and claims.pdf (the same, for print)."""
from __future__ import annotations

import csv
import textwrap
from collections import Counter

from loopkv.claims import verdict
from loopkv.claims.claim import Result

FIELDS = ["id", "paper", "source", "statement", "paper_value", "verdict", "evidence", "n", "test", "scale",
          "stand_in", "paper_check", "one_run", "evidence_file"]
ROWS_PER_PAGE = 14


def record(r: Result) -> dict:
    c = r.claim
    return {"id": c.id, "paper": c.paper, "source": c.source, "statement": c.statement, "paper_value": c.paper_value,
            "verdict": r.verdict, "evidence": r.evidence, "n": "" if r.n is None else r.n, "test": c.test_text(),
            "scale": c.scale, "stand_in": c.stand_in, "paper_check": c.paper_check, "one_run": c.one_run,
            "evidence_file": r.source}


def counts(results: list[Result]) -> dict[str, int]:
    seen = Counter(r.verdict for r in results)
    return {v: seen.get(v, 0) for v in verdict.VERDICTS}


def summary(results: list[Result], scale: str) -> str:
    return (f"{len(results)} claims at {scale} scale: "
            + ", ".join(f"{n} {v}" for v, n in counts(results).items()))


def write_csv(results: list[Result], path) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=FIELDS, lineterminator="\n")
        writer.writeheader()
        writer.writerows(record(r) for r in results)


def _md(text) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def write_md(results: list[Result], scale: str, how: str, path) -> None:
    lines = ["# The papers' claims against this run", "", summary(results, scale) + ".", "", how, ""]
    for paper in dict.fromkeys(r.claim.paper for r in results):
        lines += [f"## {paper}", "", "| claim | where | paper | verdict | our evidence | n | test |",
                  "|---|---|---|---|---|---|---|"]
        for r in (r for r in results if r.claim.paper == paper):
            c = r.claim
            note = "".join(f"<br>*{label}:* {_md(text)}" for label, text in
                           (("stand-in", c.stand_in), ("the paper's own numbers", c.paper_check)) if text)
            lines.append(f"| {_md(c.statement)} (`{c.id}`){note} | {_md(c.source)} | {_md(c.paper_value)} | "
                         f"**{r.verdict}** | {_md(r.evidence)} | {'' if r.n is None else r.n} | {_md(c.test_text())} |")
        lines.append("")
    open(path, "w").write("\n".join(lines))


COLOURS = {verdict.REPRODUCED: "#d8f0d8", verdict.CONTRADICTED: "#f6d0d0", verdict.INCONCLUSIVE: "#f6ecc8",
           verdict.NOT_RUN: "#e8e8e8", verdict.NOT_AT_SCALE: "#e8e8e8"}


def write_pdf(results: list[Result], scale: str, how: str, path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.backends.backend_pdf import PdfPages

    def wrap(text, width):
        return "\n".join(textwrap.wrap(str(text), width)) or ""

    header = ["claim", "where", "paper", "verdict", "our evidence"]
    pages = [results[i:i + ROWS_PER_PAGE] for i in range(0, len(results), ROWS_PER_PAGE)] or [[]]
    with PdfPages(path, metadata={"CreationDate": None}) as pdf:
        for number, page in enumerate(pages, 1):
            fig, ax = plt.subplots(figsize=(16, 11))
            ax.axis("off")
            text = [[wrap(f"{r.claim.paper}: {r.claim.statement}", 48), wrap(r.claim.source, 14),
                     wrap(r.claim.paper_value, 26), r.verdict, wrap(r.evidence, 52)] for r in page]
            if text:
                table = ax.table(cellText=text, colLabels=header, loc="upper center", cellLoc="left",
                                 colWidths=[0.33, 0.09, 0.17, 0.1, 0.31])
                table.auto_set_font_size(False)
                table.set_fontsize(7)
                for (row, col), c in table.get_celld().items():
                    c.set_height(0.06 if row else 0.03)
                    if row and col == 3:
                        c.set_facecolor(COLOURS[page[row - 1].verdict])
            ax.set_title(f"The papers' claims against this run ({number}/{len(pages)}): {summary(results, scale)}",
                         fontsize=10)
            fig.text(0.02, 0.01, wrap(how, 220), fontsize=7)
            pdf.savefig(fig)
            plt.close(fig)
