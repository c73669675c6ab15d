"""The pages of the HTML report (`snakemake --report`): a table's page from its CSV, and the claims
page from claims.csv and claims.md. Plain escaped HTML from the standard library, so that each job
starts and ends in well under a second (no pandas, matplotlib or torch): one self-contained file per
page, no scripts, no links (the report embeds each page as a data: URI, where a link to a file
beside it would be broken).

A table's page prints every value as the table's PDF does (tables.fmt), a proportion or a
difference with its interval, "value [lo, hi]", from the CSV's <column>_lo / _hi fields; the
headers, method names, groups and footnote are the ones write_tex records in the table's .tex
(tables.read_tex_meta). Without a .tex, every CSV field is a column under its own name."""
from __future__ import annotations

import csv
import html
import logging
import re
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.report import tables

log = logging.getLogger(__name__)

STYLE = """
body { font-family: system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; font-size: 13px; color: #111;
       margin: 16px; }
h1 { font-size: 17px; margin: 0 0 10px; }
h2 { font-size: 15px; margin: 18px 0 6px; }
table { border-collapse: collapse; margin: 8px 0; }
th, td { border: 1px solid #c8c8c8; padding: 3px 6px; vertical-align: top; }
th { background: #e8e8e8; font-weight: 600; text-align: center; }
td.num { text-align: right; white-space: nowrap; font-variant-numeric: tabular-nums; }
td.paper, th.paper { background: #f4f4ff; }
tr.group td { border-top: 2px solid #555; }
p.note { max-width: 60em; font-size: 12px; color: #333; }
code { font-size: 12px; }
"""

_NUMBER = re.compile(r"[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?x?( \[[-+\d., e]+\])?")   # right-aligned


def parse_value(text: str):
    """A CSV field back as write_csv had it: "" -> None, True / False, an int, a float, else the text."""
    if text == "":
        return None
    if text in ("True", "False"):
        return text == "True"
    if re.fullmatch(r"[-+]?\d+", text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


def cell_text(row: dict, key: str, methods: dict[str, str]) -> str:
    """What the PDF prints in this cell: tables.fmt of the value (a method under its report name),
    and its interval where the CSV has one."""
    value = parse_value(row.get(key, ""))
    text = methods.get(value, value) if key == "method" and value is not None else tables.fmt(key, value)
    lo, hi = row.get(f"{key}_lo", ""), row.get(f"{key}_hi", "")
    if lo != "" and hi != "":
        text += " " + tables.interval_text(key, float(lo), float(hi))
    return str(text)


def _e(text) -> str:
    """Escaped for HTML; a line break (a PDF header's) kept as one."""
    return html.escape(str(text), quote=True).replace("\n", "<br>")


def page(title: str, body: list[str]) -> str:
    return "\n".join(["<!DOCTYPE html>", '<html lang="en">', "<head>", '<meta charset="utf-8">',
                      f"<title>{_e(title)}</title>", f"<style>{STYLE}</style>", "</head>", "<body>",
                      *body, "</body>", "</html>"]).encode("ascii", "xmlcharrefreplace").decode() + "\n"


def read_csv(path) -> tuple[list[str], list[dict]]:
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames or []), list(reader)


def table_page(csv_path, tex_path=None, title: str | None = None) -> str:
    fields, rows = read_csv(csv_path)
    meta, note = tables.read_tex_meta(tex_path) if tex_path is not None else ({}, "")
    if tex_path is not None and not meta:
        log.warning("%s was written before tables recorded their headers: the page shows the CSV's field names "
                    "(rerun the table's rule, e.g. with --forcerun, for its own)", tex_path)
    bounds = {f"{k}_{end}" for k in fields for end in ("lo", "hi")}
    columns = meta.get("columns") or {k: k for k in fields if k not in bounds}
    group, methods = meta.get("group"), meta.get("methods", {})
    missing = [k for k in columns if k not in fields]
    if missing:
        raise LoopKVError(f"{csv_path}: columns {missing} of {tex_path} are not in the CSV")
    title = title or Path(csv_path).stem
    head = "".join(f'<th{_paper(k)}>{_e(h)}</th>' for k, h in columns.items())
    body = [f"<h1>{_e(title)}</h1>", "<table>", f"<thead><tr>{head}</tr></thead>", "<tbody>"]
    previous = None
    for i, row in enumerate(rows):
        starts = group is not None and i > 0 and row.get(group) != previous
        previous = row.get(group) if group else None
        cells = []
        for key in columns:
            text = cell_text(row, key, methods)
            kind = ["num"] if _NUMBER.fullmatch(text) else []
            kind += ["paper"] if key.startswith("paper") else []
            cells.append(f'<td{_class(kind)}>{_e(text)}</td>')
        body.append(f'<tr{_class(["group"] if starts else [])}>{"".join(cells)}</tr>')
    body += ["</tbody>", "</table>"]
    if note:
        body.append(f'<p class="note">{_e(note)}</p>')
    body.append(f'<p class="note">Every field at full precision, with the n of each cell: '
                f'<code>{_e(Path(csv_path).name)}</code> beside this page in the reports directory.</p>')
    return page(title, body)


def _class(names: list[str]) -> str:
    return f' class="{" ".join(names)}"' if names else ""


def _paper(key: str) -> str:
    return ' class="paper"' if key.startswith("paper") else ""


# ---- the claims page: claims.md's summary, then claims.csv's rows by paper, as claims.md lays them out
CLAIM_COLUMNS = ("claim", "where", "paper", "verdict", "our evidence", "n", "test", "evidence file")


def claims_page(csv_path, md_path) -> str:
    from loopkv.claims.render import COLOURS

    _, rows = read_csv(csv_path)
    title, intro = _md_preamble(Path(md_path).read_text())
    body = [f"<h1>{_e(title)}</h1>", *(f"<p>{_e(p)}</p>" for p in intro)]
    head = "".join(f"<th>{_e(c)}</th>" for c in CLAIM_COLUMNS)
    for paper in dict.fromkeys(r["paper"] for r in rows):
        body += [f"<h2>{_e(paper)}</h2>", "<table>", f"<thead><tr>{head}</tr></thead>", "<tbody>"]
        for r in (r for r in rows if r["paper"] == paper):
            notes = "".join(f"<br><em>{label}:</em> {_e(r[key])}" for label, key in
                            (("stand-in", "stand_in"), ("the paper's own numbers", "paper_check")) if r[key])
            colour = COLOURS.get(r["verdict"], "#ffffff")
            cells = [f"{_e(r['statement'])} (<code>{_e(r['id'])}</code>){notes}", _e(r["source"]),
                     _e(r["paper_value"]), f"<strong>{_e(r['verdict'])}</strong>", _e(r["evidence"]), _e(r["n"]),
                     f"<code>{_e(r['test'])}</code>", _e(r["evidence_file"])]
            styles = ["", "", "", f' style="background: {colour}"', "", ' class="num"', "", ""]
            body.append("<tr>" + "".join(f"<td{s}>{c}</td>" for s, c in zip(styles, cells)) + "</tr>")
        body += ["</tbody>", "</table>"]
    return page(title, body)


def _md_preamble(text: str) -> tuple[str, list[str]]:
    """claims.md's title and the paragraphs before its first section."""
    title, paragraphs = "The papers' claims against this run", []
    for line in text.splitlines():
        if line.startswith("## "):
            break
        if line.startswith("# "):
            title = line[2:].strip()
        elif line.strip():
            paragraphs.append(line.strip())
    return title, paragraphs
