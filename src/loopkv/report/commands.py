"""Subcommands: table1, table8, table9, table10, table14, table7, melt-table1, check-agreement, fig8, table4-fig7,
melt-table, melt-vs-lla, fig-memory, teacher-depth."""
from __future__ import annotations

import json
from pathlib import Path

from loopkv.errors import LoopKVError
from loopkv.jobs import Arg, JobSpec, View
from loopkv.jobs.runner import add_command
from loopkv.utils.atomic import atomic_path
from loopkv.utils.checked_io import read_json


_TRAIN_LENGTHS = "data.tasks.passkey.train_lengths"   # the longest splits passkey into within / beyond training
_DPI = "report.dpi"


def _table_files(*names: str) -> tuple[Arg, ...]:
    return tuple(Arg(name, f"the {name.replace('-', ' ')} to write") for name in names)


TABLE1 = JobSpec(
    "table1", "LLA Table 1 (PDF, CSV, TeX) from method-eval results and distill curves",
    reads=(_TRAIN_LENGTHS, "methods.table1_benchmarks", "report.paper_model"),
    inputs=(Arg("cells", "method-eval metrics JSONs, in table order (the teacher's first)", kind="paths"),
            Arg("samples", "method-eval per-item samples JSONs, in the cells' order", kind="paths"),
            Arg("curves", "distill curve JSONs of the codec methods", kind="paths", required=False),
            Arg("benchmarks", "lm-eval-merge JSONs of methods.table1_benchmarks' tasks for every cell (any order)",
                kind="paths", required=False)),
    outputs=_table_files("pdf", "csv", "tex"))

TABLE8 = JobSpec(
    "table8", "LLA Table 8 and Figure 5 (the cold-start rank sweep) from method-eval results and distill curves",
    reads=(_TRAIN_LENGTHS, "methods.table1_benchmarks", "report.paper_model", _DPI),
    inputs=TABLE1.inputs,
    outputs=_table_files("pdf", "csv", "tex", "fig-pdf", "fig-png"))

TABLE9 = JobSpec(
    "table9", "LLA Table 9 (token eviction composed with methods) from eviction-eval and method-eval results",
    reads=(_TRAIN_LENGTHS, "method_eval.seq_len"),
    inputs=(Arg("evicted", "eviction-eval metrics JSONs, in table order (quality_samples.json beside each)",
                kind="paths"),
            Arg("plain", "method-eval metrics JSONs of the same cells, in the same order (samples beside)",
                kind="paths")),
    outputs=_table_files("pdf", "csv", "tex"))

TABLE10 = JobSpec(
    "table10", "LLA Table 10 and Figure 12 (the design ablations) from the variants' distillation curves",
    reads=(_DPI,),
    inputs=(Arg("curve", "VARIANT=curve.json of each distill_ablations variant, the recipe's first", kind="named"),),
    outputs=_table_files("pdf", "csv", "tex", "fig-pdf", "fig-png"))

TABLE14 = JobSpec(
    "table14", "LLA Table 14 (decoupled RoPE beside full-RoPE LLA) from the variants' distillation curves",
    inputs=(Arg("curve", "VARIANT=curve.json: Table 10's recipe (full RoPE) first, then each decoupled_rope "
                         "variant's", kind="named"),),
    outputs=_table_files("pdf", "csv", "tex"))

FIG10 = JobSpec(
    "fig-capacity", "LLA Figure 10 (capacity against context length) from serve-bench's result",
    reads=(_DPI,),
    inputs=(Arg("result", "serve-bench's result JSON (capacity_by_context)"),),
    outputs=_table_files("pdf", "png"))

TABLE7 = JobSpec(
    "table7", "LLA Table 7 (the broad suite) from merged lm-eval results",
    inputs=(Arg("results", "lm-eval-merge JSONs (one per model and task)", kind="paths"),),
    outputs=_table_files("pdf", "csv", "tex"))

