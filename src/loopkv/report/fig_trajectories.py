"""LLA Figure 3, the cross-loop trajectories of the teacher's K/V, from the same measurement as Figure 2
(cross_loop_structure.json): the energy of each direction of the loop axis (how many directions a
token's T per-loop vectors span) and every layer's cosine to its final loop by loop (where the loops
converge, layer by layer). The paper draws these for Ouro-1.4B without numbers to set beside."""
from __future__ import annotations

from loopkv.errors import LoopKVError
from loopkv.report.tables import FIGURE_STYLE, TEXT_WIDTH, wrapped


def check(measured: dict, where: str) -> None:
    """The fields the figure reads, each kind's lists of the model's sizes."""
    for kind in ("k", "v"):
        energy = measured[kind]["spectra"]["loop"].get("mean_energy_by_direction")
        layers = measured[kind]["convergence"].get("cosine_to_final_by_layer")
        if not isinstance(energy, list) or not energy or not isinstance(layers, list) or not layers:
            raise LoopKVError(f"{where}: {kind.upper()} has no loop-axis energy by direction or per-layer cosines")
        if any(not isinstance(row, list) or len(row) != len(layers[0]) for row in layers):
            raise LoopKVError(f"{where}: {kind.upper()}'s per-layer cosines are not one list of loops per layer")


def plot(measured: dict, pdf_path, png_path, dpi: int, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    with plt.rc_context(FIGURE_STYLE):
        fig, grid = plt.subplots(2, 2, figsize=(TEXT_WIDTH, 4.8), layout="constrained")
        for column, kind in enumerate(("k", "v")):
            energy = measured[kind]["spectra"]["loop"]["mean_energy_by_direction"]
            ax = grid[0][column]
            ax.bar(range(1, len(energy) + 1), energy, color="tab:blue" if kind == "k" else "tab:orange")
            ax.set_xticks(range(1, len(energy) + 1))
            ax.set_yscale("log")
            ax.set_xlabel("direction of the loop axis (by energy)")
            ax.set_ylabel("share of energy")
            ax.set_title(f"{kind.upper()}: energy by loop-axis direction")
            ax = grid[1][column]
            layers = measured[kind]["convergence"]["cosine_to_final_by_layer"]
            for layer, cosines in enumerate(layers):
                ax.plot(range(1, len(cosines) + 1), cosines, marker="o", ms=3, label=f"layer {layer + 1}")
            ax.set_xticks(range(1, len(layers[0]) + 1))
            ax.set_xlabel("loop")
            ax.set_ylabel("cosine to the final loop")
            ax.set_title(f"{kind.upper()}: convergence by layer")
            ax.legend(fontsize=6, ncol=2)
        fig.suptitle(wrapped(f"LLA Figure 3: cross-loop trajectories ({title})"))
        fig.savefig(pdf_path, metadata={"CreationDate": None})
        fig.savefig(png_path, dpi=dpi, format="png", metadata={"Software": None})
        plt.close(fig)
