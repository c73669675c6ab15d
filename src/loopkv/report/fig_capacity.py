"""LLA Figure 10: capacity (the largest batch whose cache fits the memory) against context length, per
served method, at this run's model and at the paper's sizes (serve-bench's capacity_by_context, each a
search over real allocations, or on the meta device at the paper's sizes). Table 5's capacities at 4k
tokens on an H200 stand beside the Ouro-1.4B / 2.6B panels."""
from __future__ import annotations

from loopkv.errors import LoopKVError
from loopkv.report.paper_values import TABLE5_FOOTPRINT, TABLE5_SOURCE
from loopkv.report.tables import FIGURE_STYLE, TEXT_WIDTH, method_label, wrapped

PAPER_CONTEXT = 4096   # Table 5's capacities are at a 4k context


def series(rows: list[dict]) -> dict[str, dict[str, list[tuple[int, int]]]]:
    """scale -> "method budget" -> [(context, max batch)] in context order; a repeated point is refused."""
    out: dict = {}
    for r in rows:
        line = out.setdefault(r["scale"], {}).setdefault(f"{r['method']} {r['budget']}", [])
        if any(c == r["context"] for c, _ in line):
            raise LoopKVError(f"capacity_by_context: {r['scale']} {r['method']} {r['budget']} at {r['context']} twice")
        line.append((int(r["context"]), int(r["max_batch"])))
    for lines in out.values():
        for line in lines.values():
            line.sort()
    return out


def plot(rows: list[dict], pdf_path, png_path, dpi: int) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = series(rows)
    if not data:
        raise LoopKVError("capacity_by_context is empty: serve.capacity_contexts names no context")
    with plt.rc_context(FIGURE_STYLE):
        fig, axes = plt.subplots(1, len(data), figsize=(TEXT_WIDTH, 2.8), layout="constrained", squeeze=False)
        for ax, (scale, lines) in zip(axes[0], data.items()):
            for name, points in lines.items():
                method, budget = name.split(" ")
                shown = [(c, b) for c, b in points if b > 0]   # log axes: a batch of 0 (nothing fits) is left out
                ax.plot([c for c, _ in shown], [b for _, b in shown], marker="o", ms=3,
                        label=method_label(method) + ("" if method == "full" else f" {budget}"))
            paper = {(m, r): v["max_batch"] for (s, m, r), v in TABLE5_FOOTPRINT.items()
                     if s == scale and "max_batch" in v}
            for (method, ratio), batch in paper.items():
                ax.scatter([PAPER_CONTEXT], [batch], marker="x", color="black", zorder=3)
                ax.annotate(f"paper {method_label(method)}{'' if method == 'full' else f' {ratio:g}x'}",
                            (PAPER_CONTEXT, batch), fontsize=5, xytext=(3, 0), textcoords="offset points")
            ax.set_xscale("log", base=2)
            ax.set_yscale("log", base=2)
            ax.set_xlabel("context length (tokens)")
            ax.set_ylabel("largest batch that fits")
            ax.set_title(scale)
            ax.legend(fontsize=6)
        fig.suptitle(wrapped(f"LLA Figure 10: capacity against context length (x: {TABLE5_SOURCE})"))
        fig.savefig(pdf_path, metadata={"CreationDate": None})
        fig.savefig(png_path, dpi=dpi, format="png", metadata={"Software": None})
        plt.close(fig)