MELT_TABLE1 = JobSpec(
    "melt-table1", "MELT Table 1 (its benchmarks) from merged lm-eval results of the teacher and MELT",
    inputs=(Arg("results", "lm-eval-merge JSONs of full/1x and melt/<its budget> on MELT Table 1's benchmarks "
                           "(any order)", kind="paths"),),
    reads=("model.source", "model.path"),   # the note names the teacher served
    outputs=_table_files("pdf", "csv", "tex"))

CHECK_AGREEMENT = JobSpec(
    "check-agreement", "fail when Table 1 and the lm-eval suite disagree on one measurement",
    inputs=(Arg("pairs", "method-eval quality.json, then the same (method, budget)'s lm-eval-merge JSON of a "
                         "synthetic task, repeated", kind="paths"),),
    outputs=(Arg("out", "the comparison, written only when nothing disagrees"),))

TABLE5 = JobSpec(
    "table5", "LLA Table 5 (serving) from a serve-bench result",
    inputs=(Arg("result", "the benchmark's result JSON"),), outputs=_table_files("pdf", "csv", "tex"))

TABLE13 = JobSpec(
    "table13", "LLA Table 13 (latent-attention kernel) from a kernel-bench result",
    inputs=(Arg("result", "kernel-bench result JSONs, this run's first, then any measured on other devices",
                kind="paths"),),
    outputs=_table_files("pdf", "csv", "tex"))

FIG8 = JobSpec(
    "fig8", "LLA Figure 8 (passkey heatmaps) and Table 12 from merged passkey-grid results",
    reads=("passkey_grid.reliable", _DPI, "report.paper_model"),
    inputs=(Arg("data", "the grid's test.jsonl"),
            Arg("results", "lm-eval-merge JSONs of loopkv_passkey_grid, in order", kind="paths")),
    outputs=(*_table_files("pdf", "png"), Arg("json", "every cell, n and the reliable lengths"),
             *_table_files("table-pdf", "table-csv", "table-tex")))

TABLE4_FIG7 = JobSpec(
    "table4-fig7", "LLA Table 4 (off- vs on-policy) and Figure 7 (exposure curves)",
    reads=("on_policy.exposure_bin_tokens", _DPI),
    inputs=(Arg("teacher-samples", "methods/full/1x quality_samples.json"),
            Arg("off", "off-policy quality.json per budget, in order", kind="paths"),
            Arg("on", "on-policy quality.json per budget, same order", kind="paths"),
            Arg("off-curves", "off-policy distill curve.json per budget", kind="paths"),
            Arg("on-curves", "on-policy curve.json per budget", kind="paths"),
            # on a benchmark (on_policy.benchmark): every accuracy from its merged lm-eval results
            Arg("bench-teacher", "the teacher's merged lm-eval result of the benchmark", required=False),
            Arg("bench-off", "off-policy codecs' merged lm-eval results, per budget in order", kind="paths", required=False),
            Arg("bench-on", "on-policy codecs' merged lm-eval results, same order", kind="paths", required=False),
            Arg("tokenizer", "the teacher's directory: its tokenizer counts the generated tokens", required=False)),
    outputs=_table_files("table-pdf", "table-csv", "table-tex", "fig-pdf", "fig-png", "fig-json", "pareto-pdf",
                         "pareto-png", "pareto-json"))

MELT_TABLE = JobSpec(
    "melt-table", "MELT Table 3 (gates) or 4 (components) from the recipes' evaluations",
    # the table's recipes in order, each with its recipe keys (views.melt_table)
    reads=(View("melt_table", "loopkv.jobs.views:melt_table", depends=("melt",)), _TRAIN_LENGTHS),
    wildcards=(Arg("which", "3 (gates) or 4 (components)", kind="int"),),
    inputs=(Arg("cell", "RECIPE=quality.json", kind="named"),
            Arg("curve", "RECIPE=train_curve.json of its final stage", kind="named")),
    outputs=_table_files("pdf", "csv", "tex"))

