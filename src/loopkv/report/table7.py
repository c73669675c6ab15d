"""LLA Table 7 (the broad suite) from our lm-eval runs: one row per served (method, budget), our
measured columns first (every real benchmark and the synthetic tasks through the same lm-eval path),
the paper's beside them. MMLU stands where the paper has MMLU-Pro (no offline data). BBH two ways
(data/bigbench.py): its BIG-bench source tasks' multiple choice by log-likelihood (bbh), and BBH's own
protocol, the paper's, 3-shot generated exact match on the subtasks the sdist holds (bbh_gen, the
column that matches the paper's BBH).

A benchmark run a second way (an lm_eval.tasks entry with a `variant`, e.g. sampled beside greedy)
gets a column of its own, keyed by its task id (`math500-sampled`) and labelled with its decoding; a
sampled column is pass@1 (each document's share of correct samples, averaged over documents) with a
percentile bootstrap interval over documents, a greedy one an accuracy with its Wilson interval.
"""
from __future__ import annotations

from loopkv.data.benchmarks import MC_SUITE
from loopkv.data.local_benchmarks import LOCAL_BENCHMARKS
from loopkv.errors import LoopKVError
from loopkv.report import tables
from loopkv.report.paper_values import TABLE7, TABLE7_SOURCE

MEASURED = [("gsm8k", "GSM8K EM\nstrict"), ("gsm8k_flexible", "GSM8K EM\nflexible"),
            ("gsm8k_no_answer", "GSM8K\nno answer"), ("math500", "MATH-500 EM\nmath-verify"),
            ("math500_sympy", "MATH-500 EM\nsympy"), ("math500_no_answer", "MATH-500\nno answer"), ("humaneval", "HumanEval\npass@1"),
            ("mbpp", "MBPP\npass@1"), ("bbh", "BBH src MC\nacc"), ("bbh_gen", "BBH 3-shot\nEM"),   # bbh_gen: the paper's
            ("mmlu", "MMLU\nacc"), ("mc_avg", "MC-avg\nacc"),
            ("arithmetic", "arith\nEM"), ("passkey", "passkey"), ("cloze", "cloze\nacc")]
PAPER = [("paper_gsm8k", "paper\nGSM8K"), ("paper_humaneval", "paper HumanEval\n(EvalPlus base)"),
         ("paper_mbpp", "paper MBPP\n(EvalPlus base)"),
         ("paper_math500", "paper\nMATH-500"), ("paper_bbh", "paper\nBBH"), ("paper_mmlu_pro", "paper\nMMLU-Pro")]
# a task's further metrics beside its headline: metric -> column suffix
SECOND_METRICS = {"gsm8k": {"exact_match_flexible": "flexible", "no_answer": "no_answer"},
                  "math500": {"exact_match_sympy": "sympy", "no_answer": "no_answer"}}
# a further metric's column -> its task (a task's own name may hold underscores: bbh_gen)
OF_TASK = {f"{task}_{suffix}": task for task, metrics in SECOND_METRICS.items() for suffix in metrics.values()}
TASKS = [k for k, _ in MEASURED if k not in OF_TASK and k != "mc_avg"] + list(MC_SUITE)
# how a variant column names its benchmark and its headline metric
BENCH_LABELS = {"gsm8k": "GSM8K", "math500": "MATH-500", "humaneval": "HumanEval", "mbpp": "MBPP", "bbh": "BBH src MC",
                "bbh_gen": "BBH 3-shot", "mmlu": "MMLU", "arithmetic": "arith", "passkey": "passkey", "cloze": "cloze",
                "arc_easy": "ARC-E", "arc_challenge": "ARC-C", "hellaswag": "HellaSwag", "piqa": "PIQA", "winogrande": "WinoGrande",
                "boolq": "BoolQ"}
METRIC_LABELS = {"exact_match": "EM", "acc": "acc", "accuracy": "acc", "pass@1": "pass@1"}
# Benchmarks read from your files (data.local_benchmarks): a column each when the results hold them,
# HumanEval+ / MBPP+ two beside MBPP's (pass@1 on the base inputs; plus = the base and plus inputs).
BENCH_LABELS.update({name: b.title for name, b in LOCAL_BENCHMARKS.items()})
EVALPLUS = [name for name, b in LOCAL_BENCHMARKS.items() if b.format == "evalplus"]
SECOND_METRICS.update({name: {"pass@1_plus": "plus", "reference_failed": "reference_failed"} for name in EVALPLUS})

