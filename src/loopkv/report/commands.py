"""Subcommands: table1, table7, check-agreement, fig8, table4-fig7, melt-table, melt-vs-lla, fig-memory."""
from __future__ import annotations

import json
from pathlib import Path

from loopkv.cli_args import json_arg, named_path
from loopkv.utils.atomic import atomic_path
from loopkv.utils.checked_io import read_json


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

    p = sub.add_parser("table7", help="LLA Table 7 (the broad suite) from merged lm-eval results")
    p.add_argument("--results", nargs="+", required=True, help="lm-eval-merge JSONs (one per model and task)")
    for fmt in ("pdf", "csv", "tex"):
        p.add_argument(f"--{fmt}", required=True)
    p.set_defaults(func=_table7)

    p = sub.add_parser("check-agreement", help="fail when Table 1 and the lm-eval suite disagree on one measurement")
    p.add_argument("--pairs", nargs="+", required=True,
                   help="method-eval quality.json, then the same (method, budget)'s lm-eval-merge JSON of a "
                        "synthetic task, repeated")
    p.add_argument("--out", required=True, help="the comparison, written only when nothing disagrees")
    p.set_defaults(func=_check_agreement)

    for name, what in (("table5", "LLA Table 5 (serving) from a serve-bench result"),
                       ("table13", "LLA Table 13 (latent-attention kernel) from a kernel-bench result")):
        p = sub.add_parser(name, help=what)
        if name == "table13":   # this run's result, then any measured on other devices
            p.add_argument("--result", required=True, nargs="+", help="kernel-bench result JSONs, this run's first")
        else:
            p.add_argument("--result", required=True, help="the benchmark's result JSON")
        for fmt in ("pdf", "csv", "tex"):
            p.add_argument(f"--{fmt}", required=True)
        p.set_defaults(func=_serving_table, table=name)

    p = sub.add_parser("fig8", help="LLA Figure 8 (passkey heatmaps) and Table 12 from merged passkey-grid results")
    p.add_argument("--data", required=True, help="the grid's test.jsonl")
    p.add_argument("--results", nargs="+", required=True, help="lm-eval-merge JSONs of loopkv_passkey_grid, in order")
    p.add_argument("--reliable", type=float, required=True, help="the recall bar of a reliable length")
    p.add_argument("--pdf", required=True)
    p.add_argument("--png", required=True)
    p.add_argument("--json", required=True, help="every cell, n and the reliable lengths")
    p.add_argument("--dpi", type=int, default=150)
    for fmt in ("pdf", "csv", "tex"):
        p.add_argument(f"--table-{fmt}", required=True, help=f"Table 12 ({fmt})")
    p.set_defaults(func=_fig8)

    p = sub.add_parser("table4-fig7", help="LLA Table 4 (off- vs on-policy) and Figure 7 (exposure curves)")
    p.add_argument("--teacher-samples", required=True, help="methods/full/1x quality_samples.json")
    p.add_argument("--off", nargs="+", required=True, help="off-policy quality.json per budget, in order")
    p.add_argument("--on", nargs="+", required=True, help="on-policy quality.json per budget, same order")
    p.add_argument("--off-curves", nargs="+", required=True, help="off-policy distill curve.json per budget")
    p.add_argument("--on-curves", nargs="+", required=True, help="on-policy curve.json per budget")
    p.add_argument("--bin-tokens", type=int, required=True, help="Figure 7's generated-length bin width")
    p.add_argument("--dpi", type=int, default=150)
    for name in ("table-pdf", "table-csv", "table-tex", "fig-pdf", "fig-png", "fig-json"):
        p.add_argument(f"--{name}", required=True)
    p.set_defaults(func=_table4_fig7)
    register_melt(sub)


def _table4_fig7(args) -> None:
    from loopkv.report import exposure, tables
    from loopkv.utils.atomic import write_json

    def samples_of(quality_path):   # quality.json -> its quality_samples.json beside it
        return read_json(Path(quality_path).with_name("quality_samples.json"), "samples result", {"samples": dict})

    teacher = read_json(args.teacher_samples, "samples result", {"samples": dict})
    cells = []
    for off, on, off_curve, on_curve in zip(args.off, args.on, args.off_curves, args.on_curves, strict=True):
        cells.append({"off": _metrics(off), "on": _metrics(on),
                      "off_samples": exposure.arithmetic_samples(samples_of(off)),
                      "on_samples": exposure.arithmetic_samples(samples_of(on)),
                      "off_curve": read_json(off_curve, "curve", {}),
                      "on_curve": read_json(on_curve, "curve", {})})
    rows = exposure.table_rows(cells, teacher)
    title = "LLA Table 4, off- vs on-policy distillation: our measurements (left) beside the paper's (right)"
    with atomic_path(args.table_pdf) as pdf, atomic_path(args.table_csv) as csv_path, atomic_path(args.table_tex) as tex:
        tables.write_all(rows, exposure.SPEC, exposure.table_note(rows), title, pdf, csv_path, tex)
    teacher_curve = exposure.exposure_curve(exposure.arithmetic_samples(teacher), args.bin_tokens)
    curves = [{"budget": c["off"]["budget"], "teacher": teacher_curve,
               "off": exposure.exposure_curve(c["off_samples"], args.bin_tokens),
               "on": exposure.exposure_curve(c["on_samples"], args.bin_tokens)} for c in cells]
    with atomic_path(args.fig_pdf) as pdf, atomic_path(args.fig_png) as png:
        exposure.plot_exposure(curves, args.bin_tokens, pdf, png, args.dpi)
    write_json(args.fig_json, {"bin_tokens": args.bin_tokens, "curves": curves})


