"""LLA Table 1 from our runs: every method at equal cache budgets, measured columns first, the
paper's reported columns beside them (never merged), n for every measured cell.

The paper's GSM8K / MC-avg / MMLU columns come from lm-eval runs of every cell (the teacher and the
baselines too) when the config names those benchmarks (methods.table1_benchmarks); the synthetic
stand-ins are always measured beside them: arithmetic-chain exact match for GSM8K, cloze multiple
choice for MC-avg (MMLU has none). KL has two protocols: "two-pass" is the paper's teacher-forced
re-forward on validation windows (codec methods: the distillation's best checkpoint), "streamed" is
token-by-token decoding through the method's own cache on test windows.
"""
from __future__ import annotations

from loopkv.errors import LoopKVError
from loopkv.report import tables
from loopkv.report.paper_values import (FINAL_LOOP_RECONSTRUCTION_ERROR, OURO_2_6B_TEACHER_GSM8K, TABLE1_BY_MODEL,
                                        TABLE1_N)

STAND_IN_COLUMNS = [
    ("method", "method"), ("budget", "budget"), ("ratio", "ratio\nsetting"), ("bytes_per_token", "B/token"),
    ("bytes_ratio", "ratio\nbytes"),
    ("trained", "trained"), ("kl_svd_only", "KL 2-pass\nSVD init"), ("kl_two_pass", "KL 2-pass\ndistilled"),
    ("kl_streamed", "KL\nstreamed"), ("top1_streamed", "top-1\nstreamed"), ("arith_em", "arith EM"),
    ("arith_em_vs_teacher", "arith EM\n- teacher"),
    ("cloze_acc", "cloze acc"), ("passkey_in", "passkey\n<= train len"), ("passkey_out", "passkey\n> train len"),
]
# the real benchmarks' columns (lm-eval), present when the config names their tasks
BENCHMARK_COLUMNS = [("gsm8k", "GSM8K EM\nlm-eval"), ("gsm8k_vs_teacher", "GSM8K EM\n- teacher"),
                     ("mc_avg", "MC-avg\nlm-eval"), ("mc_avg_vs_teacher", "MC-avg\n- teacher"),
                     ("mmlu", "MMLU\nlm-eval"), ("mmlu_vs_teacher", "MMLU\n- teacher")]
# the paper's columns beside ours, by paper model: LLA Tables 1 / 2 and 11 (Ouro), Table 3 (Huginn)
OURO_PAPER_COLUMNS = [("paper_kl", "paper\nKL"), ("paper_gsm8k", "paper\nGSM8K"), ("paper_mc_avg", "paper\nMC-avg"),
                      ("paper_mmlu", "paper\nMMLU")]
PAPER_COLUMNS = {"Ouro-1.4B": OURO_PAPER_COLUMNS, "Ouro-2.6B": OURO_PAPER_COLUMNS,
                 "Huginn-3.5B": [("paper_kl_svd", "paper KL\nSVD init"), ("paper_top1_svd", "paper top-1\nSVD init"),
                                 ("paper_kl", "paper KL\ndistilled"), ("paper_top1", "paper top-1\nbest"),
                                 ("paper_mc_avg", "paper\nMC-avg")]}
# Table 3 reports the two-pass top-1 agreement too (the codec's held-out measurement at its SVD init and
# at the kept checkpoint): shown beside the two-pass KLs there, in every CSV
TOP1_COLUMNS = [("top1_svd_only", "top-1 2-pass\nSVD init"), ("top1_two_pass", "top-1 2-pass\ndistilled")]
BENCHMARK_N = {"gsm8k": "n_gsm8k", "mmlu": "n_mmlu"}   # Wilson intervals; the other two carry their own


def table_spec(rows: list[dict], paper_model: str = "Ouro-1.4B") -> tables.TableSpec:
    """The stand-in columns always; each benchmark column when some row has it (it was configured);
    the paper model's columns beside."""
    present = [c for c in BENCHMARK_COLUMNS if any(c[0] in r for r in rows)]
    huginn = paper_model.startswith("Huginn")
    at = STAND_IN_COLUMNS.index(("kl_two_pass", "KL 2-pass\ndistilled")) + 1
    measured = STAND_IN_COLUMNS[:at] + TOP1_COLUMNS + STAND_IN_COLUMNS[at:] if huginn else STAND_IN_COLUMNS
    return tables.TableSpec(
        columns=measured + present + PAPER_COLUMNS[paper_model],
        csv_extra=tables.N_FIELDS + ["n_gsm8k", "shots_gsm8k", "n_mc", "mc_tasks", "n_mmlu",
                                     "cache_dtype", "compute_dtype", "read_path", "read_path_bytes_per_token"]
                  + ([] if huginn else [c[0] for c in TOP1_COLUMNS]),
        group_key="budget", proportions={**tables.QUALITY_PROPORTIONS, **BENCHMARK_N},
        width=19.0 + 1.2 * len(present) + 2.4 * huginn,
        own_intervals=("arith_em_vs_teacher", "gsm8k_vs_teacher", "mc_avg", "mc_avg_vs_teacher", "mmlu_vs_teacher"))