SPEC = tables.TableSpec(
    columns=[("method", "method"), ("budget", "budget"), ("ratio", "ratio"), *MEASURED, *PAPER],
    csv_extra=[f"n_{t}" for t in TASKS] + [f"shots_{t}" for t in TASKS] + [t for t in MC_SUITE] + ["mc_tasks"], width=22.4,
    # each task's headline is a proportion of its documents (greedy pass@1 included); MC-avg is a mean of tasks
    proportions={k: f"n_{OF_TASK.get(k, k)}" for k, _ in MEASURED if k != "mc_avg"})


def build_rows(results: list[dict]) -> list[dict]:
    """results: merged lm-eval-merge JSONs (any order); one row per (method, budget) in first-seen order."""
    by_model: dict[tuple[str, str], dict] = {}
    for r in results:
        row = by_model.setdefault((r["method"], r["budget"]), {
            "method": r["method"], "budget": r["budget"], "ratio": r["setting"]["ratio"]})
        data = r["task"].removeprefix("loopkv_")
        if r.get("variant"):
            _variant_cell(row, r, data)
            continue
        row[data] = r["metrics"][r["headline"]]
        row[f"n_{data}"] = r["n"]
        row[f"shots_{data}"] = r.get("shots", 0)
        for metric, suffix in SECOND_METRICS.get(data, {}).items():
            row[f"{data}_{suffix}"] = r["metrics"].get(metric)
    for row in by_model.values():
        present = [t for t in MC_SUITE if t in row]
        row["mc_avg"] = sum(row[t] for t in present) / len(present) if present else None
        row["mc_tasks"] = " ".join(present)
        paper = TABLE7.get((row["method"], round(row["ratio"], 2)), {})
        row.update({f"paper_{k}": v for k, v in paper.items()})
    rows = list(by_model.values())
    run = {tables.ratio_key(r["method"], r["ratio"]) for r in rows}
    return rows + tables.not_run_rows(TABLE7, run, lambda key, paper: {
        "method": key[0], "budget": tables.NOT_RUN, "ratio": key[1], **{f"paper_{k}": v for k, v in paper.items()}})


def _variant_cell(row: dict, r: dict, data: str) -> None:
    """A variant's cell (its own column, keyed by task id): the headline, n, shots, samples per
    document, decoding, and for a sampled run pass@1's bootstrap interval over documents."""
    from loopkv.eval.lm_tasks import task_id

    tid = r.get("task_id") or task_id(data, r["variant"])
    decoding = r.get("decoding") or {"strategy": "greedy"}
    row[tid] = r["metrics"][r["headline"]]
    row.update({f"n_{tid}": r["n"], f"shots_{tid}": r.get("shots", 0), f"samples_{tid}": r.get("samples_per_doc", 1),
                f"decoding_{tid}": decoding_text(decoding), f"headline_{tid}": r["headline"]})
    if decoding["strategy"] == "sampling":
        est = pass_at_1(r, f"{tid} of {r['method']}/{r['budget']}")
        row[f"{tid}_lo"], row[f"{tid}_hi"] = est.lo, est.hi


def pass_at_1(r: dict, what: str):
    """A sampled result's pass@1 (each document's share of correct samples, averaged over documents)
    with its percentile bootstrap interval over documents, checked against the headline of its metrics."""
    from loopkv.stats.intervals import pass_at_k_interval

    counts = [sum(s["per_sample"][r["headline"]]) for s in r["samples"]]
    est = pass_at_k_interval([len(s["outputs"]) for s in r["samples"]], [round(c) for c in counts], 1,
                             level=tables.LEVEL)
    reported = r["metrics"][r["headline"]]
    if abs(est.value - reported) > 1e-9:
        raise LoopKVError(f"{what}: pass@1 {est.value} from its samples, {reported} in its metrics")
    return est


def decoding_text(decoding: dict) -> str:
    """`T=1.0 p=0.7 n=4` for sampling; the strategy's name otherwise."""
    if decoding["strategy"] != "sampling":
        return decoding["strategy"]
    return f"T={_short(decoding['temperature'])} p={_short(decoding['top_p'])} n={decoding['samples']}"


