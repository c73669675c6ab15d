"""Rendering every results table the same way: CSV (all fields, n per cell), TeX, and a PDF page
with the paper's columns shaded. A table is its rows, a TableSpec and a footnote.

A column the spec declares a proportion (an accuracy over n items, n in another field) is printed
with its 95% Wilson interval, and the CSV carries the bounds as <column>_lo / <column>_hi."""
from __future__ import annotations

import csv
import json
import math
from dataclasses import dataclass, field
from pathlib import Path

from loopkv.errors import LoopKVError


def method_labels() -> dict[str, str]:
    """KV method -> its name in reports (each method class's `label`), in the registry's report order."""
    from loopkv.cache.registry import method_labels as labels   # the classes (imports torch): on first use

    return labels()


def method_label(method: str) -> str:
    """A method's report name; a name no method has is shown as it is."""
    return method_labels().get(method, method)


def __getattr__(name: str):
    """METHOD_LABELS: method_labels() as of this access (methods registered later included)."""
    if name == "METHOD_LABELS":
        return method_labels()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


@dataclass
class TableSpec:
    columns: list[tuple[str, str]]               # (row key, header; "\n" breaks the PDF header)
    csv_extra: list[str] = field(default_factory=list)   # CSV-only fields (n per cell, dtypes, ...)
    group_key: str | None = None                  # a rule between rows whose value here changes
    width: float = 19.0                           # PDF page width, inches
    proportions: dict[str, str] = field(default_factory=dict)   # column -> the field holding its n
    own_intervals: tuple[str, ...] = ()   # columns whose rows carry their own <col>_lo / _hi (paired, bootstraps)

    @property
    def keys(self) -> list[str]:
        return [k for k, _ in self.columns]

    @property
    def csv_fields(self) -> list[str]:
        bounds = [f"{k}_{end}" for k in self.keys if k in self.proportions or k in self.own_intervals
                  for end in ("lo", "hi")]
        return self.keys + bounds + [f for f in self.csv_extra if f not in self.keys]


LEVEL = 0.95   # every interval in the reports

# Figures are drawn at a page's text width, so that placed in a paper (or at 100% in the HTML report)
# their type is printed at the size set here, not shrunk to a third of it.
TEXT_WIDTH = 6.9    # inches
FIGURE_STYLE = {"font.size": 8, "axes.titlesize": 8, "axes.labelsize": 8, "xtick.labelsize": 7,
                "ytick.labelsize": 7, "legend.fontsize": 7, "figure.titlesize": 8}


def wrapped(text: str, width: float = TEXT_WIDTH, fontsize: float = 8) -> str:
    """`text` broken into lines that fit `width` inches at `fontsize` points (a figure's long title)."""
    import textwrap

    return textwrap.fill(text, max(20, int(0.9 * width * 72 / (0.6 * fontsize))))   # DejaVu Sans: ~0.6 em a character


def proportion_interval(value: float, n: int, what: str):
    """The Wilson interval of an accuracy `value` measured on n items (value * n must be a whole count)."""
    from loopkv.stats.intervals import wilson

    successes = round(value * n)
    if abs(successes - value * n) > 1e-6 * max(1, n):
        raise LoopKVError(f"{what}: {value} is not a proportion of {n} items (a result file's accuracy and n disagree)")
    return wilson(successes, n, LEVEL)


def with_intervals(rows: list[dict], spec: TableSpec) -> list[dict]:
    """Rows with <column>_lo / _hi for every declared proportion that has a value and an n."""
    out = []
    for row in rows:
        row = dict(row)
        for key, n_key in spec.proportions.items():
            if row.get(key) is not None and row.get(n_key):
                est = proportion_interval(row[key], row[n_key], f"{key} of {row.get('method', row.get('recipe'))}")
                row[f"{key}_lo"], row[f"{key}_hi"] = est.lo, est.hi
        out.append(row)
    return out


def cell_text(row: dict, key: str, spec: TableSpec) -> str:
    """A cell's text: the value, and under a proportion its interval."""
    text = fmt(key, row.get(key))
    if (key in spec.proportions or key in spec.own_intervals) and row.get(f"{key}_lo") is not None:
        text += "\n" + interval_text(key, row[key + "_lo"], row[key + "_hi"])
    return text


def is_difference(key: str) -> bool:
    """A column of differences (a method minus the teacher, on- minus off-policy)."""
    return key.endswith("_vs_teacher") or "_minus_" in key


def interval_text(key: str, lo: float, hi: float) -> str:
    """A cell's interval as the PDF, TeX and HTML print it: a difference near 0 needs a third decimal."""
    digits = 3 if is_difference(key) else 2
    return f"[{lo:.{digits}f}, {hi:.{digits}f}]"


