"""Off- vs on-policy distillation: LLA Table 4 (accuracy and no-answer rate per compression ratio) and
Figure 7 (exposure curves: accuracy and no-answer rate binned by generated length; teacher vs
off-policy vs on-policy students). Two sources of the outcomes, one table: the arithmetic chains of the
method evaluations (the embedded default; no answer = no "#### N" in the output), or a benchmark
through lm-eval, as the paper (on_policy.benchmark: MATH-500; no answer = nothing extractable, the
task's own `no_answer`; generated length = the scored output's tokens, re-encoded)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loopkv.data.tasks.arithmetic import extract_final_answer  # noqa: E402
from loopkv.errors import LoopKVError  # noqa: E402
from loopkv.report import tables  # noqa: E402
from loopkv.report.paper_values import TABLE4, TABLE4_SOURCE  # noqa: E402

ARITHMETIC = "arithmetic"
NAMES = {"math500": "MATH-500"}   # the benchmarks Table 4 can read (config.ON_POLICY_BENCHMARKS): the paper's
LABELS = {ARITHMETIC: "arith EM", "math500": "MATH-500 acc."}


def table_spec(source: str) -> tables.TableSpec:
    """Table 4's columns, the accuracy headed by its source (arithmetic chains or a benchmark)."""
    label = LABELS.get(source.split("-")[0], f"{source} acc.")
    return tables.TableSpec(
        columns=[("method", "method"), ("budget", "budget"), ("ratio", "ratio"),
                 ("em_off", f"{label}\noff-policy"), ("em_on", f"{label}\non-policy"),
                 ("no_answer_off", "no answer\noff-policy"), ("no_answer_on", "no answer\non-policy"),
                 ("em_on_minus_off", f"{label}\non - off"), ("no_answer_on_minus_off", "no answer\non - off"),
                 ("kl_off", "KL streamed\noff-policy"), ("kl_on", "KL streamed\non-policy"),
                 ("paper_off", "paper\noff-policy"), ("paper_on", "paper\non-policy"),
                 ("paper_no_answer_off", "paper no ans.\noff-policy"), ("paper_no_answer_on", "paper no ans.\non-policy")],
        csv_extra=["source", "n_items", "teacher_em", "teacher_no_answer", "on_policy_steps", "window_kl_off",
                   "window_kl_on", "on_policy_kl_start", "on_policy_kl_best", "on_policy_best_step"],
        width=22, proportions={k: "n_items" for k in ("em_off", "em_on", "no_answer_off", "no_answer_on")},
        own_intervals=DIFFERENCES)


DIFFERENCES = ("em_on_minus_off", "no_answer_on_minus_off")   # paired over the same items


SPEC = table_spec(ARITHMETIC)   # the embedded default's


def arithmetic_outcomes(quality_samples: dict) -> list[dict]:
    """Per item {id, correct, no_answer, n_generated} from a method evaluation's arithmetic samples."""
    return [{"id": s.get("id", i), "correct": bool(s["correct"]), "no_answer": extract_final_answer(s["output"]) is None,
             "n_generated": s["n_generated"]} for i, s in enumerate(quality_samples["samples"]["arithmetic"])]


def served_codec(result: dict) -> str | None:
    """The codec a merged lm-eval result served: its record, or, merged before results recorded it, the
    off-policy one when a shard read a codec (lm-eval-merge's own fallback)."""
    if "codec_training" in result:
        return result["codec_training"]
    shards = result.get("provenance", {}).get("merged_from", {}).values()
    return "off_policy" if any("codec" in s.get("inputs", {}) for s in shards) else None