SPEC = table_spec([])   # the table without benchmark columns (the embedded default's)

RESAMPLES = 10000   # stratified paired bootstrap of MC-avg's difference to the teacher, per task


def versus_teacher(samples: dict, teacher: dict):
    """A cell's arithmetic exact match minus the teacher's on the same items (joined by id), with a
    paired interval (Tango's, from the items the two answer differently): item difficulty is shared, so
    the interval is far narrower than two independent ones."""
    from loopkv.stats.intervals import paired_proportion_difference

    mine = {s["id"]: float(s["correct"]) for s in samples["samples"]["arithmetic"]}
    ref = {s["id"]: float(s["correct"]) for s in teacher["samples"]["arithmetic"]}
    if set(mine) != set(ref):
        raise LoopKVError(f"arithmetic samples: {len(set(mine) ^ set(ref))} items differ from the teacher's "
                          f"(not the same test set)")
    ids = sorted(ref)
    return paired_proportion_difference([mine[i] for i in ids], [ref[i] for i in ids], tables.LEVEL)


def _per_doc(result: dict) -> dict[int, float]:
    """A merged lm-eval result's headline metric per document."""
    metric = result["headline"]
    return {int(r["doc_id"]): float(r[metric]) for r in result["samples"]}


def _paired_outcomes(mine: dict, teacher: dict) -> tuple[list[float], list[float]]:
    """A method's and the teacher's headline per document, over the same documents in one order."""
    a, b = _per_doc(mine), _per_doc(teacher)
    if set(a) != set(b):
        raise LoopKVError(f"{mine['task']} of {mine['method']} {mine['budget']}: {len(set(a) ^ set(b))} documents "
                          f"differ from the teacher's (not the same selection)")
    ids = sorted(b)
    return [a[i] for i in ids], [b[i] for i in ids]


def benchmark_fields(results: dict[str, dict], teacher: dict[str, dict], chosen: dict, seed: int,
                     is_teacher: bool) -> dict:
    """A cell's real-benchmark columns from its merged lm-eval results (task name -> result) and the
    teacher's; chosen: methods.table1_benchmarks. Each column is the mean of its tasks' accuracies
    (one task for GSM8K and MMLU: Wilson intervals), and minus the teacher's on the same documents,
    paired: Tango's interval for one task's right/wrong documents (GSM8K, MMLU), a stratified paired
    bootstrap (resampled per task) for MC-avg's mean over tasks."""
    from loopkv.stats.intervals import mean_of_group_means, paired_proportion_difference

    fields = {}
    for column in ("gsm8k", "mc_avg", "mmlu"):
        tasks = chosen[column] if column == "mc_avg" else [chosen[column]] if chosen[column] else []
        if not tasks:
            continue
        if column == "mc_avg":
            e = mean_of_group_means([list(_per_doc(results[t]).values()) for t in tasks], tables.LEVEL, RESAMPLES, seed)
            fields.update(mc_avg=e.value, mc_avg_lo=e.lo, mc_avg_hi=e.hi, n_mc=e.n, mc_tasks=" ".join(tasks))
        else:
            r = results[tasks[0]]
            fields.update({column: r["metrics"][r["headline"]], f"n_{column}": r["n"]})
            if column == "gsm8k":
                fields["shots_gsm8k"] = r.get("shots", 0)
        if not is_teacher:
            pairs = [_paired_outcomes(results[t], teacher[t]) for t in tasks]
            if column == "mc_avg":
                d = mean_of_group_means([[x - y for x, y in zip(*pair)] for pair in pairs], tables.LEVEL,
                                        RESAMPLES, seed)
            else:
                d = paired_proportion_difference(*pairs[0], tables.LEVEL)
            fields.update({f"{column}_vs_teacher": d.value, f"{column}_vs_teacher_lo": d.lo,
                           f"{column}_vs_teacher_hi": d.hi})
    return fields


