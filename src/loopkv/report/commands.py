"""Subcommands: table1, melt-table, melt-vs-lla, fig-memory."""
from __future__ import annotations

import json
from pathlib import Path

from loopkv.cli_args import json_arg, named_path
from loopkv.utils.atomic import atomic_path


def register(sub) -> None:
    p = sub.add_parser("table1", help="LLA Table 1 (PDF, CSV, TeX) from method-eval results and distill curves")
    p.add_argument("--cells", nargs="+", required=True, help="method-eval metrics JSONs, in table order")
    p.add_argument("--curves", nargs="*", default=[], help="distill curve JSONs of the codec methods")
    p.add_argument("--passkey-train-max", type=int, required=True,
                   help="longest passkey training length: splits passkey into within / beyond")
    p.add_argument("--pdf", required=True)
    p.add_argument("--csv", required=True)
    p.add_argument("--tex", required=True)
    p.set_defaults(func=_table1)
    register_melt(sub)


def _table1(args) -> None:
    from loopkv.report.table1 import build_rows, write_csv, write_pdf, write_tex

    cells = [json.loads(Path(p).read_text())["metrics"] for p in args.cells]
    curves = {}
    for path in args.curves:
        curve = json.loads(Path(path).read_text())
        curves[curve["setting"]["method"], curve["setting"]["budget"]] = curve
    rows = build_rows(cells, curves, args.passkey_train_max)
    title = "LLA Table 1 at equal cache budgets: our measurements (left) beside the paper's (right)"
    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        write_pdf(rows, pdf, title)
        write_csv(rows, csv_path)
        write_tex(rows, tex)


def register_melt(sub) -> None:
    p = sub.add_parser("melt-table", help="MELT Table 3 (gates) or 4 (components) from the recipes' evaluations")
    p.add_argument("--which", type=int, choices=(3, 4), required=True)
    p.add_argument("--recipes", type=json_arg, required=True, help="recipe name -> its five recipe keys (JSON), in table order")
    p.add_argument("--cell", action="append", type=named_path, default=[], help="RECIPE=quality.json")
    p.add_argument("--curve", action="append", type=named_path, default=[],
                   help="RECIPE=train_curve.json of its final stage")
    _table_arguments(p)
    p.set_defaults(func=_melt_table)

    p = sub.add_parser("melt-vs-lla", help="MELT beside the teacher's KV methods at MELT's cache budget")
    p.add_argument("--teacher-cell", required=True, help="methods/full/1x quality.json")
    p.add_argument("--melt-cell", required=True, help="the full recipe's quality.json")
    p.add_argument("--cells", nargs="*", default=[], help="the compared methods' quality.json")
    _table_arguments(p)
    p.set_defaults(func=_melt_vs_lla)

    p = sub.add_parser("fig-memory", help="memory against generated tokens and bytes against T (PDF, PNG, JSON)")
    p.add_argument("--memory", required=True, help="melt-memory JSON")
    p.add_argument("--pdf", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--json", required=True, help="the figure's data and ratios")
    p.add_argument("--dpi", type=int, default=150)
    p.set_defaults(func=_fig_memory)


def _table_arguments(p) -> None:
    p.add_argument("--passkey-train-max", type=int, required=True,
                   help="longest passkey training length: splits passkey into within / beyond")
    for fmt in ("pdf", "csv", "tex"):
        p.add_argument(f"--{fmt}", required=True)


def _metrics(path) -> dict:
    return json.loads(Path(path).read_text())["metrics"]


def _melt_table(args) -> None:
    from loopkv.report import melt_tables, tables

    metrics = {name: _metrics(path) for name, path in args.cell}
    curves = {name: json.loads(Path(path).read_text()) for name, path in args.curve}
    spec = melt_tables.TABLE3 if args.which == 3 else melt_tables.TABLE4
    rows = melt_tables.recipe_rows(args.which, args.recipes, metrics, curves, args.passkey_train_max)
    what = "state-update (gate) variants" if args.which == 3 else "recipe components"
    title = f"MELT Table {args.which}, {what}: our measurements (left) beside the paper's (right)"
    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        tables.write_all(rows, spec, melt_tables.recipe_note(rows), title, pdf, csv_path, tex)


def _melt_vs_lla(args) -> None:
    from loopkv.report import melt_tables, tables

    rows = melt_tables.versus_rows(_metrics(args.teacher_cell), _metrics(args.melt_cell),
                                   [_metrics(p) for p in args.cells], args.passkey_train_max)
    title = "MELT vs the teacher's KV methods at MELT's cache budget (same teacher, tasks and decoder)"
    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        tables.write_all(rows, melt_tables.VERSUS, melt_tables.versus_note(rows), title, pdf, csv_path, tex)


def _fig_memory(args) -> None:
    from loopkv.report.fig_memory import plot_memory, summary
    from loopkv.report.paper_values import MELT_MEMORY
    from loopkv.utils.atomic import write_json

    memory = json.loads(Path(args.memory).read_text())
    with atomic_path(args.pdf) as pdf, atomic_path(args.png) as png:
        plot_memory(memory, MELT_MEMORY, pdf, png, args.dpi)
    write_json(args.json, {"summary": summary(memory), "curves": memory["curves"],
                           "bytes_over_loops": memory["bytes_over_loops"], "paper": MELT_MEMORY,
                           "provenance": memory["provenance"]})
