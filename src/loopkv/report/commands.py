"""Subcommands: table1."""
from __future__ import annotations

import json
from pathlib import Path

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
