"""Off- vs on-policy distillation: LLA Table 4 (accuracy and no-answer rate per compression ratio) and
Figure 7 (exposure curves: accuracy and no-answer rate binned by generated length; teacher vs
off-policy vs on-policy students). Our reasoning task is the arithmetic chains (the paper's is
MATH-500): a sample has no answer when its output holds no "#### N"."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loopkv.data.tasks.arithmetic import extract_final_answer  # noqa: E402
from loopkv.report import tables  # noqa: E402
from loopkv.report.paper_values import TABLE4, TABLE4_SOURCE  # noqa: E402

SPEC = tables.TableSpec(
    columns=[("method", "method"), ("budget", "budget"), ("ratio", "ratio"),
             ("em_off", "arith EM\noff-policy"), ("em_on", "arith EM\non-policy"),
             ("no_answer_off", "no answer\noff-policy"), ("no_answer_on", "no answer\non-policy"),
             ("kl_off", "KL streamed\noff-policy"), ("kl_on", "KL streamed\non-policy"),
             ("paper_off", "paper\noff-policy"), ("paper_on", "paper\non-policy"),
             ("paper_no_answer_off", "paper no ans.\noff-policy"), ("paper_no_answer_on", "paper no ans.\non-policy")],
    csv_extra=["n_arith", "teacher_em", "teacher_no_answer", "on_policy_steps", "window_kl_off", "window_kl_on",
               "on_policy_kl_start", "on_policy_kl_best", "on_policy_best_step"],
    width=19, proportions={k: "n_arith" for k in ("em_off", "em_on", "no_answer_off", "no_answer_on")})


def arithmetic_samples(quality_samples: dict) -> list[dict]:
    return quality_samples["samples"]["arithmetic"]


def rates(samples: list[dict]) -> dict:
    n = len(samples)
    return {"em": sum(s["correct"] for s in samples) / n,
            "no_answer": sum(extract_final_answer(s["output"]) is None for s in samples) / n, "n": n}


def exposure_curve(samples: list[dict], bin_tokens: int) -> list[dict]:
    """Accuracy and no-answer rate per generated-length bin [lo, lo + bin_tokens)."""
    bins: dict[int, list[dict]] = {}
    for s in samples:
        bins.setdefault(s["n_generated"] // bin_tokens * bin_tokens, []).append(s)
    return [{"lo": lo, "hi": lo + bin_tokens, **rates(group)} for lo, group in sorted(bins.items())]


def table_rows(cells: list[dict], teacher: dict) -> list[dict]:
    """cells: per budget {"off": metrics, "on": metrics, "off_samples", "on_samples", "on_curve", "off_curve"}."""
    t = rates(arithmetic_samples(teacher))
    rows = []
    for c in cells:
        off, on = rates(c["off_samples"]), rates(c["on_samples"])
        paper = TABLE4.get(round(c["off"]["setting"]["ratio"], 2), {})
        rows.append({"method": c["off"]["method"], "budget": c["off"]["budget"], "ratio": c["off"]["setting"]["ratio"],
                     "em_off": off["em"], "em_on": on["em"], "no_answer_off": off["no_answer"],
                     "no_answer_on": on["no_answer"], "kl_off": c["off"]["fidelity"]["kl"],
                     "kl_on": c["on"]["fidelity"]["kl"], "n_arith": off["n"], "teacher_em": t["em"],
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


def table_note(rows: list[dict]) -> str:
    return (f"Arithmetic chains (exact match on '#### N', n={rows[0]['n_arith']}) stand in for MATH-500; no answer = "
            f"no '#### N' in the output. Teacher: EM {rows[0]['teacher_em']:.3f}, no answer "
            f"{rows[0]['teacher_no_answer']:.3f}. On-policy = the off-policy codec continued for "
            f"{rows[0]['on_policy_steps']} steps on the student's own samples (Eq. 6-7). KL streamed = "
            f"decode KL to the teacher on test windows. Budget '{tables.NOT_RUN}': a paper row this configuration "
            f"does not run. Paper: {TABLE4_SOURCE}.")


@plt.rc_context(tables.FIGURE_STYLE)
def plot_exposure(curves: list[dict], bin_tokens: int, pdf, png, dpi: int) -> None:
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
        axes[0, col].set_ylabel("exact match")
        axes[1, col].set_ylabel("no-answer rate")
        axes[1, col].set_xlabel(f"generated tokens (bins of {bin_tokens})")
        for ax in axes[:, col]:
            ax.set_ylim(-0.03, 1.03)
            ax.grid(alpha=0.3)
    axes[0, 0].legend()
    fig.suptitle(tables.wrapped(f"Exposure curves: arithmetic chains binned by generated length, 95% Wilson "
                                f"intervals per bin (paper: {TABLE4_SOURCE}, Figure 7)", width))
    fig.savefig(pdf, metadata={"CreationDate": None})
    fig.savefig(png, dpi=dpi)
    plt.close(fig)
