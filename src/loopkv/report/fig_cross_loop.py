"""Figure 2 of the LLA paper (Figure 4 on Huginn), from our calibration: per-axis spectra and loop
convergence. The paper's values stand beside ours where it gives them (Figure 2's; Figure 4 has none)."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loopkv.report.tables import FIGURE_STYLE, TEXT_WIDTH, wrapped  # noqa: E402

AXES = ("loop", "head", "layer")


@plt.rc_context(FIGURE_STYLE)
def plot_cross_loop_structure(result: dict, paper: dict | None, pdf_path, png_path, dpi: int = 150) -> None:
    fig, grid = plt.subplots(2, 2, figsize=(TEXT_WIDTH, 5.4), layout="constrained")
    panels = list(grid.flat)
    width = 0.38
    x = range(len(AXES))
    for i, (kind, colour) in enumerate((("k", "tab:blue"), ("v", "tab:orange"))):
        spectra = result[kind]["spectra"]
        offsets = [a + (i - 0.5) * width for a in x]
        panels[0].bar(offsets, [spectra[a]["normalized_effective_rank"] for a in AXES], width, color=colour,
                      label=kind.upper())
        panels[1].bar(offsets, [spectra[a]["first_direction_energy"] for a in AXES], width, color=colour,
                      label=kind.upper())
        conv = result[kind]["convergence"]
        loops = range(1, len(conv["cosine_to_final"]) + 1)
        panels[2].plot(loops, conv["cosine_to_final"], marker="o", color=colour, label=kind.upper())
        panels[3].plot(list(loops)[1:], conv["relative_change"][1:], marker="o", color=colour, label=kind.upper())
    if paper is not None:
        low, high = paper["loop_normalized_effective_rank"]
        panels[0].axhspan(low, high, xmin=0.0, xmax=1 / 3, color="grey", alpha=0.3, label="paper, loop axis")
        panels[1].hlines(paper["loop_first_direction_energy"], -0.5, 0.5, colors="black", linestyles="--",
                         label="paper, loop axis")
    for panel, title in zip(panels[:2], ("normalised effective rank", "first-direction energy")):
        panel.set_xticks(list(x), AXES)
        panel.set_ylim(0, 1.05)
        panel.set_title(title)
        panel.legend(fontsize=7)
    shares = {k: result[k]["loop_variance_share"] for k in ("k", "v")}
    beside = (f"(paper {paper['loop_variance_share']['k']:.0%}, {paper['loop_variance_share']['v']:.0%})"
              if paper is not None else "(the paper gives no values for this model)")
    # a panel is half the text width: its notes are wrapped to it (unwrapped, the two overlap and run off the page)
    panels[0].set_xlabel(wrapped(f"loop-axis variance share: K {shares['k']:.1%}, V {shares['v']:.1%} {beside}",
                                 TEXT_WIDTH / 2, fontsize=7), fontsize=7)
    caption = axis_error_caption(result.get("svd_error_by_axis"))
    if caption:
        panels[1].set_xlabel(wrapped(caption, TEXT_WIDTH / 2, fontsize=7), fontsize=7)
    panels[2].set_title("cosine to the final loop")
    panels[3].set_title("relative change from the previous loop")
    for panel in panels[2:]:
        panel.set_xlabel("loop")
        panel.xaxis.get_major_locator().set_params(integer=True)
        panel.legend(fontsize=7)
    fig.suptitle(wrapped(result.get("title", "cross-loop structure of the teacher's K/V")))
    fig.savefig(pdf_path, metadata={"CreationDate": None})  # byte-identical reruns
    fig.savefig(png_path, dpi=dpi)
    plt.close(fig)


def axis_error_caption(errors: dict | None) -> str:
    """The head- over loop-axis SVD error at equal budget, at 16x and at the largest ratio both axes
    reach. The ratios are a result file's keys ("8x", "16x", ...): they sort as strings, so the
    largest is found by value."""
    if not errors:
        return ""
    largest = max(errors, key=lambda label: int(label.rstrip("x")))
    shown = dict.fromkeys(label for label in ("16x", largest) if label in errors)
    text = "; ".join(f"{label}: K {errors[label]['k']['head_over_loop']:.1f}x, "
                     f"V {errors[label]['v']['head_over_loop']:.1f}x" for label in shown)
    return f"SVD error at equal budget, head axis / loop axis: {text}"
