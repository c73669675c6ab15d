"""Memory with generation length (MELT's 32k comparison, scaled down) and cache bytes against T."""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loopkv.report.tables import method_label, method_labels  # noqa: E402

MIB = 2 ** 20
STYLE = {"full": ("tab:blue", "o", "-"), "melt": ("tab:orange", "s", "-"), "lla": ("tab:green", "^", "--")}


def _style(method: str) -> dict:
    colour, marker, line = STYLE.get(method, (None, "x", ":"))
    return {"color": colour, "marker": marker, "linestyle": line}


def _label(curve: dict) -> str:
    name = method_label(curve["method"])
    return name if curve["method"] in ("full", "melt") else f"{name} {curve['budget']}"


def summary(memory: dict) -> dict:
    """Ratios at the longest length: teacher cache / method cache, and process-peak growth ratios."""
    curves = {c["method"]: c for c in memory["curves"]}
    teacher = curves["full"]["points"][-1]
    base = curves["full"]["process_after_load"]["memory_bytes"]
    out = {}
    for name, c in curves.items():
        last = c["points"][-1]
        out[name] = {"generated": last["generated"],
                     "cache_bytes_at_cache_dtype": last["cache_bytes_at_cache_dtype"],
                     "cache_ratio_to_teacher": teacher["cache_bytes_at_cache_dtype"] / last["cache_bytes_at_cache_dtype"],
                     "peak_memory_bytes": last["peak_memory_bytes"],
                     "peak_growth_bytes": last["peak_memory_bytes"] - c["process_after_load"]["memory_bytes"],
                     "teacher_process_after_load": base}
    return out


def plot_memory(memory: dict, paper: dict, pdf_path, png_path, dpi: int = 150) -> None:
    fig, panels = plt.subplots(1, 3, figsize=(16, 4.2))
    for c in memory["curves"]:
        n = [p["generated"] for p in c["points"]]
        panels[0].plot(n, [p["cache_bytes_at_cache_dtype"] / MIB for p in c["points"]], label=_label(c),
                       **_style(c["method"]))
        panels[1].plot(n, [p["peak_memory_bytes"] / MIB for p in c["points"]], label=_label(c), **_style(c["method"]))
    panels[0].set(xlabel="generated tokens", ylabel=f"cache MiB ({memory['cache_dtype']})",
                  title=f"KV cache, batch {memory['batch']}")
    growth = ", ".join(f"{_label(c)} +{summary_growth / MIB:.0f}" for c in memory["curves"]
                       for summary_growth in [c["points"][-1]["peak_memory_bytes"] - c["process_after_load"]["memory_bytes"]])
    measure = memory["curves"][0]["memory_measure"]
    panels[1].set(xlabel="generated tokens",
                  ylabel=f"peak memory, MiB ({measure}; {memory['device']}, {memory['compute_dtype']})",
                  title=f"process memory; peak growth after loading (MiB): {growth}")
    panels[1].title.set_fontsize(8)
    methods = sorted({r["method"] for r in memory["bytes_over_loops"]}, key=list(method_labels()).index)
    loops = sorted({r["loops"] for r in memory["bytes_over_loops"]})
    width = 0.8 / len(methods)
    for i, m in enumerate(methods):
        rows = {r["loops"]: r for r in memory["bytes_over_loops"] if r["method"] == m}
        label = method_label(m) + ("" if m in ("full", "melt") else f" {rows[loops[0]]['budget']}")
        panels[2].bar([j + i * width for j in range(len(loops))], [rows[t]["bytes_per_token"] / 1024 for t in loops],
                      width, label=label, color=STYLE.get(m, (None,))[0])
    panels[2].set_xticks([j + 0.4 - width / 2 for j in range(len(loops))], [f"T={t}" for t in loops])
    panels[2].set(ylabel=f"KiB per token ({memory['cache_dtype']})", title="cache bytes per token against T")
    for p in panels:
        p.legend(fontsize=8)
        p.grid(alpha=0.3)
    s = summary(memory)
    ours = ", ".join(f"{_label({'method': m, 'budget': ''}).strip()} {v['cache_ratio_to_teacher']:.2f}x"
                     for m, v in s.items() if m != "full")
    totals = paper["total_gb"]
    fig.suptitle(f"Ours ({memory['device']}, {s['full']['generated']} generated tokens): teacher cache / method cache = "
                 f"{ours}. Paper ({paper['source']}): KV {paper['kv_ratio']:.0f}x smaller, total "
                 f"{totals['ouro']} GB (Ouro) vs {totals['melt']} GB (MELT) = {totals['ouro'] / totals['melt']:.2f}x",
                 fontsize=9)
    fig.tight_layout(rect=(0, 0, 1, 0.93))
    fig.savefig(pdf_path, metadata={"CreationDate": None})
    fig.savefig(png_path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
