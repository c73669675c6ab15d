"""LLA Figure 8 / Table 12 from our runs: passkey exact recall for every served method. The paper's
cell is a (ratio, length) pair pooled over its depths (15 trials = 5 keys x 3 depths), its boundary
drawn on those pooled cells; the figure's first panel is that view (rows: methods, columns: lengths),
then one (depth, length) heatmap per method with the stricter every-depth boundary."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from loopkv.report import tables  # noqa: E402
from loopkv.report.paper_values import FIG8_OURO_2_6B, TABLE12_BY_MODEL, TABLE12_SOURCE_NOTE  # noqa: E402


def grid(data_rows: list[dict], result: dict) -> dict:
    """{"lengths", "depths", "accuracy" [depth][length], "n" [depth][length]} of one method's merged
    lm-eval result over the grid's data rows (joined on document index)."""
    lengths = sorted({r["meta"]["length"] for r in data_rows})
    depths = sorted({r["meta"]["depth"] for r in data_rows})
    hits = np.zeros((len(depths), len(lengths)))
    n = np.zeros((len(depths), len(lengths)), dtype=int)
    for sample in result["samples"]:
        meta = data_rows[sample["doc_id"]]["meta"]
        d, L = depths.index(meta["depth"]), lengths.index(meta["length"])
        hits[d, L] += sample["accuracy"]
        n[d, L] += 1
    if (n == 0).any():
        raise ValueError(f"{result['method']}/{result['budget']}: some grid cells have no documents")
    return {"lengths": lengths, "depths": depths, "accuracy": (hits / n).tolist(), "n": n.tolist()}


def pooled(cells: dict) -> list[float]:
    """Recall per length over all its depths (the paper's cell), weighted by trials."""
    acc, n = np.array(cells["accuracy"]), np.array(cells["n"])
    return ((acc * n).sum(axis=0) / n.sum(axis=0)).tolist()


def reliable_length(cells: dict, bar: float, every_depth: bool = False) -> int | None:
    """The longest length L such that every cell at lengths <= L recalls >= bar (None: not even the
    shortest). Cells are the paper's (length, pooled over depths), or with every_depth each (depth,
    length) cell: stricter, one bad depth ends it."""
    per_length = ([min(row[j] for row in cells["accuracy"]) for j in range(len(cells["lengths"]))]
                  if every_depth else pooled(cells))
    best = None
    for length, value in zip(cells["lengths"], per_length):
        if value < bar:
            break
        best = length
    return best


def label(result: dict) -> str:
    name = tables.method_label(result["method"])
    return name if result["method"] == "full" else f"{name} {result['budget']}"


def plot_pooled(ax, results: list[dict], cells: list[dict], bar: float):
    """The paper's view: one row per method, one column per length, the black staircase through the
    right edge of each row's reliable length."""
    acc = np.array([pooled(c) for c in cells])
    image = ax.imshow(acc, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="upper")
    ax.set_xticks(range(len(cells[0]["lengths"])), [str(x) for x in cells[0]["lengths"]], fontsize=7)
    ax.set_yticks(range(len(results)), [label(r) for r in results], fontsize=7)
    for (i, j), value in np.ndenumerate(acc):
        ax.text(j, i, f"{value:.2f}", ha="center", va="center", fontsize=6, color="white" if value < 0.5 else "black")
    for i, c in enumerate(cells):
        reliable = reliable_length(c, bar)
        edge = -0.5 if reliable is None else c["lengths"].index(reliable) + 0.5
        ax.plot([edge, edge], [i - 0.5, i + 0.5], color="black", linewidth=2)
    ax.set_title(tables.wrapped(f"pooled over depths (the paper's cells); black: reliable (>= {bar:g})",
                                tables.TEXT_WIDTH / 2), fontsize=8)
    ax.set_xlabel("length (tokens)", fontsize=7)
    return image