MELT_VS_LLA = JobSpec(
    "melt-vs-lla", "MELT beside the teacher's KV methods at MELT's cache budget",
    reads=(_TRAIN_LENGTHS,),
    inputs=(Arg("teacher-cell", "methods/full/1x quality.json"), Arg("melt-cell", "the full recipe's quality.json"),
            Arg("cells", "the compared methods' quality.json", kind="paths", required=False)),
    outputs=_table_files("pdf", "csv", "tex"))

TEACHER_DEPTH = JobSpec(
    "teacher-depth", "the teacher's held-out CE and task scores at each test-time depth (teacher_eval.loop_depths)",
    reads=(_TRAIN_LENGTHS,),
    inputs=(Arg("metrics", "the teacher's quality.json (teacher-eval with loop_depths)"),),
    outputs=_table_files("pdf", "csv", "tex"))

FIG_MEMORY = JobSpec(
    "fig-memory", "memory against generated tokens and bytes against T (PDF, PNG, JSON)",
    reads=(_DPI,),
    inputs=(Arg("memory", "melt-memory JSON"),),
    outputs=(*_table_files("pdf", "png"), Arg("json", "the figure's data and ratios")))


def register(sub) -> None:
    for spec, body in ((TABLE1, _table1), (TABLE8, _table8), (TABLE9, _table9), (TABLE10, _table10), (TABLE14, _table14), (FIG10, _fig10), (TABLE7, _table7), (MELT_TABLE1, _melt_table1),
                       (CHECK_AGREEMENT, _check_agreement),
                       (TABLE5, _table5), (TABLE13, _table13), (FIG8, _fig8), (TABLE4_FIG7, _table4_fig7),
                       (MELT_TABLE, _melt_table), (MELT_VS_LLA, _melt_vs_lla), (FIG_MEMORY, _fig_memory),
                       (TEACHER_DEPTH, _teacher_depth)):
        add_command(sub, spec, body)


def _train_max(job) -> int:
    return max(job.cfg["data"]["tasks"]["passkey"]["train_lengths"])


def _table4_fig7(job) -> None:
    from loopkv.report import exposure, pareto, tables
    from loopkv.utils.atomic import write_json

    def samples_of(quality_path):   # quality.json -> its quality_samples.json beside it
        return read_json(Path(quality_path).with_name("quality_samples.json"), "samples result", {"samples": dict})

    args, bin_tokens, dpi = job.args, job.cfg["on_policy"]["exposure_bin_tokens"], job.cfg["report"]["dpi"]
    off_metrics = [_metrics(p) for p in args.off]
    if args.bench_teacher:
        outcomes, source, shots = _benchmark_outcomes(args, [(m["method"], m["budget"]) for m in off_metrics])
    else:
        if args.bench_off or args.bench_on or args.tokenizer:
            raise LoopKVError("--bench-off / --bench-on / --tokenizer go with --bench-teacher (Table 4 on a benchmark)")
        teacher = exposure.arithmetic_outcomes(read_json(args.teacher_samples, "samples result", {"samples": dict}))
        outcomes = (teacher, [exposure.arithmetic_outcomes(samples_of(p)) for p in args.off],
                    [exposure.arithmetic_outcomes(samples_of(p)) for p in args.on])
        source, shots = exposure.ARITHMETIC, None
    teacher, off_outcomes, on_outcomes = outcomes
    cells = []
    for off, on, off_o, on_o, off_curve, on_curve in zip(off_metrics, args.on, off_outcomes, on_outcomes,
                                                         args.off_curves, args.on_curves, strict=True):
        cells.append({"off": off, "on": _metrics(on), "off_samples": off_o, "on_samples": on_o,
                      "off_curve": read_json(off_curve, "curve", {}), "on_curve": read_json(on_curve, "curve", {})})
    rows = exposure.table_rows(cells, teacher, source)
    title = "LLA Table 4, off- vs on-policy distillation: our measurements (left) beside the paper's (right)"
    with atomic_path(args.table_pdf) as pdf, atomic_path(args.table_csv) as csv_path, atomic_path(args.table_tex) as tex:
        tables.write_all(rows, exposure.table_spec(source), exposure.table_note(rows, shots), title, pdf, csv_path, tex)
    points = pareto.points(cells, teacher, off_metrics[0]["teacher_bytes_per_token"])
    with atomic_path(args.pareto_pdf) as pdf, atomic_path(args.pareto_png) as png:
        pareto.plot(points, pdf, png, dpi, source)
    write_json(args.pareto_json, {"source": source, "points": points})
    teacher_curve = exposure.exposure_curve(teacher, bin_tokens)
    curves = [{"budget": c["off"]["budget"], "teacher": teacher_curve,
               "off": exposure.exposure_curve(c["off_samples"], bin_tokens),
               "on": exposure.exposure_curve(c["on_samples"], bin_tokens)} for c in cells]
    with atomic_path(args.fig_pdf) as pdf, atomic_path(args.fig_png) as png:
        exposure.plot_exposure(curves, bin_tokens, pdf, png, dpi, source)
    write_json(args.fig_json, {"bin_tokens": bin_tokens, "source": source, "curves": curves})