def _fig8(args) -> None:
    from loopkv.report import fig_passkey, tables
    from loopkv.report.paper_values import TABLE12, TABLE12_SOURCE
    from loopkv.utils.atomic import read_jsonl, write_json

    data = read_jsonl(args.data)
    results = [read_json(p, "lm-eval result", {}) for p in args.results]
    cells = [fig_passkey.grid(data, r) for r in results]
    with atomic_path(args.pdf) as pdf, atomic_path(args.png) as png:
        fig_passkey.plot(results, cells, args.reliable, pdf, png, args.dpi)
    rows, spec = fig_passkey.table_rows(results, cells, args.reliable)
    note = (f"Exact recall of a {len(data[0]['answer'])}-digit key, mean over depths "
            f"{cells[0]['depths']}; {rows[0]['n_per_cell']} trials per (length, depth) cell; reliable length = "
            f"longest length up to which every cell recalls >= {args.reliable:g}. Lengths in tokens of the "
            f"project tokenizer (the teacher trained on <= its passkey train lengths). Paper: {TABLE12_SOURCE}.")
    with atomic_path(args.table_pdf) as pdf, atomic_path(args.table_csv) as csv_path, atomic_path(args.table_tex) as tex:
        tables.write_all(rows, spec, note, "LLA Table 12, passkey recall by length: ours beside the paper's summary",
                         pdf, csv_path, tex)
    write_json(args.json, {"reliable_bar": args.reliable,
                           "paper": {"source": TABLE12_SOURCE, "lla": {f"{m} {r:g}x": v for (m, r), v in TABLE12.items()}},
                           "methods": [{"method": r["method"], "budget": r["budget"], "ratio": r["setting"]["ratio"],
                                        **c, "reliable_length": fig_passkey.reliable_length(c, args.reliable)}
                                       for r, c in zip(results, cells)]})


def _table7(args) -> None:
    from loopkv.report import table7, tables

    rows = table7.build_rows([read_json(p, "lm-eval result", {}) for p in args.results])
    title = "LLA Table 7, the broad suite through lm-eval: our measurements (left) beside the paper's (right)"
    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        tables.write_all(rows, table7.SPEC, table7.note(rows), title, pdf, csv_path, tex)


def _check_agreement(args) -> None:
    from loopkv.errors import LoopKVError
    from loopkv.report import agreement

    if len(args.pairs) % 2:
        raise LoopKVError(f"--pairs takes (quality.json, lm-eval JSON) pairs: got {len(args.pairs)} paths")
    report = agreement.check(list(zip(args.pairs[::2], args.pairs[1::2])))
    if report["disagree"]:
        raise LoopKVError(agreement.disagreements_message(report))
    with atomic_path(args.out) as out:
        Path(out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"agreement: {report['agree']} agree, {report['not_comparable']} not comparable")


def _serving_table(args) -> None:
    from loopkv.report import serving_tables, tables

    if args.table == "table5":
        result = read_json(args.result, "serve-bench result", {})
        rows, spec, note = serving_tables.table5_rows(result), serving_tables.TABLE5, serving_tables.table5_note(result)
        title = "LLA Table 5, serving: bytes per token, capacity and decode speed (ours) beside the paper's"
    else:
        results = [read_json(p, "kernel-bench result", {"rows": list}) for p in args.result]
        rows, spec = [r for res in results for r in serving_tables.table13_rows(res)], serving_tables.TABLE13
        note = serving_tables.table13_note(results)
        title = "LLA Table 13, latent-attention kernel vs the teacher's attention and reconstruct-then-attend"
    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        tables.write_all(rows, spec, note, title, pdf, csv_path, tex)


def _table1(args) -> None:
    from loopkv.report.table1 import build_rows, write_csv, write_pdf, write_tex

    cells = [_metrics(p) for p in args.cells]
    curves = {}
    for path in args.curves:
        curve = read_json(path, "curve", {"setting": {"method": str, "budget": str}})
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
    return read_json(path, "result", {"metrics": dict})["metrics"]


def _melt_table(args) -> None:
    from loopkv.report import melt_tables, tables

    metrics = {name: _metrics(path) for name, path in args.cell}
    curves = {name: read_json(path, "curve", {}) for name, path in args.curve}
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

    memory = read_json(args.memory, "melt-memory result", {"curves": (dict, list), "bytes_over_loops": (dict, list),
                                                           "provenance": dict})
    with atomic_path(args.pdf) as pdf, atomic_path(args.png) as png:
        plot_memory(memory, MELT_MEMORY, pdf, png, args.dpi)
    write_json(args.json, {"summary": summary(memory), "curves": memory["curves"],
                           "bytes_over_loops": memory["bytes_over_loops"], "paper": MELT_MEMORY,
                           "provenance": memory["provenance"]})