@plt.rc_context(tables.FIGURE_STYLE)
def plot(results: list[dict], cells: list[dict], bar: float, pdf, png, dpi: int, paper_model: str = "Ouro-1.4B") -> None:
    cols = min(2, len(results) + 1)   # two panels a row at the text width
    rows = -(-(len(results) + 1) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(tables.TEXT_WIDTH, 2.6 * rows + 0.9), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(results) + 1:]:
        ax.axis("off")
    plot_pooled(axes.flat[0], results, cells, bar)
    for ax, result, c in zip(axes.flat[1:], results, cells):
        acc = np.array(c["accuracy"])
        image = ax.imshow(acc, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        ax.set_xticks(range(len(c["lengths"])), [str(x) for x in c["lengths"]], fontsize=7)
        ax.set_yticks(range(len(c["depths"])), [f"{d:g}" for d in c["depths"]], fontsize=7)
        for (d, L), value in np.ndenumerate(acc):
            ax.text(L, d, f"{value:.2f}", ha="center", va="center", fontsize=6,
                    color="white" if value < 0.5 else "black")
        reliable = reliable_length(c, bar, every_depth=True)
        if reliable is not None:   # the boundary: right edge of the last reliable length
            ax.axvline(c["lengths"].index(reliable) + 0.5, color="red", linewidth=2)
        ax.set_title(f"{label(result)}  (every depth reliable: {reliable if reliable is not None else 'none'})",
                     fontsize=8)
        if ax in axes[-1] or ax is axes.flat[len(results)]:
            ax.set_xlabel("length (tokens)", fontsize=7)
        if ax in axes[:, 0]:
            ax.set_ylabel("needle depth", fontsize=7)
    fig.colorbar(image, ax=axes, shrink=0.6, label="exact recall")
    fig.suptitle(tables.wrapped(f"Passkey exact recall by length (first panel, the paper's view) and by length and "
                                f"depth (red: every depth >= {bar:g}); paper: {TABLE12_BY_MODEL[paper_model][1]}, "
                                f"{TABLE12_SOURCE_NOTE}"))
    fig.savefig(pdf, metadata={"CreationDate": None})
    fig.savefig(png, dpi=dpi)
    plt.close(fig)


def table_rows(results: list[dict], cells: list[dict], bar: float,
               paper_model: str = "Ouro-1.4B") -> tuple[list[dict], tables.TableSpec]:
    lengths = cells[0]["lengths"]
    paper_grid, _ = TABLE12_BY_MODEL[paper_model]
    rows = []
    for result, c in zip(results, cells):
        row = {"method": result["method"], "budget": result["budget"], "ratio": result["setting"]["ratio"],
               "reliable_length": reliable_length(c, bar),
               "reliable_every_depth": reliable_length(c, bar, every_depth=True),
               "n_per_cell": int(np.min(np.array(c["n"]).sum(axis=0))), "n_per_depth_cell": int(np.min(c["n"])),
               "paper": paper_grid.get(tables.ratio_key(result["method"], result["setting"]["ratio"], paper_grid))}
        row.update({f"len_{L}": value for L, value in zip(lengths, pooled(c))})
        row.update({f"n_len_{L}": int(trials) for L, trials in zip(lengths, np.array(c["n"]).sum(axis=0))})
        rows.append(row)
    run = {tables.ratio_key(r["method"], r["ratio"], paper_grid) for r in rows}
    rows += tables.not_run_rows(paper_grid, run, lambda key, value: {
        "method": key[0], "budget": tables.NOT_RUN, "ratio": key[1], "paper": value})
    spec = tables.TableSpec(
        columns=[("method", "method"), ("budget", "budget"), ("ratio", "ratio"),
                 *((f"len_{L}", f"recall\n{L} tok") for L in lengths), ("reliable_length", "reliable\nlength"),
                 ("reliable_every_depth", "reliable at\nevery depth"), ("paper", "paper (2k-64k)")],
        csv_extra=["n_per_cell", "n_per_depth_cell", *(f"n_len_{L}" for L in lengths)], width=7.5 + 1.3 * len(lengths),
        proportions={f"len_{L}": f"n_len_{L}" for L in lengths})
    return rows, spec


def paper_2_6b_note() -> str:
    return "; ".join(f"Ouro-2.6B {tables.method_label(m)} {r:g}x: {v}" for (m, r), v in FIG8_OURO_2_6B.items())