def index_benchmarks(results: list[dict], cells: list[dict], chosen: dict) -> list[dict[str, dict]]:
    """Per cell (in the cells' order), task name -> its merged lm-eval result; every configured task of
    every cell must be there exactly once."""
    wanted = [t for t in (chosen["gsm8k"], *chosen["mc_avg"], chosen["mmlu"]) if t]
    found: dict[tuple[str, str, str], dict] = {}
    for r in results:
        key = (r["method"], r["budget"], r["task"].removeprefix("loopkv_"))
        bad = [row for row in r["samples"] if not isinstance(row, dict) or not isinstance(row.get("doc_id"), int)
               or not isinstance(row.get(r["headline"]), (int, float)) or isinstance(row.get(r["headline"]), bool)]
        if bad or len(r["samples"]) != r["n"]:
            raise LoopKVError(f"lm-eval result of {key[2]} for {key[0]} {key[1]}: its samples must be {r['n']} "
                              f"documents, each with an integer doc_id and a number {r['headline']!r}")
        if r.get("samples_per_doc", 1) != 1:
            raise LoopKVError(f"lm-eval result of {key[2]} for {key[0]} {key[1]}: a sampled run "
                              f"({r['samples_per_doc']} samples a document); Table 1 reads greedy runs")
        if key[2] in (chosen["gsm8k"], chosen["mmlu"]) and any(row[r["headline"]] not in (0, 1) for row in r["samples"]):
            raise LoopKVError(f"lm-eval result of {key[2]} for {key[0]} {key[1]}: {r['headline']!r} must be right (1) "
                              f"or wrong (0) per document (its paired interval is of proportions)")
        if key in found:
            raise LoopKVError(f"two lm-eval results of {key[2]} for {key[0]} {key[1]}")
        found[key] = r
    out = []
    for m in cells:
        missing = [t for t in wanted if (m["method"], m["budget"], t) not in found]
        if missing:
            raise LoopKVError(f"table1: no lm-eval result of {', '.join(missing)} for {m['method']} {m['budget']} "
                              f"(methods.table1_benchmarks names it for every Table 1 cell)")
        out.append({t: found[m["method"], m["budget"], t] for t in wanted})
    return out


NO_BENCHMARKS = {"gsm8k": None, "mc_avg": [], "mmlu": None}


def build_rows(cells: list[dict], curves: dict[tuple[str, str], dict], passkey_train_max: int,
               samples: list[dict] | None = None, benchmarks: list[dict] | None = None,
               chosen: dict | None = None, paper_model: str = "Ouro-1.4B",
               paper: tuple[dict, list[tuple[str, str]]] | None = None) -> list[dict]:
    """cells: method-eval `metrics` dicts in table order, the teacher's first; curves: (method, budget)
    -> distill curve; samples: each cell's per-item samples (quality_samples.json), in the same order;
    benchmarks: merged lm-eval results of the tasks `chosen` (methods.table1_benchmarks) names, for
    every cell; paper_model: whose paper grid stands beside (report.paper_model); paper: another paper
    table's (grid, columns) instead of Table 1's (Table 8's: report/rank_sweep.py)."""
    chosen = chosen or NO_BENCHMARKS
    grid, columns = paper or (TABLE1_BY_MODEL[paper_model][0], PAPER_COLUMNS[paper_model])
    paper_keys = [name.removeprefix("paper_") for name, _ in columns]
    per_cell = index_benchmarks(benchmarks or [], cells, chosen)
    rows = []
    for i, m in enumerate(cells):
        curve = curves.get((m["method"], m["budget"]))
        paper = grid.get(tables.ratio_key(m["method"], m["setting"]["ratio"], grid), {})
        rows.append({
            "method": m["method"], "budget": m["budget"], "ratio": m["setting"]["ratio"],
            "trained": curve is not None,
            "kl_svd_only": curve["curve"]["heldout"][0]["kl"] if curve else None,
            "kl_two_pass": curve["best"]["kl"] if curve else None,
            "top1_svd_only": curve["curve"]["heldout"][0].get("top1") if curve else None,
            "top1_two_pass": curve["best"].get("top1") if curve else None,
            **tables.quality_fields(m, passkey_train_max),
            **benchmark_fields(per_cell[i], per_cell[0], chosen, seed=i, is_teacher=i == 0),
            **{f"paper_{k}": paper.get(k) for k in paper_keys},
            "read_path": m["read_path"],
            "read_path_bytes_per_token": m.get("read_path_bytes_per_token", m["bytes_per_token"]),
        })
        if samples and i > 0:
            d = versus_teacher(samples[i], samples[0])
            rows[-1].update(arith_em_vs_teacher=d.value, arith_em_vs_teacher_lo=d.lo, arith_em_vs_teacher_hi=d.hi)
    run = {tables.ratio_key(r["method"], r["ratio"], grid) for r in rows}
    return rows + tables.not_run_rows(grid, run, lambda key, paper: {
        "method": key[0], "budget": tables.NOT_RUN, "ratio": key[1],
        **{f"paper_{k}": paper.get(k) for k in paper_keys}})