def _short(x: float) -> str:
    return f"{x:.1f}" if round(x, 1) == x else f"{x:g}"


def variant_ids(rows: list[dict]) -> list[str]:
    """The variant columns' task ids, in first-seen order."""
    return list(dict.fromkeys(k.removeprefix("decoding_") for row in rows for k in row if k.startswith("decoding_")))


def local_ids(rows: list[dict]) -> list[str]:
    """The benchmarks read from your files that `rows` hold, in LOCAL_BENCHMARKS order."""
    return [name for name in LOCAL_BENCHMARKS if any(name in r for r in rows)]


def _local_columns(rows: list[dict]) -> tuple[list, list, list[str], dict]:
    """(the EvalPlus columns, the other local benchmarks' columns, their CSV fields, their proportions)."""
    plus, others, extra, proportions = [], [], [], {}
    for name in local_ids(rows):
        b = LOCAL_BENCHMARKS[name]
        if b.format == "evalplus":
            plus += [(name, f"{b.title}\npass@1 base"), (f"{name}_plus", f"{b.title}\npass@1 plus")]
            proportions |= {name: f"n_{name}", f"{name}_plus": f"n_{name}"}
            extra.append(f"{name}_reference_failed")
        else:
            others.append((name, f"{b.title}\n{'EM math-verify' if b.format == 'math_answer' else 'acc'}"))
            proportions[name] = f"n_{name}"
        extra += [f"n_{name}", f"shots_{name}"]
    return plus, others, extra, proportions


def spec(rows: list[dict]) -> tables.TableSpec:
    """SPEC with a column for every benchmark read from your files (EvalPlus's beside MBPP, the others
    after the synthetic tasks) and every variant in `rows` (before the paper's columns)."""
    from loopkv.eval.lm_tasks import split_task_id

    ids = variant_ids(rows)
    plus, others, local_extra, local_proportions = _local_columns(rows)
    if not ids and not plus and not others:
        return SPEC
    first = {tid: next(r for r in rows if f"decoding_{tid}" in r) for tid in ids}
    sampled = [tid for tid in ids if first[tid][f"decoding_{tid}"].startswith("T=")]
    columns = []
    for tid in ids:
        data, variant = split_task_id(tid)
        metric = "pass@1" if tid in sampled else METRIC_LABELS.get(first[tid][f"headline_{tid}"],
                                                                     first[tid][f"headline_{tid}"])
        how = first[tid][f"decoding_{tid}"]
        # "GSM8K pass@1 / T=1.0 p=0.7 / n=4": three short lines fit a column
        how = how.replace(" n=", "\nn=") if tid in sampled else f"{variant}: {how}"
        columns.append((tid, f"{BENCH_LABELS.get(data, data)} {metric}\n{how}"))
    measured = len(SPEC.columns) - len(PAPER)
    after_mbpp = SPEC.keys.index("mbpp") + 1
    return tables.TableSpec(
        columns=(SPEC.columns[:after_mbpp] + plus + SPEC.columns[after_mbpp:measured] + others + columns
                 + SPEC.columns[measured:]),
        csv_extra=(SPEC.csv_extra + local_extra
                   + [f"{f}_{tid}" for tid in ids for f in ("n", "shots", "samples", "decoding")]),
        width=SPEC.width + 1.4 * (len(ids) + len(plus) + len(others)),
        proportions={**SPEC.proportions, **local_proportions, **{tid: f"n_{tid}" for tid in ids if tid not in sampled}},
        own_intervals=(*SPEC.own_intervals, *sampled))


