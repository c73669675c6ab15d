"""LLA Table 8 and Figure 5: the cold-start rank sweep. One LLA codec per ratio (methods.rank_sweep),
each SVD-initialised from the teacher's calibration and distilled with Table 1's recipe (no codec is
warm-started from another ratio's), measured like Table 1's cells: two-pass KL, streamed KL / top-1,
the task scores with their intervals and the paired difference to the teacher. The rows are Table 1's
(report/table1.py build_rows) with Table 8's paper columns beside; Figure 5 draws each measured score
against the compression ratio, the teacher as a line, the paper's GSM8K points on their own axis."""
from __future__ import annotations

from loopkv.report import table1, tables
from loopkv.report.paper_values import TABLE8_BY_MODEL, TABLE8_N

PAPER_COLUMNS = [("paper_gsm8k", "paper\nGSM8K"), ("paper_kl", "paper\ntrain-KL")]
# the figure's panels: a measured column and its label; accuracies carry their Wilson interval
PANELS = [("arith_em", "arithmetic EM"), ("cloze_acc", "cloze accuracy"), ("passkey_in", "passkey <= train length"),
          ("kl_two_pass", "two-pass KL (distilled)")]
RANKS = {"rank_k": "r_k", "rank_v": "r_v"}


def benchmarks(table1_benchmarks: dict) -> dict:
    """The real-benchmark columns Table 8 reads: Table 1's GSM8K (the paper's Table 8 column) only, so a
    sweep point costs one lm-eval task at paper scale, not Table 1's whole set."""
    return {"gsm8k": table1_benchmarks["gsm8k"], "mc_avg": [], "mmlu": None}


def paper_grid(paper_model: str) -> tuple[dict, str | None]:
    """Table 8's grid and source for the paper model (Ouro-1.4B); an empty grid for any other."""
    return TABLE8_BY_MODEL.get(paper_model, ({}, None))


def build_rows(cells: list[dict], curves: dict, passkey_train_max: int, samples: list[dict],
               results: list[dict], table1_benchmarks: dict, paper_model: str) -> list[dict]:
    """Table 1's rows of the sweep's cells (the teacher's first), with each codec's ranks; results: the
    merged lm-eval results of Table 1's GSM8K task (methods.table1_benchmarks) for every cell."""
    grid, _ = paper_grid(paper_model)
    rows = table1.build_rows(cells, curves, passkey_train_max, samples, results, benchmarks(table1_benchmarks),
                             paper_model, paper=(grid, PAPER_COLUMNS))
    for row, cell in zip(rows, cells):
        kwargs = cell["setting"].get("kwargs") or {}
        row["ranks"] = "/".join(str(kwargs[k]) for k in RANKS if k in kwargs) or None
    return rows


def spec(rows: list[dict]) -> tables.TableSpec:
    base = table1.table_spec(rows)
    measured = [c for c in base.columns if not c[0].startswith("paper_")]
    measured.insert(measured.index(("ratio", "ratio\nsetting")) + 1, ("ranks", "r_k/r_v"))
    return tables.TableSpec(columns=measured + PAPER_COLUMNS, csv_extra=base.csv_extra, group_key=None,
                            proportions=base.proportions, width=base.width, own_intervals=base.own_intervals)


def note(rows: list[dict], paper_model: str) -> str:
    _, source = paper_grid(paper_model)
    paper = (f"Paper: {source}; GSM8K n = {TABLE8_N['gsm8k']['teacher']} (teacher) / {TABLE8_N['gsm8k']['methods']} "
             f"(codecs), decoded by its earlier streaming decoder; its teacher scores .820 there, .794 in Table 1; "
             f"train-KL given at 4x and 2x only. " if source else
             f"Paper: Table 8 is reported on Ouro-1.4B only; {paper_model} has no paper column. ")
    return ("Cold start: every ratio's codec SVD-initialised from the same calibration and distilled with the same "
            "recipe (distill.*), none warm-started from another ratio. " + table1.footnote(rows, paper_model)
            .split(" Paper:")[0] + " " + paper + f"Budget '{tables.NOT_RUN}': a paper row this configuration does not run.")


def plot(rows: list[dict], pdf_path, png_path, dpi: int, paper_model: str) -> None:
    """Figure 5: each measured score against the compression ratio (codecs as points joined in ratio
    order, 95% intervals on accuracies), the teacher's as a horizontal line with its interval; a last
    panel with the paper's GSM8K points (its own teacher line) where the paper model has them."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = [r for r in tables.with_intervals(rows, spec(rows)) if r["budget"] != tables.NOT_RUN]
    teacher, codecs = run[0], sorted(run[1:], key=lambda r: r["ratio"])
    grid, source = paper_grid(paper_model)
    panels = PANELS + ([("paper_gsm8k", "paper GSM8K")] if grid else [])
    with plt.rc_context(tables.FIGURE_STYLE):
        fig, axes = plt.subplots(1, len(panels), figsize=(tables.TEXT_WIDTH, 2.4), layout="constrained")
        for ax, (key, label) in zip(axes, panels):
            if key == "paper_gsm8k":
                points = sorted((k[1], v["gsm8k"]) for k, v in grid.items() if k[0] == "lla" and "gsm8k" in v)
                ax.plot([p[0] for p in points], [p[1] for p in points], "s--", color="grey", label="paper LLA")
                ax.axhline(grid[("full", 1.0)]["gsm8k"], color="black", lw=0.8, label="paper teacher")
            else:
                xs = [r["ratio"] for r in codecs if r.get(key) is not None]
                ys = [r[key] for r in codecs if r.get(key) is not None]
                errors = None
                if f"{key}_lo" in codecs[0]:
                    errors = [[y - r[f"{key}_lo"] for y, r in zip(ys, codecs)], [r[f"{key}_hi"] - y for y, r in zip(ys, codecs)]]
                ax.errorbar(xs, ys, yerr=errors, fmt="o-", color="tab:blue", capsize=2, label="LLA (ours)")
                if teacher.get(key) is not None:
                    ax.axhline(teacher[key], color="black", lw=0.8, label="teacher")
                    if f"{key}_lo" in teacher:
                        ax.axhspan(teacher[f"{key}_lo"], teacher[f"{key}_hi"], color="black", alpha=0.08)
            ax.set_xlabel("compression ratio")
            ax.set_title(label)
        axes[0].legend(loc="lower left")
        if grid:
            axes[-1].legend(loc="best")
        fig.suptitle(tables.wrapped(f"LLA Figure 5 / Table 8: the cold-start rank sweep, ours (n per point in "
                                    f"Table 8)" + (f"; paper: {source}" if source else "")))
        fig.savefig(pdf_path, metadata={"CreationDate": None})
        fig.savefig(png_path, dpi=dpi, format="png", metadata={"Software": None})
        plt.close(fig)