def _benchmark_note(rows: list[dict]) -> str:
    run = [r for r in rows if r["budget"] != tables.NOT_RUN]
    parts = []
    if any("gsm8k" in r for r in run):
        n, shots = sorted({r["n_gsm8k"] for r in run}), sorted({r["shots_gsm8k"] for r in run})
        parts.append(f"GSM8K: strict exact match on {n[0] if len(n) == 1 else n} problems, "
                     f"{shots[0] if len(shots) == 1 else shots}-shot, greedy")
    if any("mc_avg" in r for r in run):
        parts.append(f"MC-avg: the mean of {run[0]['mc_tasks']} accuracies ({run[0]['n_mc']} items in all), each "
                     f"task counting once, stratified bootstrap")
    if any("mmlu" in r for r in run):
        parts.append(f"MMLU: {run[0]['n_mmlu']} questions, 0-shot")
    if not parts:
        return ("GSM8K / MC-avg / MMLU not run here (methods.table1_benchmarks): the arithmetic chains and cloze MC "
                "stand in for GSM8K and MC-avg; MMLU has no stand-in. ")
    return ("Through lm-eval (model 'loopkv', each method's own cache), every cell on the same documents: "
            + "; ".join(parts) + "; '- teacher': paired over the same documents (MC-avg resampled per task). The arithmetic "
            "and cloze columns are the synthetic stand-ins, measured beside. ")


def footnote(rows: list[dict], paper_model: str = "Ouro-1.4B") -> str:
    first = rows[0]
    paths = sorted({r["read_path"] for r in rows if r.get("read_path")})
    _, source = TABLE1_BY_MODEL[paper_model]
    if paper_model == "Ouro-1.4B":
        n = TABLE1_N["gsm8k"]
        paper = (f"Paper: {source}; GSM8K n = {n['teacher']} (teacher) / {n['methods']} (others); the KLs at 21.33x "
                 f"are from its text, as is final-loop reuse's K / V relative reconstruction error "
                 f"{FINAL_LOOP_RECONSTRUCTION_ERROR['k']:.2f} / {FINAL_LOOP_RECONSTRUCTION_ERROR['v']:.2f}. ")
    elif paper_model.startswith("Huginn"):
        paper = (f"Paper: {source}; at 16x and 32x it distils nothing (no distilled KL; its best top-1 is the SVD "
                 f"codec's); MC-avg is its multiple-choice suite, ours lm-eval's MC tasks where configured (MC-avg column) and the "
                 f"cloze stand-in always. ")
    else:
        paper = f"Paper: {source}; its teacher's GSM8K is given only as {OURO_2_6B_TEACHER_GSM8K}. "
    return (f"Ratios and B/token against a {first['cache_dtype']} teacher cache (ours computed in "
            f"{first['compute_dtype']}); B/token is each method's capacity path (LLA: latents only); "
            f"LLA / LLA-2D quality measured on the {'/'.join(paths) or 'latent'} read path (same decoded values). "
            f"{tables.n_summary(rows)}. " + _benchmark_note(rows) +
            "Intervals: 95%, Wilson for accuracies; for the differences to the teacher, paired over the same items: "
            "Tango's score interval (from the items the two answer differently), MC-avg's a stratified bootstrap. " + paper +
            f"Budget '{tables.NOT_RUN}': a paper row this configuration does not run.")


def write_csv(rows: list[dict], path, paper_model: str = "Ouro-1.4B") -> None:
    tables.write_csv(rows, table_spec(rows, paper_model), path)


def write_tex(rows: list[dict], path, paper_model: str = "Ouro-1.4B") -> None:
    tables.write_tex(rows, table_spec(rows, paper_model), footnote(rows, paper_model), path)


def write_pdf(rows: list[dict], path, title: str, paper_model: str = "Ouro-1.4B") -> None:
    tables.write_pdf(rows, table_spec(rows, paper_model), footnote(rows, paper_model), title, path)