def _benchmark_outcomes(args, served: list[tuple[str, str]]):
    """(teacher, off per budget, on per budget) outcomes, the task id and its shots, from lm-eval results;
    served: each budget's (method, budget), as its method evaluation says."""
    from loopkv.data.tokenizer import load_tokenizer
    from loopkv.report import exposure

    budgets = len(served)
    if len(args.bench_off) != budgets or len(args.bench_on) != budgets or not args.tokenizer:
        raise LoopKVError(f"Table 4 on a benchmark needs --bench-off and --bench-on for each of the {budgets} "
                          f"budgets and --tokenizer (got {len(args.bench_off)}, {len(args.bench_on)})")
    tokenizer = load_tokenizer(args.tokenizer)

    def count(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=False)["input_ids"])

    results = {p: read_json(p, "lm-eval result", {"samples": list, "headline": str, "task_id": str})
               for p in [args.bench_teacher, *args.bench_off, *args.bench_on]}
    tasks = {(r["task_id"], r.get("shots", 0)) for r in results.values()}
    if len(tasks) != 1:
        raise LoopKVError(f"Table 4's lm-eval results are of different tasks or shots: {sorted(tasks)}")
    (source, shots), = tasks
    teacher = exposure.benchmark_outcomes(results[args.bench_teacher], count, args.bench_teacher, None, ("full", "1x"))
    off = [exposure.benchmark_outcomes(results[p], count, p, "off_policy", s) for p, s in zip(args.bench_off, served)]
    on = [exposure.benchmark_outcomes(results[p], count, p, "on_policy", s) for p, s in zip(args.bench_on, served)]
    return (teacher, off, on), source, shots


def _fig8(job) -> None:
    from loopkv.report import fig_passkey, tables
    from loopkv.report.paper_values import TABLE12_BY_MODEL
    from loopkv.utils.atomic import read_jsonl, write_json

    args, reliable, dpi = job.args, job.cfg["passkey_grid"]["reliable"], job.cfg["report"]["dpi"]
    paper_model = job.cfg["report"]["paper_model"]
    paper_grid, paper_source = TABLE12_BY_MODEL[paper_model]
    data = read_jsonl(args.data)
    results = [read_json(p, "lm-eval result", {}) for p in args.results]
    cells = [fig_passkey.grid(data, r) for r in results]
    with atomic_path(args.pdf) as pdf, atomic_path(args.png) as png:
        fig_passkey.plot(results, cells, reliable, pdf, png, dpi, paper_model)
    rows, spec = fig_passkey.table_rows(results, cells, reliable, paper_model)
    note = (f"Exact recall of a {len(data[0]['answer'])}-digit key, pooled over depths "
            f"{cells[0]['depths']} as the paper pools its cells; {rows[0]['n_per_cell']} trials per (method, length) "
            f"cell ({rows[0]['n_per_depth_cell']} per depth); reliable length = longest length up to which every "
            f"pooled cell recalls >= {reliable:g} (the paper's boundary); 'at every depth': every (depth, length) "
            f"cell (stricter). Lengths in tokens of the project tokenizer (the teacher trained on <= its passkey "
            f"train lengths). Budget '{tables.NOT_RUN}': a paper row this configuration does not run. "
            f"Paper: {paper_source}" + (f"; {fig_passkey.paper_2_6b_note()}." if paper_model == "Ouro-1.4B" else "."))
    with atomic_path(args.table_pdf) as pdf, atomic_path(args.table_csv) as csv_path, atomic_path(args.table_tex) as tex:
        tables.write_all(rows, spec, note, f"LLA Table 12 ({paper_model}), passkey recall by length: ours beside the "
                                           f"paper's summary",
                         pdf, csv_path, tex)
    write_json(args.json, {"reliable_bar": reliable,
                           "paper": {"source": paper_source, "model": paper_model,
                                     "lla": {f"{m} {r:g}x": v for (m, r), v in paper_grid.items()}},
                           "methods": [{"method": r["method"], "budget": r["budget"], "ratio": r["setting"]["ratio"],
                                        **c, "pooled_accuracy": fig_passkey.pooled(c),
                                        "reliable_length": fig_passkey.reliable_length(c, reliable),
                                        "reliable_every_depth": fig_passkey.reliable_length(c, reliable, True)}
                                       for r, c in zip(results, cells)]})