def benchmark_outcomes(result: dict, count_tokens, where: str, training: str | None,
                       served: tuple[str, str] | None = None) -> list[dict]:
    """Per document {id, correct, no_answer, n_generated} from a merged greedy lm-eval result; `training`:
    the codec it must have served (off_policy / on_policy; None: the teacher, no codec); `served`: the
    (method, budget) it must be of."""
    if result.get("samples_per_doc", 1) != 1:
        raise LoopKVError(f"{where}: a sampled result ({result['samples_per_doc']} samples a document); "
                          f"Table 4 reads greedy runs")
    if served is not None and (result.get("method"), result.get("budget")) != served:
        raise LoopKVError(f"{where}: a result of {result.get('method')}/{result.get('budget')}, Table 4 expects "
                          f"{served[0]}/{served[1]} here")
    if served_codec(result) != training:
        raise LoopKVError(f"{where}: served {served_codec(result) or 'no'} codec, Table 4 expects "
                          f"{training or 'none (the teacher)'} here")
    headline = result["headline"]
    out = []
    for s in result["samples"]:
        for key in (headline, "no_answer", "output"):
            if key not in s:
                raise LoopKVError(f"{where}: document {s.get('doc_id')} has no {key!r}")
        out.append({"id": s["doc_id"], "correct": s[headline] == 1.0, "no_answer": s["no_answer"] == 1.0,
                    "n_generated": count_tokens(s["output"])})
    return out


def rates(outcomes: list[dict]) -> dict:
    n = len(outcomes)
    return {"em": sum(o["correct"] for o in outcomes) / n, "no_answer": sum(o["no_answer"] for o in outcomes) / n, "n": n}