def fmt(key: str, value) -> str:
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if key == "method":
        return method_label(value)
    if "ratio" in key:
        return f"{value:.2f}x"
    if key == "paper_kl":
        return f"{value:.3g}"   # as printed: .059 in Table 1, .0155 in Table 8
    if key in ("paper_aime24", "paper_acc"):   # a percentage, as the paper prints it
        return f"{value:.1f}"
    if key.startswith("kl") or key.endswith("_kl"):
        return f"{abs(value) if abs(value) < 5e-5 else value:.4f}"   # no "-0.0000" from float round-off
    if isinstance(value, float):
        return f"{value:.3f}"
    return str(value)


def write_csv(rows: list[dict], spec: TableSpec, path) -> None:
    fields = spec.csv_fields
    rows = with_intervals(rows, spec)
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=fields, extrasaction="ignore", lineterminator="\n")
        writer.writeheader()
        for row in rows:
            writer.writerow({k: ("" if row.get(k) is None else row[k]) for k in fields})


# LaTeX's special characters in text (method names like kv_quant, "95%", "<= train len")
TEX_SPECIAL = {"\\": r"\textbackslash{}", "&": r"\&", "%": r"\%", "$": r"\$", "#": r"\#", "_": r"\_", "{": r"\{",
               "}": r"\}", "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "<": r"\textless{}",
               ">": r"\textgreater{}"}
TEX_META = "% loopkv-table: "   # the line of the .tex holding what its CSV lacks, for the HTML page (read_tex_meta)


def tex_escape(text) -> str:
    """`text` as LaTeX typesets it literally (a line break becomes a space)."""
    return "".join(TEX_SPECIAL.get(c, c) for c in str(text).replace("\n", " "))


def write_tex(rows: list[dict], spec: TableSpec, note: str, path) -> None:
    head = " & ".join(tex_escape(h) for _, h in spec.columns)
    rows = with_intervals(rows, spec)
    methods = {r["method"]: method_label(r["method"]) for r in rows if "method" in spec.keys and r.get("method")}
    meta = {"columns": dict(spec.columns), "group": spec.group_key, "methods": methods}
    lines = ["% generated by loopkv from results/; do not edit", TEX_META + json.dumps(meta),
             "\\begin{tabular}{" + "l" * len(spec.keys) + "}", "\\hline", head + " \\\\", "\\hline"]
    previous = None
    for row in rows:
        if spec.group_key and previous is not None and row[spec.group_key] != previous:
            lines.append("\\hline")
        previous = row.get(spec.group_key) if spec.group_key else None
        lines.append(" & ".join(tex_escape(cell_text(row, k, spec)) for k in spec.keys) + " \\\\")
    lines += ["\\hline", "\\end{tabular}", "", "% " + note.replace("\n", " ")]
    Path(path).write_text("\n".join(lines) + "\n")


def read_tex_meta(path) -> tuple[dict, str]:
    """What write_tex put in a .tex beside the table: {"columns": {key: header}, "group": key or None,
    "methods": {method: its report name}} ({} from a .tex written before it recorded them), and the
    footnote."""
    lines = Path(path).read_text().splitlines()
    meta = [json.loads(line[len(TEX_META):]) for line in lines if line.startswith(TEX_META)]
    if len(meta) > 1 or "\\end{tabular}" not in lines:
        raise LoopKVError(f"{path}: not a table written by loopkv's write_tex")
    note = " ".join(line[2:] for line in lines[lines.index("\\end{tabular}") + 1:] if line.startswith("% "))
    return (meta[0] if meta else {}), note


def write_pdf(rows: list[dict], spec: TableSpec, note: str, title: str, path) -> None:
    import matplotlib   # here, not at import: the HTML pages (report/html_table.py) use this module without it

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    text = [[cell_text(row, k, spec) for k in spec.keys] for row in with_intervals(rows, spec)]
    tall = 2 if spec.proportions or spec.own_intervals else 1   # a cell with an interval has a second line
    fig, ax = plt.subplots(figsize=(spec.width, 1.8 + 0.36 * tall * len(rows)))
    ax.axis("off")
    table = ax.table(cellText=text, colLabels=[h for _, h in spec.columns], loc="center", cellLoc="center")
    table.auto_set_font_size(False)
    table.set_fontsize(8)
    table.scale(1, 1.5 * tall)
    for (r, c), cell in table.get_celld().items():
        cell.get_text().set_parse_math(False)   # text from configs and result files: a "$" is a dollar sign
        if r == 0:
            cell.set_height(cell.get_height() * 1.6)
            cell.set_facecolor("#e8e8e8")
        elif spec.keys[c].startswith("paper"):
            cell.set_facecolor("#f4f4ff")
    ax.set_title(title, fontsize=10, parse_math=False)
    # escaped, not parse_math=False: matplotlib's wrapping measures the text as math regardless
    fig.text(0.01, 0.01, note.replace("$", r"\$"), fontsize=7, wrap=True)
    fig.savefig(path, metadata={"CreationDate": None})  # byte-identical reruns
    plt.close(fig)


