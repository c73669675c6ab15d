"""Memory with generation length (MELT's 32k comparison, scaled down) and cache bytes against T.

Each curve is labelled with the read path its method decoded through (the probe's `read_path`,
loopkv.eval.memory.capacity_read_path): LLA and LLA-2D read through `fused`, their capacity path
(latents stored and read in place by the latent-attention kernel, no K/V of the context
materialised), so the peak is what serving the smaller cache takes; their `latent` path would add,
at every read, a decoded copy of the whole history's K/V of one (loop, layer) to the peak. A codec
method without a fused read (mla_head) decodes its history at every read, and its label says so.
The other methods (the teacher, MELT) are labelled by name alone: they have no read paths.
"""
from __future__ import annotations

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from loopkv.report.tables import FIGURE_STYLE, TEXT_WIDTH, method_label, method_labels, wrapped  # noqa: E402

MIB = 2 ** 20
STYLE = {"full": ("tab:blue", "o", "-"), "melt": ("tab:orange", "s", "-"), "lla": ("tab:green", "^", "--")}


def _style(method: str) -> dict:
    colour, marker, line = STYLE.get(method, (None, "x", ":"))
    return {"color": colour, "marker": marker, "linestyle": line}


def read_note(curve: dict) -> str:
    """How the curve's method read its cache: its read path when it has read paths (recorded by the
    probe), "no fused read" for a codec method without one (it decodes its whole history per read,
    which its peak includes), else "" (the method reads the K/V it stores)."""
    from loopkv.cache.registry import codec_methods   # the classes (imports torch): on first use

    if curve.get("read_path"):
        return f"{curve['read_path']} read"
    return "no fused read: decodes K/V per read" if curve["method"] in codec_methods() else ""


def _label(curve: dict) -> str:
    name = method_label(curve["method"])
    name = name if curve["method"] in ("full", "melt") else f"{name} {curve['budget']}"
    note = read_note(curve)
    return f"{name} ({note})" if note else name


def summary(memory: dict) -> dict:
    """Ratios at the longest length: teacher cache / method cache, and process-peak growth ratios."""
    curves = {c["method"]: c for c in memory["curves"]}
    teacher = curves["full"]["points"][-1]
    base = curves["full"]["process_after_load"]["memory_bytes"]
    out = {}
    for name, c in curves.items():
        last = c["points"][-1]
        out[name] = {"label": _label(c), "read_path": c.get("read_path"), "generated": last["generated"],
                     "cache_bytes_at_cache_dtype": last["cache_bytes_at_cache_dtype"],
                     "cache_ratio_to_teacher": teacher["cache_bytes_at_cache_dtype"] / last["cache_bytes_at_cache_dtype"],
                     "peak_memory_bytes": last["peak_memory_bytes"],
                     "peak_growth_bytes": last["peak_memory_bytes"] - c["process_after_load"]["memory_bytes"],
                     "teacher_process_after_load": base}
    return out


@plt.rc_context(FIGURE_STYLE)
def plot_memory(memory: dict, paper: dict, pdf_path, png_path, dpi: int = 150) -> None:
    fig = plt.figure(figsize=(TEXT_WIDTH, 5.6), layout="constrained")
    mosaic = fig.subplot_mosaic([["cache", "peak"], ["bytes", "bytes"]])
    panels = [mosaic["cache"], mosaic["peak"], mosaic["bytes"]]
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
    panels[1].set(xlabel="generated tokens", ylabel="peak memory, MiB",
                  title=wrapped(f"process memory ({measure}; {memory['device']}, {memory['compute_dtype']}); "
                                f"peak growth after loading (MiB): {growth}", TEXT_WIDTH / 2))
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
        p.legend()
        p.grid(alpha=0.3)
    s = summary(memory)
    ours = ", ".join(f"{method_label(m)} {v['cache_ratio_to_teacher']:.2f}x" for m, v in s.items() if m != "full")
    reads = "; ".join(v["label"] for m, v in s.items() if read_note({"method": m, "read_path": v["read_path"]}))
    totals = paper["total_gb"]
    fig.suptitle(wrapped(f"Ours ({memory['device']}, {s['full']['generated']} generated tokens): teacher cache / "
                         f"method cache = {ours}. Paper ({paper['source']}): KV {paper['kv_ratio']:.0f}x smaller, total "
                         f"{totals['ouro']} GB (Ouro) vs {totals['melt']} GB (MELT) = "
                         f"{totals['ouro'] / totals['melt']:.2f}x"
                         + (f". Read paths: {reads}; fused = the capacity path, latents read in place, no context "
                            "K/V materialised" if reads else "")))
    fig.savefig(pdf_path, metadata={"CreationDate": None})
    fig.savefig(png_path, dpi=dpi, metadata={"Software": None})
    plt.close(fig)