def note(rows: list[dict]) -> str:
    n = {t: sorted({r[f"n_{t}"] for r in rows if f"n_{t}" in r}) for t in TASKS + local_ids(rows)}
    run = [r for r in rows if r["budget"] != tables.NOT_RUN]
    sizes = ", ".join(f"{t} {v[0] if len(v) == 1 else v}" for t, v in n.items() if v)
    shots = {t: sorted({r[f"shots_{t}"] for r in rows if f"shots_{t}" in r}) for t in TASKS}
    shown = ", ".join(f"{t} {v[0] if len(v) == 1 else v}-shot" for t, v in shots.items() if v and v != [0])
    variants = [(tid, next(r[f"decoding_{tid}"] for r in rows if f"decoding_{tid}" in r),
                 sorted({r[f"shots_{tid}"] for r in rows if f"shots_{tid}" in r})) for tid in variant_ids(rows)]
    sampled = [f"{tid} ({how}: nucleus sampling at temperature T, top-p p, n samples a document; "
               f"{shot[0] if len(shot) == 1 else shot}-shot)" for tid, how, shot in variants if how.startswith("T=")]
    greedy = [f"{tid} ({how}, {shot[0] if len(shot) == 1 else shot}-shot)"
              for tid, how, shot in variants if not how.startswith("T=")]
    beside = _local_note(rows)
    if variants:
        v_sizes = ", ".join(f"{tid} {sorted({r[f'n_{tid}'] for r in rows if f'n_{tid}' in r})}" for tid, *_ in variants)
        beside += (f" Beside them, benchmarks run another way: {', '.join(sampled + greedy)}; documents per cell: {v_sizes}"
                  + ("; a sampled column is pass@1, each document's share of correct samples averaged over documents, "
                     "its interval a percentile bootstrap over documents (10,000 resamples), every method drawing "
                     "the same random numbers for a document" if sampled else "") + ".")
    return (f"Every cell through lm-eval with model 'loopkv' (the method's own cache, greedy decoding, "
            f"{shown + ', the rest ' if shown else ''}0-shot; shots are other items of the same set, never the item); "
            f"documents per cell: {sizes}. MC-avg = mean accuracy over {run[0]['mc_tasks'] or 'none'}. "
            f"MMLU in place of the paper's MMLU-Pro (no offline data). BBH src MC = 18 BIG-bench source tasks' multiple "
            f"choice (log-likelihood), not the paper's protocol; BBH 3-shot EM = BBH's generated exact match, the "
            f"paper's protocol and the column to set beside its BBH, on 24 of BBH's 27 subtasks (the BIG-bench sdist "
            f"lacks the three programmatic ones), its worked examples from the item's own subtask, answer-only (BBH's "
            f"chain-of-thought shots are not in the data); the paper's HumanEval / MBPP are EvalPlus pass@1 on the base tests. GSM8K strict = the number after '#### ', flexible = the last number; MATH-500 by math-verify (headline) and by our sympy checker beside it. Budget '{tables.NOT_RUN}': a paper row this configuration does not run. A tiny model trained on "
            f"Shakespeare and synthetic tasks: real-benchmark scores near chance are expected.{beside} Paper: {TABLE7_SOURCE}.")


def _local_note(rows: list[dict]) -> str:
    """What the columns of the benchmarks read from your files measure (empty when there are none)."""
    names = local_ids(rows) + [tid for tid in variant_ids(rows) if tid.split("-")[0] in LOCAL_BENCHMARKS]
    if not names:
        return ""
    text = " Read from your files (data.local_benchmarks; each file's sha256 in its data job's manifest):"
    kinds = {LOCAL_BENCHMARKS[t.split("-")[0]].format for t in names}
    parts = []
    if "evalplus" in kinds:
        parts.append(" HumanEval+ / MBPP+ are EvalPlus's files, the model completing the prompt (direct "
                     "completion), scored by differential testing in the sandbox: pass@1 base = the completion's "
                     "output equals the canonical solution's on every base input (the paper's HumanEval / MBPP "
                     "columns), pass@1 plus = on every base and plus input (floats within the row's atol); "
                     "deviations from EvalPlus: one wall clock per run instead of per-input limits, MBPP+ "
                     "inputs called as JSON lists (EvalPlus turns some into tuples or sets) and without its "
                     "MBPP+-specific oracles; a row whose canonical solution fails is scored 0 and counted in "
                     "the CSV's *_reference_failed.")
    if "math_answer" in kinds:
        parts.append(" MELT Table 1's math benchmarks are prompted like MATH-500 (zero-shot) and scored by "
                     "math-verify on the last boxed answer (HLE's own grader is a model).")
    if "multiple_choice" in kinds:
        parts.append(" GPQA / MMLU-Redux are scored by the log-likelihood of the answer letter (MELT generates "
                     "its answers).")
    return text + "".join(parts)