def write_all(rows: list[dict], spec: TableSpec, note: str, title: str, pdf, csv_path, tex) -> None:
    write_pdf(rows, spec, note, title, pdf)
    write_csv(rows, spec, csv_path)
    write_tex(rows, spec, note, tex)


def pooled(cells: list[dict]) -> float | None:
    """Accuracy over several (accuracy, n) cells, weighted by n."""
    n = sum(c["n"] for c in cells)
    return sum(c["accuracy"] * c["n"] for c in cells) / n if n else None


def task_fields(m: dict, passkey_train_max: int) -> dict:
    """The synthetic tasks' columns (arithmetic EM, cloze, passkey within / beyond the training
    length, each with its n) from an evaluation's `metrics` dict."""
    by_length = m["passkey"]["by_length"]
    inside = [c for length, c in by_length.items() if int(length) <= passkey_train_max]
    outside = [c for length, c in by_length.items() if int(length) > passkey_train_max]
    return {
        "arith_em": m["arithmetic"]["exact_match"], "n_arith": m["arithmetic"]["n"],
        "cloze_acc": m["cloze"]["accuracy"], "n_cloze": m["cloze"]["n"],
        "passkey_in": pooled(inside), "n_passkey_in": sum(c["n"] for c in inside),
        "passkey_out": pooled(outside), "n_passkey_out": sum(c["n"] for c in outside),
    }


def quality_fields(m: dict, passkey_train_max: int) -> dict:
    """The measured columns every quality table shares, from a method-eval `metrics` dict."""
    return {
        "bytes_per_token": m["bytes_per_token"],
        "bytes_ratio": m["teacher_bytes_per_token"] / m["bytes_per_token"],
        "kl_streamed": m["fidelity"]["kl"], "top1_streamed": m["fidelity"]["top1"],
        "n_kl_tokens": m["fidelity"]["n_tokens"],
        **task_fields(m, passkey_train_max),
        "cache_dtype": m["cache_dtype"], "compute_dtype": m["compute_dtype"],
    }


N_FIELDS = ["n_kl_tokens", "n_arith", "n_cloze", "n_passkey_in", "n_passkey_out"]
# quality_fields' accuracies, each a proportion of its items (KL / top-1 are over correlated tokens: no interval)
QUALITY_PROPORTIONS = {"arith_em": "n_arith", "cloze_acc": "n_cloze", "passkey_in": "n_passkey_in",
                       "passkey_out": "n_passkey_out"}


def n_summary(rows: list[dict]) -> str:
    n = {k: sorted({r[k] for r in rows if r.get(k) is not None}) for k in N_FIELDS}   # not-run rows have none
    return (f"n per cell: KL/top-1 {n['n_kl_tokens']} tokens, arithmetic {n['n_arith']}, cloze {n['n_cloze']}, "
            f"passkey {n['n_passkey_in']} (<= train length) / {n['n_passkey_out']} (beyond)")


NOT_RUN = "not run"


def not_run_rows(paper: dict, run: set, make_row) -> list[dict]:
    """A row for every paper entry this run has no row for (key not in `run`), so that a paper value
    is shown beside "not run" instead of silently dropped. make_row(key, value) -> the row's key
    and paper fields; the column it names the run in (e.g. budget) should say NOT_RUN."""
    return [make_row(key, value) for key, value in paper.items() if key not in run]


# the papers print a ratio to two decimals or fewer ("14.2x" is 1024 / 72 = 14.22x): a measured ratio
# within this of a printed one is that row
PAPER_RATIO_TOLERANCE = 0.05


def ratio_key(method: str, ratio: float, paper: dict | None = None) -> tuple[str, float]:
    """How the paper tables are keyed: (method, ratio rounded to 2 decimals); with `paper` (a grid keyed
    that way), the key of its row for this method whose printed ratio is within PAPER_RATIO_TOLERANCE."""
    if paper:
        near = [k for k in paper if isinstance(k, tuple) and k[0] == method and abs(k[1] - ratio) <= PAPER_RATIO_TOLERANCE]
        if near:
            return min(near, key=lambda k: abs(k[1] - ratio))
    return method, round(ratio, 2)