def _table7(job) -> None:
    from loopkv.report import table7

    args = job.args
    rows = table7.build_rows([read_json(p, "lm-eval result", {}) for p in args.results])
    title = "LLA Table 7, the broad suite through lm-eval: our measurements (left) beside the paper's (right)"
    _write_table(args, rows, table7.spec(rows), table7.note(rows), title)


def _melt_table1(job) -> None:
    from loopkv.report import melt_table1

    args = job.args
    rows = melt_table1.build_rows([read_json(p, "lm-eval result", BENCHMARK_FIELDS) for p in args.results],
                                  sources=list(args.results))
    _write_table(args, rows, melt_table1.spec(rows), melt_table1.note(rows, melt_table1.teacher_name(job.cfg["model"])),
                 melt_table1.TITLE)


def _check_agreement(job) -> None:
    from loopkv.errors import LoopKVError
    from loopkv.report import agreement

    args = job.args
    if len(args.pairs) % 2:
        raise LoopKVError(f"--pairs takes (quality.json, lm-eval JSON) pairs: got {len(args.pairs)} paths")
    report = agreement.check(list(zip(args.pairs[::2], args.pairs[1::2])))
    if report["disagree"]:
        raise LoopKVError(agreement.disagreements_message(report))
    with atomic_path(args.out) as out:
        Path(out).write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")
    print(f"agreement: {report['agree']} agree, {report['not_comparable']} not comparable")


def _table5(job) -> None:
    _serving_table(job.args, "table5")


def _table13(job) -> None:
    _serving_table(job.args, "table13")


def _serving_table(args, table: str) -> None:
    from loopkv.report import serving_tables

    if table == "table5":
        result = read_json(args.result, "serve-bench result", {})
        rows, spec, note = serving_tables.table5_rows(result), serving_tables.TABLE5, serving_tables.table5_note(result)
        title = "LLA Table 5, serving: bytes per token, capacity and decode speed (ours) beside the paper's"
    else:
        results = [read_json(p, "kernel-bench result", {"rows": list}) for p in args.result]
        rows, spec = [r for res in results for r in serving_tables.table13_rows(res)], serving_tables.TABLE13
        note = serving_tables.table13_note(results)
        title = "LLA Table 13, latent-attention kernel vs the teacher's attention and reconstruct-then-attend"
    _write_table(args, rows, spec, note, title)


