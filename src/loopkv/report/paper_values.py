"""Numbers the papers report (LLA: arXiv 2607.15456v2, Ouro-1.4B unless stated). They are shown
only beside our measured values, labelled "paper", never in their place."""

# LLA Figure 2 (Ouro-1.4B): cross-loop structure of the teacher cache.
FIG2_CROSS_LOOP = {
    "source": "LLA paper, Figure 2 / Section 4 (Ouro-1.4B, T=4)",
    "loop_normalized_effective_rank": (0.61, 0.63),
    "loop_first_direction_energy": 0.60,
    "head_and_layer_axes": "near full rank",
    "loop_variance_share": {"k": 0.06, "v": 0.17},
}
