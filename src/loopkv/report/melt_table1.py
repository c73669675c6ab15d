"""MELT Table 1 (its reasoning, knowledge and code benchmarks) from our lm-eval runs: one row per
benchmark the paper reports, in its order, never dropped (one this run did not evaluate says "not
run"); our teacher (full/1x) and MELT (melt/<its budget>) measured, each with a 95% interval and n,
the decoding, generation budget and scoring used; the paper's MELT and Ouro-1.4B-Thinking beside (the
CSV has every model the paper reports).

One unit: fractions (0-1). Ours are fractions of documents; the paper's percentages are divided by
100 here, once, and a measured value outside [0, 1] is refused (a percentage where a fraction belongs).

Intervals as table7's: a greedy or log-likelihood run is a proportion of its n documents (Wilson); a
sampled run is pass@1 (each document's share of correct samples, averaged over documents) with a
percentile bootstrap over documents (n = documents).

Which run of a benchmark: lm_eval.tasks may run one more than one way (a `variant`, e.g. sampled beside
greedy). The row takes the run that both models have over one only one has, then the one matching
MELT's decoding (sampled at MELT_TABLE1_DECODING's temperature and top-p; most samples a document
first), then the benchmark's unlabelled (greedy) run, then another sampled run, then any other; the
footnote names the others.
"""
from __future__ import annotations

import json
import math

from loopkv.errors import LoopKVError
from loopkv.report import tables
from loopkv.report.paper_values import MELT_TABLE1, MELT_TABLE1_MODELS, MELT_TABLE1_DECODING, MELT_TABLE1_SOURCE

MODELS = ("teacher", "melt")    # our measured columns: the teacher's full cache, MELT at its budget
SHOWN_PAPER = ("melt", "ouro")  # MELT_TABLE1_MODELS shown beside ours; the CSV has all of them
OTHER_PAPER = [m for m in MELT_TABLE1_MODELS if m not in SHOWN_PAPER]
# how each benchmark is scored here; "*" marks a benchmark MELT scores otherwise (the footnote says how)
SCORING = {"math": "math-verify", "mc": "letter log-lik.", "code": "pass@1 sandbox"}
SCORING_DIFFERS = {"gpqa": "MELT generates its answer", "mmlu_redux": "MELT generates its answer",
                   "hle": "HLE's grader is a model"}
TITLE = ("MELT Table 1, its benchmarks through lm-eval: the teacher and MELT (ours) beside the paper's; "
         "all values fractions (paper % / 100)")


def _kind(bench: str) -> str:
    from loopkv.data.benchmarks import get_benchmark

    return get_benchmark(bench).kind


def _label(bench: str) -> str:
    from loopkv.report.table7 import BENCH_LABELS

    return BENCH_LABELS.get(bench, bench)


def paper_fraction(bench: str, model: str) -> float | None:
    """The paper's value of `model` on `bench` as a fraction (it prints percentages), or None."""
    value = MELT_TABLE1[bench].get(model)
    if value is None:
        return None
    if not 0.0 <= value <= 100.0:
        raise LoopKVError(f"MELT_TABLE1[{bench!r}][{model!r}] = {value}: not a percentage")
    return round(value / 100.0, 6)