def _cells_inputs(job, table: str) -> tuple[list, dict, list, list]:
    """(cells, curves by (method, budget), samples, benchmarks) of a table of method-eval cells."""
    args = job.args
    cells = [_metrics(p) for p in args.cells]
    curves = {}
    for path in args.curves:
        curve = read_json(path, "curve", {"setting": {"method": str, "budget": str}})
        curves[curve["setting"]["method"], curve["setting"]["budget"]] = curve
    samples = [read_json(p, "samples result", {"samples": dict}) for p in args.samples]
    if len(samples) != len(cells):
        raise LoopKVError(f"{table}: {len(cells)} cells but {len(samples)} sample files")
    benchmarks = [read_json(p, "lm-eval result", BENCHMARK_FIELDS) for p in args.benchmarks]
    return cells, curves, samples, benchmarks


def _table8(job) -> None:
    from loopkv.report import rank_sweep

    args, paper_model = job.args, job.cfg["report"]["paper_model"]
    cells, curves, samples, benchmarks = _cells_inputs(job, "table8")
    rows = rank_sweep.build_rows(cells, curves, _train_max(job), samples, benchmarks,
                                 job.cfg["methods"]["table1_benchmarks"], paper_model)
    title = f"LLA Table 8 ({paper_model}), the cold-start rank sweep: our measurements (left) beside the paper's (right)"
    _write_table(args, rows, rank_sweep.spec(rows), rank_sweep.note(rows, paper_model), title)
    with atomic_path(args.fig_pdf) as pdf, atomic_path(args.fig_png) as png:
        rank_sweep.plot(rows, pdf, png, job.cfg["report"]["dpi"], paper_model)


def _table9(job) -> None:
    from loopkv.report import eviction_table

    def samples_of(quality_path):   # quality.json -> its quality_samples.json beside it
        return read_json(Path(quality_path).with_name("quality_samples.json"), "samples result", {"samples": dict})

    args = job.args
    evicted, plain = [_metrics(p) for p in args.evicted], [_metrics(p) for p in args.plain]
    rows = eviction_table.build_rows(evicted, plain, [samples_of(p) for p in args.evicted],
                                     [samples_of(p) for p in args.plain], _train_max(job),
                                     job.cfg["method_eval"]["seq_len"])
    title = "LLA Table 9, token eviction composed with KV methods: our measurements (left) beside the paper's (right)"
    _write_table(args, rows, eviction_table.SPEC, eviction_table.note(rows), title)


def _write_table(args, rows: list[dict], spec, note: str, title: str) -> None:
    """A table's PDF, CSV and LaTeX (args.pdf / csv / tex), each written whole or not at all."""
    from loopkv.report import tables

    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        tables.write_all(rows, spec, note, title, pdf, csv_path, tex)


def _variant_curves(job) -> dict[str, dict]:
    """VARIANT -> its distillation curve (--curve VARIANT=PATH), each checked for what a table reads."""
    return {variant: read_json(path, "curve", {"setting": {"kwargs": dict, "budget": str}, "best": {"kl": float},
                                              "curve": {"heldout": list}, "recipe": dict})
            for variant, path in job.named("curve").items()}


def _table10(job) -> None:
    from loopkv.report import ablations

    args = job.args
    curves = _variant_curves(job)
    rows = ablations.build_rows(curves)
    title = "LLA Table 10, design ablations of the recipe: our held-out KLs (left) beside the paper's (right)"
    _write_table(args, rows, ablations.SPEC, ablations.note(rows), title)
    with atomic_path(args.fig_pdf) as pdf, atomic_path(args.fig_png) as png:
        ablations.plot(rows, curves, pdf, png, job.cfg["report"]["dpi"])


def _table14(job) -> None:
    from loopkv.report import decoupled_table

    args = job.args
    curves = _variant_curves(job)
    rows = decoupled_table.build_rows(curves)
    title = "LLA Table 14, decoupled RoPE beside full-RoPE LLA: our held-out KL / top-1 (left) beside the paper's (right)"
    _write_table(args, rows, decoupled_table.SPEC, decoupled_table.note(rows), title)


def _fig10(job) -> None:
    from loopkv.report import fig_capacity

    result = read_json(job.args.result, "serve-bench result", {"capacity_by_context": list})
    with atomic_path(job.args.pdf) as pdf, atomic_path(job.args.png) as png:
        fig_capacity.plot(result["capacity_by_context"], pdf, png, job.cfg["report"]["dpi"])


