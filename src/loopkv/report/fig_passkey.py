"""LLA Figure 8 / Table 12 from our runs: passkey exact recall per (length, depth) cell for every
served method, as heatmaps with the reliable-length boundary drawn, and the table of recall by length."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from loopkv.report import tables  # noqa: E402
from loopkv.report.paper_values import TABLE12, TABLE12_SOURCE  # noqa: E402


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


def reliable_length(cells: dict, bar: float) -> int | None:
    """The longest length L such that every cell at lengths <= L recalls >= bar (None: not even the shortest)."""
    best = None
    for j, length in enumerate(cells["lengths"]):
        if min(row[j] for row in cells["accuracy"]) < bar:
            break
        best = length
    return best


def label(result: dict) -> str:
    name = tables.method_label(result["method"])
    return name if result["method"] == "full" else f"{name} {result['budget']}"


def plot(results: list[dict], cells: list[dict], bar: float, pdf, png, dpi: int) -> None:
    cols = min(4, len(results))
    rows = -(-len(results) // cols)
    fig, axes = plt.subplots(rows, cols, figsize=(3.6 * cols + 1.0, 3.0 * rows + 0.8), squeeze=False,
                             layout="constrained")
    for ax in axes.flat[len(results):]:
        ax.axis("off")
    for ax, result, c in zip(axes.flat, results, cells):
        acc = np.array(c["accuracy"])
        image = ax.imshow(acc, vmin=0, vmax=1, cmap="viridis", aspect="auto", origin="lower")
        ax.set_xticks(range(len(c["lengths"])), [str(x) for x in c["lengths"]], fontsize=7)
        ax.set_yticks(range(len(c["depths"])), [f"{d:g}" for d in c["depths"]], fontsize=7)
        for (d, L), value in np.ndenumerate(acc):
            ax.text(L, d, f"{value:.2f}", ha="center", va="center", fontsize=6,
                    color="white" if value < 0.5 else "black")
        reliable = reliable_length(c, bar)
        if reliable is not None:   # the boundary: right edge of the last reliable length
            ax.axvline(c["lengths"].index(reliable) + 0.5, color="red", linewidth=2)
        ax.set_title(f"{label(result)}  (reliable: {reliable if reliable is not None else 'none'})", fontsize=8)
        if ax in axes[-1] or ax is axes.flat[len(results) - 1]:
            ax.set_xlabel("length (tokens)", fontsize=7)
        if ax in axes[:, 0]:
            ax.set_ylabel("needle depth", fontsize=7)
    fig.colorbar(image, ax=axes, shrink=0.6, label="exact recall")
    fig.suptitle(f"Passkey exact recall by length and depth (red line: reliable boundary, every depth >= {bar:g}); "
                 f"paper: {TABLE12_SOURCE}", fontsize=9)
    fig.savefig(pdf, metadata={"CreationDate": None})
    fig.savefig(png, dpi=dpi)
    plt.close(fig)


def table_rows(results: list[dict], cells: list[dict], bar: float) -> tuple[list[dict], tables.TableSpec]:
    lengths = cells[0]["lengths"]
    rows = []
    for result, c in zip(results, cells):
        acc = np.array(c["accuracy"])
        row = {"method": result["method"], "budget": result["budget"], "ratio": result["setting"]["ratio"],
               "reliable_length": reliable_length(c, bar), "n_per_cell": int(np.min(c["n"])),
               "paper": TABLE12.get((result["method"], round(result["setting"]["ratio"], 2)))}
        row.update({f"len_{L}": float(acc[:, j].mean()) for j, L in enumerate(lengths)})
        rows.append(row)
    spec = tables.TableSpec(
        columns=[("method", "method"), ("budget", "budget"), ("ratio", "ratio"),
                 *((f"len_{L}", f"recall\n{L} tok") for L in lengths), ("reliable_length", "reliable\nlength"),
                 ("paper", "paper (2k-64k)")], csv_extra=["n_per_cell"], width=6 + 1.3 * len(lengths))
    return rows, spec