def _fraction(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or math.isnan(value) or not 0.0 <= value <= 1.0:
        raise LoopKVError(f"{what}: {value!r} is not a fraction in [0, 1], this table's unit (a percentage?)")
    return float(value)


def _decoding(r: dict, bench: str) -> dict:
    """How the result's outputs were produced (a result written before it recorded that: greedy, or
    log-likelihood for a multiple-choice task)."""
    return r.get("decoding") or {"strategy": "loglikelihood" if _kind(bench) == "mc" else "greedy"}


def decoding_text(decoding: dict) -> str:
    """table7's: `T=1.0 p=0.7 n=4` for sampling, else greedy or log-likelihood."""
    from loopkv.report.table7 import decoding_text as text

    return "log-likelihood" if decoding["strategy"] == "loglikelihood" else text(decoding)


def _melt_protocol(decoding: dict) -> bool:
    return (decoding["strategy"] == "sampling"
            and math.isclose(decoding["temperature"], MELT_TABLE1_DECODING["temperature"])
            and math.isclose(decoding["top_p"], MELT_TABLE1_DECODING["top_p"]))


def _preference(tid: str, runs: list[dict], bench: str) -> tuple:
    from loopkv.eval.lm_tasks import split_task_id

    decoding = _decoding(runs[0], bench)
    sampled = decoding["strategy"] == "sampling"
    rank = 0 if _melt_protocol(decoding) else 1 if split_task_id(tid)[1] is None else 2 if sampled else 3
    return -len(runs), rank, -decoding.get("samples", 1), tid


def _template_budget(bench: str) -> int | None:
    """The generation budget of the benchmark's task template (what a null max_gen_toks runs with)."""
    import yaml

    from loopkv.eval.lm_tasks import TEMPLATES, get_lm_task, task_name

    class _Loader(yaml.SafeLoader):   # the templates' `!function` tags name code: read them as nothing
        pass

    _Loader.add_multi_constructor("!", lambda loader, suffix, node: None)
    cfg = yaml.load((TEMPLATES / get_lm_task(task_name(bench)).template).read_text(), Loader=_Loader)
    return (cfg.get("generation_kwargs") or {}).get("max_gen_toks")


def max_new_tokens(r: dict, tid: str, bench: str) -> int | None:
    """The generation budget the run had (its shards' config slice; the template's when that left it
    null), or None: scored by log-likelihood, or a result whose provenance does not say."""
    if _decoding(r, bench)["strategy"] == "loglikelihood":
        return None
    for prov in ((r.get("provenance") or {}).get("merged_from") or {}).values():
        settings = (((prov or {}).get("config") or {}).get("lm_eval") or {}).get("tasks", {}).get(tid)
        if settings is not None:
            return settings.get("max_gen_toks") or _template_budget(bench)
    return None


def _estimate(r: dict, bench: str, what: str):
    value = _fraction(r["metrics"][r["headline"]], what)
    if _decoding(r, bench)["strategy"] == "sampling":
        from loopkv.report.table7 import pass_at_1

        return pass_at_1(r, what)
    return tables.proportion_interval(value, r["n"], what)


def _index(results: list[dict], sources: list | None) -> tuple[dict, str | None]:
    """{(model, task id): result} and MELT's budget label, refusing a result that is not of MELT
    Table 1: another benchmark, another model, a second MELT budget, or the same run twice."""
    from loopkv.eval.lm_tasks import split_task_id, task_id

    by: dict[tuple[str, str], dict] = {}
    budgets: dict[str, str] = {}
    for i, r in enumerate(results):
        data = r["task"].removeprefix("loopkv_")
        tid = r.get("task_id") or task_id(data, r.get("variant"))
        where = f"{sources[i]} ({r['method']}/{r['budget']}, task {tid})" if sources else \
            f"lm-eval result {r['method']}/{r['budget']} {tid}"
        if split_task_id(tid)[0] != data:
            raise LoopKVError(f"{where}: its task id {tid!r} is not a run of its task {r['task']!r}")
        if data not in MELT_TABLE1:
            raise LoopKVError(f"{where}: {data!r} is not a benchmark of MELT Table 1 "
                              f"({', '.join(MELT_TABLE1)})")
        if r["method"] == "full" and r["budget"] == "1x":
            model = "teacher"
        elif r["method"] == "melt":
            model = "melt"
            budgets.setdefault(r["budget"], where)
        else:
            raise LoopKVError(f"{where}: MELT Table 1 sets the teacher (full/1x) beside MELT (melt/<its budget>), "
                              f"not {r['method']}/{r['budget']}")
        if (model, tid) in by:
            raise LoopKVError(f"{where}: a second result of {r['method']}/{r['budget']} on {tid}")
        by[model, tid] = r
    if len(budgets) > 1:
        raise LoopKVError(f"MELT at more than one budget: {'; '.join(budgets.values())}: MELT runs at one")
    return by, next(iter(budgets), None)


def build_rows(results: list[dict], sources: list | None = None) -> list[dict]:
    """results: merged lm-eval JSONs of full/1x and melt/<budget> on MELT Table 1's benchmarks (any
    order; `sources`, their paths, name a refused one). One row per MELT_TABLE1 benchmark, in its order."""
    from loopkv.eval.lm_tasks import split_task_id

    by, budget = _index(results, sources)
    rows = []
    for bench in MELT_TABLE1:
        row = {"benchmark": _label(bench), "melt_model": f"melt/{budget}" if budget else None,
               **{f"paper_{m}": paper_fraction(bench, m) for m in MELT_TABLE1_MODELS}}
        runs: dict[str, list[dict]] = {}
        for (model, tid), r in by.items():
            if split_task_id(tid)[0] == bench:
                runs.setdefault(tid, []).append(r)
        if not runs:
            rows.append({**row, "task": tables.NOT_RUN})
            continue
        tid = min(runs, key=lambda t: _preference(t, runs[t], bench))
        first = runs[tid][0]
        decodings = {json.dumps(_decoding(r, bench), sort_keys=True) for r in runs[tid]}
        if len(decodings) > 1:
            raise LoopKVError(f"{bench} ({tid}): the teacher's and MELT's results disagree on the decoding: "
                              f"{sorted(decodings)}")
        decoding = _decoding(first, bench)
        row.update(task=tid, decoding=decoding_text(decoding), max_new_tokens=max_new_tokens(first, tid, bench),
                   scoring=SCORING[_kind(bench)] + (" *" if bench in SCORING_DIFFERS else ""),
                   scoring_differs=SCORING_DIFFERS.get(bench),
                   melt_protocol=_melt_protocol(decoding), samples_per_doc=decoding.get("samples", 1),
                   shots=first.get("shots", 0), headline=first["headline"],
                   also_run=" ".join(sorted(set(runs) - {tid})) or None)
        for model in MODELS:
            r = by.get((model, tid))
            if r is None:
                continue
            est = _estimate(r, bench, f"{model} on {tid} ({r['method']}/{r['budget']})")
            row.update({model: est.value, f"{model}_lo": est.lo, f"{model}_hi": est.hi, f"n_{model}": est.n,
                        f"interval_{model}": est.method})
        rows.append(row)
    return rows


def spec(rows: list[dict]) -> tables.TableSpec:
    melt = next((r["melt_model"] for r in rows if r.get("melt_model")), "melt (no result)")
    return tables.TableSpec(
        columns=[("benchmark", "benchmark"), ("task", "run\n(task id)"), ("decoding", "decoding"),
                 ("max_new_tokens", "max new\ntokens"), ("scoring", "scoring"),
                 ("teacher", "ours: teacher\nfull/1x"), ("n_teacher", "n"), ("melt", f"ours: MELT\n{melt}"),
                 ("n_melt", "n"),
                 *((f"paper_{m}", f"paper\n{MELT_TABLE1_MODELS[m]}".replace("-Thinking", "-\nThinking"))
                   for m in SHOWN_PAPER)],
        csv_extra=["scoring_differs", "melt_model", "melt_protocol", "samples_per_doc", "shots", "headline", "also_run",
                   *(f"interval_{m}" for m in MODELS), *(f"paper_{m}" for m in OTHER_PAPER)],
        width=20.0, own_intervals=MODELS)


def teacher_name(model: dict) -> str:
    """The teacher this run serves, as the note names it: the checkpoint's path, or the embedded tiny one."""
    if model["source"] == "pretrained":
        return f"the checkpoint {model['path']}"
    return "the tiny teacher trained here from scratch"


def note(rows: list[dict], teacher: str) -> str:
    run = [r for r in rows if r["task"] != tables.NOT_RUN]
    not_run = [r["benchmark"] for r in rows if r["task"] == tables.NOT_RUN]
    off = [f"{r['benchmark']} ({r['decoding']})" for r in run
           if not r["melt_protocol"] and r["decoding"] != "log-likelihood"]
    others = [f"{r['benchmark']}: {r['task']} shown, {r['also_run']} also run" for r in run if r.get("also_run")]
    return (
        f"Teacher: {teacher}; the paper's Ouro column is {MELT_TABLE1_MODELS['ouro']}, so our teacher "
        "column compares with it only when that checkpoint is the one served. "
        "Unit: every value is a fraction (0-1), ours of documents and the paper's its percentage / 100. Ours: "
        "through lm-eval with model 'loopkv' (the teacher's full cache; MELT at its budget), 95% intervals: a "
        "greedy or log-likelihood run is a proportion of its n documents (Wilson), a sampled run (decoding 'T= p= n=': "
        "nucleus sampling at temperature T, top-p p, n samples a document) is pass@1, each document's share of "
        "correct samples averaged over documents, with a percentile bootstrap over documents (10,000 resamples; "
        "n = documents). When a benchmark ran more than one way, the row shows the run matching MELT's decoding "
        f"(sampled, temperature {MELT_TABLE1_DECODING['temperature']:.1f}, top-p {MELT_TABLE1_DECODING['top_p']:g}) "
        "if there is one, else its greedy run" + (f" ({'; '.join(others)})" if others else "") + ". "
        + (f"Not at MELT's decoding here: {', '.join(off)}. " if off else "")
        + "Known differences from MELT's scoring (* in the scoring column): GPQA and MMLU-Redux are scored "
        "here by the log-likelihood of the answer letter (MELT generates its answers); HLE by math-verify on the last boxed answer, as the math "
        "benchmarks (prompted like MATH-500, zero-shot), where HLE's own grader is a model; HumanEval is our "
        "humaneval task (the completion run against its tests in the sandbox), not EvalPlus's HumanEval+; MELT "
        f"generates up to {MELT_TABLE1_DECODING['max_tokens']} tokens, ours up to the max new tokens shown. "
        + (f"'{tables.NOT_RUN}': a benchmark of MELT Table 1 this configuration does not evaluate "
           f"({', '.join(not_run)}; lm_eval.tasks, the files of the user-file ones in data.local_benchmarks). "
           if not_run else "")
        + "'-' in our columns: that model has no result for the run. "
        f"Paper: {MELT_TABLE1_SOURCE}; its other models "
        f"({', '.join(MELT_TABLE1_MODELS[m] for m in OTHER_PAPER)}) are in the CSV.")