def _table1(job) -> None:
    from loopkv.report.table1 import build_rows, write_csv, write_pdf, write_tex

    args = job.args
    cells, curves, samples, benchmarks = _cells_inputs(job, "table1")
    paper_model = job.cfg["report"]["paper_model"]
    rows = build_rows(cells, curves, _train_max(job), samples, benchmarks, job.cfg["methods"]["table1_benchmarks"],
                      paper_model)
    tables = {"Ouro-1.4B": "Table 1", "Ouro-2.6B": "Tables 2 and 11", "Huginn-3.5B": "Table 3"}[paper_model]
    title = f"LLA {tables} ({paper_model}) at equal cache budgets: our measurements (left) beside the paper's (right)"
    with atomic_path(args.pdf) as pdf, atomic_path(args.csv) as csv_path, atomic_path(args.tex) as tex:
        write_pdf(rows, pdf, title, paper_model)
        write_csv(rows, csv_path, paper_model)
        write_tex(rows, tex, paper_model)


# what Table 1 reads of a merged lm-eval result
BENCHMARK_FIELDS = {"task": str, "method": str, "budget": str, "headline": str, "metrics": dict, "samples": list,
                    "n": int}


def _teacher_depth(job) -> None:
    from loopkv.report import teacher_depth

    args = job.args
    metrics = _metrics(args.metrics)
    rows = teacher_depth.build_rows(metrics, _train_max(job), f"teacher-eval result {args.metrics}")
    family = metrics.get("model_type")
    title = "The teacher at each test-time depth: held-out CE and task scores by the number of loops it runs"
    _write_table(args, rows, teacher_depth.SPEC, teacher_depth.note(rows, family), title)


def _metrics(path) -> dict:
    return read_json(path, "result", {"metrics": dict})["metrics"]


def _melt_table(job) -> None:
    from loopkv.report import melt_tables

    args, recipes = job.args, dict(job.cfg["melt_table"])
    if args.which not in (3, 4):
        raise LoopKVError(f"melt-table --which is MELT's Table 3 or 4, got {args.which}")
    metrics = {name: _metrics(path) for name, path in args.cell}
    curves = {name: read_json(path, "curve", {}) for name, path in args.curve}
    spec = melt_tables.TABLE3 if args.which == 3 else melt_tables.TABLE4
    rows = melt_tables.recipe_rows(args.which, recipes, metrics, curves, _train_max(job))
    what = "state-update (gate) variants" if args.which == 3 else "recipe components"
    title = f"MELT Table {args.which}, {what}: our measurements (left) beside the paper's (right)"
    _write_table(args, rows, spec, melt_tables.recipe_note(rows), title)


def _melt_vs_lla(job) -> None:
    from loopkv.report import melt_tables

    args = job.args
    rows = melt_tables.versus_rows(_metrics(args.teacher_cell), _metrics(args.melt_cell),
                                   [_metrics(p) for p in args.cells], _train_max(job))
    title = "MELT vs the teacher's KV methods at MELT's cache budget (same teacher, tasks and decoder)"
    _write_table(args, rows, melt_tables.VERSUS, melt_tables.versus_note(rows), title)


def _fig_memory(job) -> None:
    from loopkv.report.fig_memory import plot_memory, summary
    from loopkv.report.paper_values import MELT_MEMORY
    from loopkv.utils.atomic import write_json

    args = job.args
    memory = read_json(args.memory, "melt-memory result", {"curves": (dict, list), "bytes_over_loops": (dict, list),
                                                           "provenance": dict})
    with atomic_path(args.pdf) as pdf, atomic_path(args.png) as png:
        plot_memory(memory, MELT_MEMORY, pdf, png, job.cfg["report"]["dpi"])
    write_json(args.json, {"summary": summary(memory), "curves": memory["curves"],
                           "bytes_over_loops": memory["bytes_over_loops"], "paper": MELT_MEMORY,
                           "provenance": memory["provenance"]})