def exposure_curve(outcomes: list[dict], bin_tokens: int) -> list[dict]:
    """Accuracy and no-answer rate per generated-length bin [lo, lo + bin_tokens)."""
    bins: dict[int, list[dict]] = {}
    for o in outcomes:
        bins.setdefault(o["n_generated"] // bin_tokens * bin_tokens, []).append(o)
    return [{"lo": lo, "hi": lo + bin_tokens, **rates(group)} for lo, group in sorted(bins.items())]


def on_minus_off(on: list[dict], off: list[dict]) -> dict:
    """On- minus off-policy accuracy and no-answer rate, each with a paired interval over the items
    (joined by id; Tango's score interval from the discordant items): both codecs answer the same items,
    so item difficulty is shared and the interval is far narrower than two independent ones (Newcombe's)."""
    from loopkv.stats.intervals import paired_proportion_difference

    by_id = {o["id"]: o for o in off}
    pairs = [(o, by_id[o["id"]]) for o in sorted(on, key=lambda o: o["id"])]
    fields = {}
    for metric, key in (("em_on_minus_off", "correct"), ("no_answer_on_minus_off", "no_answer")):
        d = paired_proportion_difference([a[key] for a, _ in pairs], [b[key] for _, b in pairs], tables.LEVEL)
        fields.update({metric: d.value, f"{metric}_lo": d.lo, f"{metric}_hi": d.hi})
    return fields


def table_rows(cells: list[dict], teacher: list[dict], source: str = ARITHMETIC) -> list[dict]:
    """cells: per budget {"off": metrics, "on": metrics, "off_samples", "on_samples" (outcomes), "on_curve",
    "off_curve"}; teacher: the teacher's outcomes on the same items; source: where the outcomes come from."""
    t, ids = rates(teacher), sorted(o["id"] for o in teacher)
    if len(set(ids)) != len(ids):
        raise LoopKVError(f"Table 4: the teacher's {source} items repeat an id")
    rows = []
    for c in cells:
        for side in ("off", "on"):
            if sorted(o["id"] for o in c[f"{side}_samples"]) != ids:
                raise LoopKVError(f"Table 4 at {c['off']['budget']}: the {side}-policy {source} items are not the teacher's")
        off, on = rates(c["off_samples"]), rates(c["on_samples"])
        paper = TABLE4.get(round(c["off"]["setting"]["ratio"], 2), {})
        rows.append({"method": c["off"]["method"], "budget": c["off"]["budget"], "ratio": c["off"]["setting"]["ratio"],
                     "em_off": off["em"], "em_on": on["em"], "no_answer_off": off["no_answer"],
                     "no_answer_on": on["no_answer"], **on_minus_off(c["on_samples"], c["off_samples"]),
                     "kl_off": c["off"]["fidelity"]["kl"],
                     "kl_on": c["on"]["fidelity"]["kl"], "source": source, "n_items": off["n"], "teacher_em": t["em"],
                     "teacher_no_answer": t["no_answer"], "on_policy_steps": c["on_curve"]["curve"]["train"][-1]["step"],
                     # teacher-forced KL on validation windows (off-policy's selection metric) before / after
                     "window_kl_off": c["off_curve"]["best"]["kl"], "window_kl_on": c["on_curve"]["best"]["window_kl"],
                     # KL on the student's own continuations of held-out prompts (on-policy's selection metric)
                     "on_policy_kl_start": c["on_curve"]["curve"]["heldout"][0]["kl"],
                     "on_policy_kl_best": c["on_curve"]["best"]["kl"], "on_policy_best_step": c["on_curve"]["best"]["step"],
                     **{f"paper_{k}": v for k, v in paper.items()}})
    run = {round(r["ratio"], 2) for r in rows}
    return rows + tables.not_run_rows(TABLE4, run, lambda ratio, paper: {
        "method": "lla", "budget": tables.NOT_RUN, "ratio": ratio, **{f"paper_{k}": v for k, v in paper.items()}})


def source_note(source: str, n: int, shots: int | None = None) -> str:
    if source == ARITHMETIC:
        return (f"Arithmetic chains (exact match on '#### N', n={n}) stand in for MATH-500; no answer = "
                f"no '#### N' in the output.")
    return (f"{NAMES.get(source.split('-')[0], source)} through lm-eval (greedy, n={n} documents"
            f"{f', {shots}-shot' if shots else ''}); no answer = nothing extractable from the output.")


def table_note(rows: list[dict], shots: int | None = None) -> str:
    return (f"{source_note(rows[0]['source'], rows[0]['n_items'], shots)} Teacher: accuracy {rows[0]['teacher_em']:.3f}, no answer "
            f"{rows[0]['teacher_no_answer']:.3f}. 'on - off': on- minus off-policy on the same items, 95% paired "
            f"interval (Tango's score interval from the items answered differently). On-policy = the off-policy codec continued for "
            f"{rows[0]['on_policy_steps']} steps on the student's own samples (Eq. 6-7). KL streamed = "
            f"decode KL to the teacher on test windows. Budget '{tables.NOT_RUN}': a paper row this configuration "
            f"does not run. Paper: {TABLE4_SOURCE}.")


@plt.rc_context(tables.FIGURE_STYLE)
def plot_exposure(curves: list[dict], bin_tokens: int, pdf, png, dpi: int, source: str = ARITHMETIC) -> None:
    """curves: per budget {"budget", "teacher": curve, "off": curve, "on": curve}."""
    width = min(tables.TEXT_WIDTH, 1.0 + 2.4 * len(curves))   # one column per budget, at most the text width
    fig, axes = plt.subplots(2, len(curves), figsize=(width, 5.0), squeeze=False, layout="constrained")
    # the paper's colours (LLA Figure 7): teacher grey, off-policy blue, on-policy red
    styles = {"teacher": ("tab:gray", "o", "-"), "off": ("tab:blue", "s", "--"), "on": ("tab:red", "^", "-")}
    names = {"teacher": "teacher", "off": "off-policy", "on": "on-policy"}
    for col, c in enumerate(curves):
        for key in ("teacher", "off", "on"):
            xs = [(p["lo"] + p["hi"]) / 2 for p in c[key]]
            colour, marker, line = styles[key]
            for row, metric in enumerate(("em", "no_answer")):
                values = [p[metric] for p in c[key]]
                bounds = [tables.proportion_interval(p[metric], p["n"], f"{key} {metric}") for p in c[key]]
                yerr = [[v - b.lo for v, b in zip(values, bounds)], [b.hi - v for v, b in zip(values, bounds)]]
                axes[row, col].errorbar(xs, values, yerr=yerr, color=colour, marker=marker, linestyle=line,
                                        capsize=2, label=names[key])
        axes[0, col].set_title(f"LLA {c['budget']}")
        axes[0, col].set_ylabel("exact match" if source == ARITHMETIC else "accuracy")
        axes[1, col].set_ylabel("no-answer rate")
        axes[1, col].set_xlabel(f"generated tokens (bins of {bin_tokens})")
        for ax in axes[:, col]:
            ax.set_ylim(-0.03, 1.03)
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    what = "arithmetic chains" if source == ARITHMETIC else NAMES.get(source.split("-")[0], source)
    fig.suptitle(tables.wrapped(f"Exposure curves: {what} binned by generated length, 95% Wilson "
                                f"intervals per bin (paper: {TABLE4_SOURCE}, Figure 7)", width))
    fig.savefig(pdf, metadata={"CreationDate": None})
    fig.savefig(png, dpi=dpi)
    plt.close(fig)
