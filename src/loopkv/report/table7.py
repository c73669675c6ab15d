"""LLA Table 7 (the broad suite) from our lm-eval runs: one row per served (method, budget), our
measured columns first (every real benchmark and the synthetic tasks through the same lm-eval path),
the paper's beside them. MMLU stands where the paper has MMLU-Pro (no offline data); BBH is its BIG-bench source tasks' multiple
choice (data/bigbench.py), not BBH's generated exact match.
"""
from __future__ import annotations

from loopkv.data.benchmarks import MC_SUITE
from loopkv.report import tables
from loopkv.report.paper_values import TABLE7, TABLE7_SOURCE

MEASURED = [("gsm8k", "GSM8K EM\nstrict"), ("gsm8k_flexible", "GSM8K EM\nflexible"),
            ("gsm8k_no_answer", "GSM8K\nno answer"), ("math500", "MATH-500 EM\nmath-verify"),
            ("math500_sympy", "MATH-500 EM\nsympy"), ("math500_no_answer", "MATH-500\nno answer"), ("humaneval", "HumanEval\npass@1"),
            ("mbpp", "MBPP\npass@1"), ("bbh", "BBH src MC\nacc"), ("mmlu", "MMLU\nacc"), ("mc_avg", "MC-avg\nacc"),
            ("arithmetic", "arith\nEM"), ("passkey", "passkey"), ("cloze", "cloze\nacc")]
PAPER = [("paper_gsm8k", "paper\nGSM8K"), ("paper_humaneval", "paper HumanEval\n(EvalPlus base)"),
         ("paper_mbpp", "paper MBPP\n(EvalPlus base)"),
         ("paper_math500", "paper\nMATH-500"), ("paper_bbh", "paper\nBBH"), ("paper_mmlu_pro", "paper\nMMLU-Pro")]
# a task's further metrics beside its headline: metric -> column suffix
SECOND_METRICS = {"gsm8k": {"exact_match_flexible": "flexible", "no_answer": "no_answer"},
                  "math500": {"exact_match_sympy": "sympy", "no_answer": "no_answer"}}
TASKS = [k for k, _ in MEASURED if "_" not in k and k != "mc_avg"] + list(MC_SUITE)

SPEC = tables.TableSpec(
    columns=[("method", "method"), ("budget", "budget"), ("ratio", "ratio"), *MEASURED, *PAPER],
    csv_extra=[f"n_{t}" for t in TASKS] + [f"shots_{t}" for t in TASKS] + [t for t in MC_SUITE] + ["mc_tasks"], width=21,
    # each task's headline is a proportion of its documents (greedy pass@1 included); MC-avg is a mean of tasks
    proportions={k: f"n_{k.split('_')[0]}" for k, _ in MEASURED if k != "mc_avg"})


def build_rows(results: list[dict]) -> list[dict]:
    """results: merged lm-eval-merge JSONs (any order); one row per (method, budget) in first-seen order."""
    by_model: dict[tuple[str, str], dict] = {}
    for r in results:
        row = by_model.setdefault((r["method"], r["budget"]), {
            "method": r["method"], "budget": r["budget"], "ratio": r["setting"]["ratio"]})
        data = r["task"].removeprefix("loopkv_")
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


def note(rows: list[dict]) -> str:
    n = {t: sorted({r[f"n_{t}"] for r in rows if f"n_{t}" in r}) for t in TASKS}
    run = [r for r in rows if r["budget"] != tables.NOT_RUN]
    sizes = ", ".join(f"{t} {v[0] if len(v) == 1 else v}" for t, v in n.items() if v)
    shots = {t: sorted({r[f"shots_{t}"] for r in rows if f"shots_{t}" in r}) for t in TASKS}
    shown = ", ".join(f"{t} {v[0] if len(v) == 1 else v}-shot" for t, v in shots.items() if v and v != [0])
    return (f"Every cell through lm-eval with model 'loopkv' (the method's own cache, greedy decoding, "
            f"{shown + ', the rest ' if shown else ''}0-shot; shots are other items of the same set, never the item); "
            f"documents per cell: {sizes}. MC-avg = mean accuracy over {run[0]['mc_tasks'] or 'none'}. "
            f"MMLU in place of the paper's MMLU-Pro (no offline data); BBH = 18 BIG-bench source tasks' multiple choice "
            f"(log-likelihood), the paper's BBH is generated exact match; its HumanEval / MBPP are EvalPlus pass@1 on the base tests. GSM8K strict = the number after '#### ', flexible = the last number; MATH-500 by math-verify (headline) and by our sympy checker beside it. Budget '{tables.NOT_RUN}': a paper row this configuration does not run. A tiny model trained on "
            f"Shakespeare and synthetic tasks: real-benchmark scores near chance are expected. Paper: {TABLE7_SOURCE}.")
