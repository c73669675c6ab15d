"""LLA Figure 11, the on-policy rank Pareto: accuracy against cache bytes per token for the off- and
on-policy codecs at every Table 4 budget and the teacher, each point with its 95% Wilson interval, and
each policy's Pareto front (no point both smaller and at least as accurate). The paper's intervals are
bootstraps of re-evaluations; a percentile bootstrap of one evaluation's items collapses to a point
when every item agrees (0 of n: [0, 0]), so ours is the interval of every other accuracy in loopkv."""
from __future__ import annotations

from loopkv.report import tables
from loopkv.stats.intervals import wilson


def points(cells: list[dict], teacher: list[dict], teacher_bytes: int) -> list[dict]:
    """cells: per budget {"off": metrics, "off_samples", "on_samples"} (outcomes as exposure.py makes
    them); teacher: its outcomes. One point per (policy, budget) and the teacher's."""
    def point(policy, budget, ratio, nbytes, outcomes, index):
        est = wilson(sum(bool(o["correct"]) for o in outcomes), len(outcomes), tables.LEVEL)
        return {"policy": policy, "budget": budget, "ratio": ratio, "bytes_per_token": nbytes,
                "accuracy": est.value, "lo": est.lo, "hi": est.hi, "n": len(outcomes)}

    out = [point("teacher", "1x", 1.0, teacher_bytes, teacher, 0)]
    for i, c in enumerate(cells):
        m = c["off"]
        for j, policy in enumerate(("off", "on")):
            out.append(point(policy, m["budget"], m["setting"]["ratio"], m["bytes_per_token"], c[f"{policy}_samples"],
                             1 + 2 * i + j))
    for policy in ("off", "on"):
        mine = [p for p in out if p["policy"] == policy]
        for p in mine:
            p["pareto"] = not any(q is not p and q["bytes_per_token"] <= p["bytes_per_token"]
                                  and q["accuracy"] >= p["accuracy"]
                                  and (q["bytes_per_token"], q["accuracy"]) != (p["bytes_per_token"], p["accuracy"])
                                  for q in mine)
    return out


def plot(pts: list[dict], pdf_path, png_path, dpi: int, source: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    styles = {"teacher": ("black", "*", "teacher"), "off": ("tab:blue", "o", "off-policy"), "on": ("tab:orange", "s", "on-policy")}
    with plt.rc_context(tables.FIGURE_STYLE):
        fig, ax = plt.subplots(figsize=(tables.TEXT_WIDTH * 0.6, 3.2), layout="constrained")
        for policy, (colour, marker, label) in styles.items():
            mine = sorted((p for p in pts if p["policy"] == policy), key=lambda p: p["bytes_per_token"])
            ax.errorbar([p["bytes_per_token"] for p in mine], [p["accuracy"] for p in mine],
                        yerr=[[p["accuracy"] - p["lo"] for p in mine], [p["hi"] - p["accuracy"] for p in mine]],
                        fmt=marker, color=colour, capsize=2, label=label)
            front = [p for p in mine if p.get("pareto")]
            if len(front) > 1:
                ax.plot([p["bytes_per_token"] for p in front], [p["accuracy"] for p in front], "-", color=colour, lw=0.8)
            for p in mine:
                if policy != "teacher":
                    ax.annotate(p["budget"], (p["bytes_per_token"], p["accuracy"]), fontsize=6, xytext=(3, 3),
                                textcoords="offset points")
        ax.set_xscale("log")
        ax.set_xlabel("cache bytes per token")
        ax.set_ylabel(f"accuracy ({source})")
        ax.legend(fontsize=6)
        ax.set_title(tables.wrapped("LLA Figure 11: accuracy against cache bytes, off- and on-policy codecs "
                                    "(95% Wilson intervals; lines: each policy's Pareto front)",
                                    tables.TEXT_WIDTH * 0.6))
        fig.savefig(pdf_path, metadata={"CreationDate": None})
        fig.savefig(png_path, dpi=dpi, format="png", metadata={"Software": None})
        plt.close(fig)
